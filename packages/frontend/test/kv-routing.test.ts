// KV-aware routing with real processes: dynamo-frontend --router-mode kv in front of two
// dynamo-sample-engine workers that simulate a paged prefix cache and publish its KV events.
// A worker that served a prompt reports the prompt's cached tokens on a repeat
// (usage.prompt_tokens_details.cached_tokens), which tells which worker a repeat reached.
import { parseFlags } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { frontendConfig, frontendFlags } from '../src/settings.js';
import type { Child } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { counter } from '@dynamo/testing/interop-stack';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'sample-model';
const COMPONENT = 'sample';
const BLOCK = 16;
/** A prompt of `blocks` full blocks, distinct per `seed`. */
const prompt = (seed: number, blocks: number) => Array.from({ length: blocks * BLOCK }, (_, i) => 1000 + seed * 7919 + i);

/** Sends a completion of `tokens` and returns the cached prompt tokens its worker reported. */
async function cachedTokens(url: string, tokens: number[], maxTokens = 2): Promise<number> {
  const res = await post(url, '/v1/completions', { model: MODEL, prompt: tokens, max_tokens: maxTokens });
  const body = (await res.json()) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } }; error?: unknown };
  if (res.status !== 200) throw new Error(`status ${res.status}: ${JSON.stringify(body)}`);
  return body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

const simulated = (args: string[] = []) => [
  '--simulate-kv-cache',
  '--kv-block-size',
  String(BLOCK),
  '--delay-ms',
  '1',
  '--prefill-ms-per-token',
  '0.01',
  ...args,
];

