// The KV router's queue and replica sync on real processes, as stock 1.6.1 has them: with every
// worker busy in prefill, requests wait and leave in FCFS order (or shortest first under wspt),
// with the queue depth metric rising and falling and 529 once the queue is full; and two
// frontends with --router-replica-sync count the same load on a worker.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { waitFor } from '@dynamo/testing/free-port';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { samples } from '@dynamo/testing/interop-stack';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MODEL = 'qwen3-queue';
const BLOCK = 16;
const dir = mkdtempSync(join(tmpdir(), 'router-queue-'));
let deployment: Deployment;
let fcfs: string;
let wspt: string;
let synced: [string, string];
let unsynced: string;

/** A prompt of `n` token ids, distinct per `seed` (so no prefix is cached). */
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 1000 + seed * 5003 + i);

/** A streamed completion; resolves with its status and when its first chunk arrived. */
async function streamed(url: string, tokens: number[], maxTokens = 2): Promise<{ status: number; firstAt: number; body: string }> {
  const res = await post(url, '/v1/completions', { model: MODEL, prompt: tokens, max_tokens: maxTokens, stream: true });
  if (res.status !== 200) return { status: res.status, firstAt: Number.POSITIVE_INFINITY, body: await res.text() };
  const reader = res.body!.getReader();
  let firstAt = Number.POSITIVE_INFINITY;
  for (let r = await reader.read(); !r.done; r = await reader.read()) firstAt = Math.min(firstAt, performance.now());
  return { status: 200, firstAt, body: '' };
}

beforeAll(async () => {
  const config = join(dir, 'policy.yaml');
  writeFileSync(
    config,
    [
      'default_policy_family: std',
      'uncached_isl_buckets: [{min_tokens: 0, bucket: all}]',
      'policy_classes:',
      '  - {name: interactive, policy_family: std, cache_bucket: all, quantum: 1, queue_policy: fcfs, prefill_busy_threshold_frac: 0.0, request_queue_limit_per_worker: 50}',
    ].join('\n'),
  );
  deployment = await Deployment.start(SETUPS[0]!, { DYN_EVENT_PLANE: 'zmq' });
  // Prefill costs 1 ms per uncached prompt token: a request is "busy in prefill" until its first token.
  deployment.sampleWorker([
    '--model-name',
    MODEL,
    '--delay-ms',
    '1',
    '--simulate-kv-cache',
    '--kv-block-size',
    String(BLOCK),
    '--prefill-ms-per-token',
    '1',
    '--context-length',
    '8192',
  ]);
  const started = await Promise.all([
    deployment.frontend(['--router-mode', 'kv', '--router-policy-config', config]),
    deployment.frontend(['--router-mode', 'kv', '--router-queue-threshold', '0', '--router-queue-policy', 'wspt']),
    deployment.frontend(['--router-mode', 'kv', '--router-replica-sync']),
    deployment.frontend(['--router-mode', 'kv', '--router-replica-sync']),
    deployment.frontend(['--router-mode', 'kv']),
  ]);
  [fcfs, wspt] = [started[0]!.url, started[1]!.url];
  synced = [started[2]!.url, started[3]!.url];
  unsynced = started[4]!.url;
  for (const { url } of started) await waitForModel(url, MODEL, 'sample', 1);
}, 90_000);
afterAll(async () => {
  await deployment?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the KV router queue', () => {
  it('holds 50 requests while the worker is busy in prefill, lets them go in arrival order, and answers 529 past its limit', async () => {
    const pending = `dynamo_frontend_router_queue_pending_requests{model="${MODEL}",worker_type="decode",policy_class="interactive"}`;
    expect(await samples(fcfs, pending)).toEqual([0]);
    // A 6000-token prompt keeps the worker in prefill for about 6 s.
    const blocker = streamed(fcfs, prompt(0, 6000));
    await new Promise((r) => setTimeout(r, 200));
    const queued: Array<Promise<{ status: number; firstAt: number; body: string }>> = [];
    for (let i = 1; i <= 50; i++) {
      queued.push(streamed(fcfs, prompt(i, 40)));
      // Each in the queue before the next is sent: they arrive in this order.
      await waitFor(`${i} queued requests in the metric`, async () => (await samples(fcfs, pending))[0] === i, 10_000);
    }
    const refused = await post(fcfs, '/v1/completions', { model: MODEL, prompt: prompt(99, 20), max_tokens: 2 });
    expect(refused.status).toBe(529);
    expect(await refused.json()).toMatchObject({
      message: 'router policy class "interactive" queue requests limit reached (current=50, limit=50)',
      type: 'Overloaded',
      code: 529,
      details: { policy_class: 'interactive', limit_kind: 'requests', current: 50, limit: 50 },
    });
    const results = await Promise.all(queued);
    expect((await blocker).status).toBe(200);
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(200));
    const firsts = results.map((r) => r.firstAt);
    // Each left the queue after the one before it had its first token.
    expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
    expect(await samples(fcfs, pending)).toEqual([0]);
    const backpressure = await samples(fcfs, 'dynamo_frontend_router_queue_backpressure_total{');
    expect(backpressure).toEqual([1]);
  }, 60_000);

  it('under wspt lets the shortest prompt go first', async () => {
    const blocker = streamed(wspt, prompt(200, 3000));
    await new Promise((r) => setTimeout(r, 200));
    const lengths = [90, 30, 70, 10, 50, 80, 20, 60, 40];
    const pending = `dynamo_frontend_router_queue_pending_requests{model="${MODEL}",worker_type="decode",policy_class="default"}`;
    const queued = [];
    for (const [i, n] of lengths.entries()) {
      queued.push(streamed(wspt, prompt(300 + i, n)).then((r) => ({ ...r, n })));
      await waitFor(`${i + 1} queued requests in the metric`, async () => (await samples(wspt, pending))[0] === i + 1, 10_000);
    }
    const results = await Promise.all(queued);
    await blocker;
    expect(results.every((r) => r.status === 200)).toBe(true);
    const order = [...results].sort((a, b) => a.firstAt - b.firstAt).map((r) => r.n);
    expect(order).toEqual([...lengths].sort((a, b) => a - b));
  }, 60_000);
});