describe('KV-aware routing (etcd + NATS, KV events on NATS)', () => {
  let deployment: Deployment;
  const workers: Child[] = [];
  let kv: { child: Child; url: string };
  let approx: string;
  let roundRobin: string;
  let busy: string;

  beforeAll(async () => {
    deployment = await Deployment.start(SETUPS[1]!, { DYN_EVENT_PLANE: 'nats' });
    workers.push(deployment.sampleWorker(simulated(['--total-kv-blocks', '64'])), deployment.sampleWorker(simulated(['--total-kv-blocks', '64'])));
    const frontends = await Promise.all([
      deployment.frontend(['--router-mode', 'kv'], { DYN_LOG: 'info' }),
      deployment.frontend(['--router-mode', 'kv', '--no-router-kv-events']),
      deployment.frontend(['--router-mode', 'round-robin']),
      deployment.frontend(['--router-mode', 'kv', '--active-decode-blocks-threshold', '0.5']),
    ]);
    kv = frontends[0];
    [approx, roundRobin, busy] = frontends.slice(1).map((f) => f.url) as [string, string, string];
    for (const f of frontends) await waitForModel(f.url, MODEL, COMPONENT, 2);
  }, 120_000);
  afterAll(() => deployment.stop());

  it('sends a repeated prefix to the worker that cached it, where round-robin misses', async () => {
    const p = prompt(1, 8);
    expect(await cachedTokens(kv.url, p)).toBe(0);
    // The worker's stored event reaches the router over NATS a moment after the response.
    await waitFor('the KV events to arrive', async () => (await cachedTokens(kv.url, [...p, 5, 6, 7])) === 8 * BLOCK);
    for (let i = 0; i < 4; i++) expect(await cachedTokens(kv.url, [...p, 100 + i])).toBe(8 * BLOCK);

    // Round-robin alternates between the workers: a fresh prompt's repeat lands on the other one.
    const q = prompt(2, 8);
    expect(await cachedTokens(roundRobin, q)).toBe(0);
    expect(await cachedTokens(roundRobin, q)).toBe(0);
    const metrics = await (await fetch(`${kv.url}/metrics`)).text();
    expect(metrics).toMatch(/dynamo_component_router_kv_hit_rate_count\{model="sample-model"\} [1-9]/);
    expect(metrics).toMatch(/dynamo_component_router_kv_selected_cached_prefix_tokens_total\{model="sample-model"\} [1-9]/);
  });

  it('approximates without KV events: a repeat goes where the prompt was sent last', async () => {
    const p = prompt(3, 6);
    expect(await cachedTokens(approx, p)).toBe(0);
    for (let i = 0; i < 3; i++) expect(await cachedTokens(approx, [...p, i])).toBe(6 * BLOCK);
  });

  it('steers away from a worker past the busy threshold, and answers 529 when all are', async () => {
    const p = prompt(4, 4);
    expect(await cachedTokens(busy, p)).toBe(0);
    await waitFor('the prefix to be indexed', async () => (await cachedTokens(busy, [...p, 1])) === 4 * BLOCK);
    // A long request of 40 blocks holds the prefix's worker past half of its 64 blocks.
    const long = post(busy, '/v1/completions', { model: MODEL, prompt: [...p, ...prompt(5, 36)], max_tokens: 400 });
    await new Promise((r) => setTimeout(r, 200));
    expect(await cachedTokens(busy, [...p, 2])).toBe(0);
    // Now the other worker is saturated too.
    const other = post(busy, '/v1/completions', { model: MODEL, prompt: prompt(6, 40), max_tokens: 400 });
    await new Promise((r) => setTimeout(r, 200));
    const refused = await post(busy, '/v1/completions', { model: MODEL, prompt: prompt(7, 2), max_tokens: 2 });
    expect(refused.status).toBe(529);
    expect(JSON.stringify(await refused.json())).toContain('busy');
    expect((await long).status).toBe(200);
    expect((await other).status).toBe(200);
    expect(await cachedTokens(busy, prompt(7, 2))).toBe(0);
  });

  it('a frontend started after the workers cached prompts recovers their state from them', async () => {
    // Cached through round-robin (so on both workers) before the new frontend exists.
    const prompts = [20, 21, 22, 23, 24, 25].map((seed) => prompt(seed, 4));
    for (const p of prompts) await cachedTokens(roundRobin, p);
    const late = await deployment.frontend(['--router-mode', 'kv'], { DYN_LOG: 'info' });
    await waitForModel(late.url, MODEL, COMPONENT, 2);
    await waitFor(
      'both workers recovered',
      () =>
        late.child
          .stderr()
          .split('\n')
          .filter((l) => l.includes('KV state recovered from the worker')).length >= 2,
    );
    // Six prompts, each on the worker that cached it: by chance, 1 in 64.
    for (const p of prompts) expect(await cachedTokens(late.url, [...p, 3])).toBe(4 * BLOCK);
    late.child.kill();
  }, 60_000);

  it('removes a worker that dies from the index', async () => {
    // Both workers hold blocks by now (round-robin sent a prompt to each).
    workers[0]!.kill();
    await waitForModel(kv.url, MODEL, COMPONENT, 1);
    // The frontend logs (pino, to stderr) the worker it dropped and the blocks it had indexed.
    const line = await waitFor('the frontend to drop the worker', () =>
      kv.child
        .stderr()
        .split('\n')
        .find((l) => l.includes('worker removed from the KV index')),
    );
    expect(Number(/"cached_blocks":(\d+)/.exec(line)?.[1])).toBeGreaterThan(0);
    // Requests go on to the survivor.
    expect(await cachedTokens(kv.url, prompt(9, 3))).toBe(0);
  }, 40_000);
});

describe('KV-aware routing (file + tcp, KV events on ZMQ, the default)', () => {
  let deployment: Deployment;
  let url: string;

  beforeAll(async () => {
    deployment = await Deployment.start(SETUPS[0]!, { DYN_EVENT_PLANE_HOST: '127.0.0.1' });
    deployment.sampleWorker(simulated());
    deployment.sampleWorker(simulated());
    ({ url } = await deployment.frontend(['--router-mode', 'kv']));
    await waitForModel(url, MODEL, COMPONENT, 2);
  }, 120_000);
  afterAll(() => deployment.stop());

  it('sends a repeated prefix to the worker that cached it', async () => {
    const p = prompt(11, 10);
    expect(await cachedTokens(url, p)).toBe(0);
    await waitFor('the KV events to arrive', async () => (await cachedTokens(url, [...p, 1])) === 10 * BLOCK);
    for (let i = 0; i < 4; i++) expect(await cachedTokens(url, [...p, 50 + i])).toBe(10 * BLOCK);
  });
});

describe('KV-aware prefill routing (disaggregated, file + tcp, KV events on ZMQ)', () => {
  let deployment: Deployment;
  let url: string;
  const prefills: string[] = [];

  beforeAll(async () => {
    deployment = await Deployment.start(SETUPS[0]!, { DYN_EVENT_PLANE_HOST: '127.0.0.1' });
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      prefills.push(`http://127.0.0.1:${port}/metrics`);
      deployment.sampleWorker(simulated(['--disaggregation-mode', 'prefill', '--component', 'prefill']), { DYN_SYSTEM_PORT: String(port) });
    }
    deployment.sampleWorker(['--disaggregation-mode', 'decode', '--component', 'decode', '--delay-ms', '1']);
    ({ url } = await deployment.frontend(['--router-mode', 'kv']));
    await waitForModel(url, MODEL, 'decode', 1);
    await waitFor(
      'both prefill workers behind the frontend',
      async () =>
        ((await (await fetch(`${url}/health`)).json()) as { instances: Array<{ component: string }> }).instances.filter((i) => i.component === 'prefill')
          .length === 2,
    );
  }, 120_000);
  afterAll(() => deployment.stop());

  /** Requests each prefill worker has received so far. */
  const received = () => Promise.all(prefills.map(async (metrics) => counter(metrics, 'dynamo_component_requests_total')));

  it("sends the prefill of a repeated prefix to the prefill worker that cached it, from the prefill workers' KV events", async () => {
    const p = prompt(21, 10);
    const before = await received();
    await cachedTokens(url, p);
    const served = (await received()).findIndex((n, i) => n > before[i]!);
    expect(served).toBeGreaterThanOrEqual(0);
    // Once its KV events reached the router, every repeat goes to the same prefill worker.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const start = await received();
    for (let i = 0; i < 4; i++) await cachedTokens(url, [...p, 70 + i]);
    const after = await received();
    expect(after.map((n, i) => n - start[i]!)).toEqual(served === 0 ? [4, 0] : [0, 4]);
  });
});

describe('KV router flags', () => {
  it("take stock's names, aliases, --no- forms and DYN_* variables, and name a bad value", () => {
    const parse = (argv: string[], env: Record<string, string> = {}) => {
      const parsed = parseFlags(frontendFlags, argv, env);
      if (parsed.help) throw new Error('help');
      return frontendConfig(parsed.values);
    };
    expect(parse(['--router-mode', 'kv', '--no-router-kv-events', '--kv-overlap-score-weight', '0.5', '--router-ttl-secs', '30'])).toMatchObject({
      routing: { mode: 'kv' },
      kvRouter: { useKvEvents: false, overlapScoreWeight: 0.5, ttlSecs: 30, assumeKvReuse: true },
    });
    expect(
      parse([], { DYN_ROUTER_TEMPERATURE: '0.7', DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD: '0.9', DYN_ROUTER_USE_KV_EVENTS: 'false', DYN_EVENT_PLANE: 'nats' }),
    ).toMatchObject({
      kvRouter: { temperature: 0.7, useKvEvents: false },
      busyThresholds: { active_decode_blocks_threshold: 0.9 },
      runtime: { eventPlane: 'nats' },
    });
    expect(() => parse(['--active-decode-blocks-threshold', '1.5'])).toThrow(/--active-decode-blocks-threshold: must be at most 1/);
    expect(() => parse(['--router-temperature', 'hot'])).toThrow(/--router-temperature/);
  });
});