describe('a request that names its worker, in kv mode', () => {
  it('is counted on that worker by the KV router, as stock counts it', async () => {
    const health = (await (await fetch(`${unsynced}/health`)).text()).replace(/"instance_id":(\d+)/g, '"instance_id":"$1"');
    const worker = (JSON.parse(health) as { instances: Array<{ instance_id: string }> }).instances[0]!.instance_id;
    const blocks = async () =>
      (await (await fetch(`${unsynced}/metrics`)).text())
        .split('\n')
        .find((l) => l.startsWith(`dynamo_frontend_worker_active_decode_blocks{worker_id="${worker}"`));
    const abort = new AbortController();
    const body = { model: MODEL, prompt: prompt(500, 12 * BLOCK), max_tokens: 5000, stream: true };
    const running = post(unsynced, '/v1/completions', body, { headers: { 'x-dynamo-worker-instance-id': worker }, signal: abort.signal })
      .then((r) => r.text())
      .catch(() => '');
    await waitFor('the pinned request to be counted', async () => (await blocks())?.endsWith(' 12') === true, 10_000);
    abort.abort();
    await running;
    await waitFor('the count to drop when it ends', async () => (await blocks())?.endsWith(' 0') === true, 10_000);
  }, 30_000);
});

describe('replica sync (--router-replica-sync)', () => {
  const blocks = (url: string) => samples(url, 'dynamo_frontend_worker_active_decode_blocks{');

  it("two frontends count each other's requests on a worker; one without sync does not", async () => {
    const [a, b] = synced;
    const abort = new AbortController();
    // 20 blocks of prompt, held while the request streams.
    const running = post(a, '/v1/completions', { model: MODEL, prompt: prompt(400, 20 * BLOCK), max_tokens: 5000, stream: true }, { signal: abort.signal })
      .then((r) => r.text())
      .catch(() => '');
    await waitFor('frontend A to count the request', async () => (await blocks(a)).some((n) => n >= 20), 10_000);
    await waitFor('frontend B to count the same blocks', async () => JSON.stringify(await blocks(b)) === JSON.stringify(await blocks(a)), 10_000);
    expect(await blocks(unsynced)).not.toContain(20);
    abort.abort();
    await running;
    await waitFor('both to see the request end', async () => (await blocks(a)).every((n) => n === 0) && (await blocks(b)).every((n) => n === 0), 10_000);
  }, 60_000);
});
