// Router modes across implementations: the stock 1.6.1 frontend and ours, each in front of the
// same two of our workers, must pick the same worker where stock's choice is deterministic:
// least-loaded and power-of-two (two workers) with one worker loaded by a pinned request, a
// worker past the busy threshold by its own load report, and a session bound to its worker.
// Each answer names its worker (nvext.extra_fields: ["worker_id"]). Skipped, never passed, without PyPI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { waitFor } from '@dynamo/testing/free-port';
import { post } from '@dynamo/testing/frontend-stack';
import { type Frontend, healthInstances, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';
import { stockPython } from '@dynamo/testing/stock-dynamo';

const stock = stockPython();
const MODEL = 'ts-route';
const COMPONENT = 'tsroute';
const BLOCK = 16;

/** The worker (decimal instance id) that served one completion. */
async function workerOf(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await post(url, '/v1/completions', { model: MODEL, prompt: 'which worker', max_tokens: 2, nvext: { extra_fields: ['worker_id'] } }, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
  const id = /"decode_worker_id":(\d+)/.exec(text)?.[1];
  if (!id) throw new Error(`no worker id in ${text}`);
  return id;
}

/** Starts a streaming request pinned to `worker` (holding `blocks` prompt blocks) that runs until the returned stop. */
function hold(url: string, worker: string, blocks = 1): () => Promise<void> {
  const abort = new AbortController();
  const body = { model: MODEL, prompt: Array.from({ length: blocks * BLOCK }, (_, i) => 700 + i), max_tokens: 30_000, stream: true };
  const running = post(url, '/v1/completions', body, { headers: { 'x-dynamo-worker-instance-id': worker }, signal: abort.signal })
    .then((r) => r.text())
    .catch(() => '');
  return async () => {
    abort.abort();
    await running;
  };
}

describe.skipIf('skip' in stock)('router modes interop (file + tcp): stock and our frontends pick the same worker', () => {
  let stack: InteropStack;
  let workers: [string, string];
  const pairs: Record<string, [Frontend, Frontend]> = {};

  beforeAll(async () => {
    if ('skip' in stock) return;
    stack = await InteropStack.start(MATRIX_SETUPS[0]!, stock.python);
    const args = ['--simulate-kv-cache', '--kv-block-size', String(BLOCK), '--total-kv-blocks', '64', '--delay-ms', '2', '--context-length', '40960'];
    stack.ourSample(MODEL, COMPONENT, args);
    stack.ourSample(MODEL, COMPONENT, args);
    const modes: Record<string, string[]> = {
      'least-loaded': ['--router-mode', 'least-loaded', '--router-session-affinity-ttl-secs', '60'],
      'power-of-two': ['--router-mode', 'power-of-two'],
      busy: ['--router-mode', 'round-robin', '--active-decode-blocks-threshold', '0.5'],
      sync: ['--router-mode', 'kv', '--router-replica-sync'],
    };
    for (const [name, flags] of Object.entries(modes)) pairs[name] = await Promise.all([stack.stockFrontend(flags), stack.ourFrontend(flags)]);
    for (const fe of Object.values(pairs).flat()) {
      await waitFor(
        `${fe.name} frontend to serve ${MODEL} on two workers`,
        async () => (await healthInstances(fe.url, COMPONENT)).length === 2 && (await listedModels(fe.url)).includes(MODEL),
        120_000,
      );
    }
    const ids = (await healthInstances(pairs.busy![1].url, COMPONENT)).map(String).sort();
    workers = [ids[0]!, ids[1]!];
  }, 300_000);
  afterAll(() => stack?.stop());

  for (const mode of ['least-loaded', 'power-of-two']) {
    it(`${mode}: with a request in flight on one worker, both send the next requests to the other`, async () => {
      for (const fe of pairs[mode]!) {
        for (const [loaded, idle] of [workers, [workers[1], workers[0]]] as const) {
          const stop = hold(fe.url, loaded);
          await new Promise((r) => setTimeout(r, 300));
          // Sequential requests end before the next starts: the loaded worker stays the busier one.
          for (let i = 0; i < 3; i++) expect(`${fe.name}: ${await workerOf(fe.url)}`).toBe(`${fe.name}: ${idle}`);
          await stop();
        }
      }
    });
  }

  it('round-robin with --active-decode-blocks-threshold 0.5: both skip the worker whose load report is past it', async () => {
    const [stockFe, ourFe] = pairs.busy!;
    // 40 of worker A's 64 blocks in use, seen by both frontends from A's own kv_metrics report.
    const stop = hold(ourFe.url, workers[0], 40);
    await waitFor(
      'both frontends to leave worker A out',
      async () => {
        const picks = await Promise.all([workerOf(stockFe.url), workerOf(stockFe.url), workerOf(ourFe.url), workerOf(ourFe.url)]);
        return picks.every((w) => w === workers[1]);
      },
      20_000,
    );
    for (const fe of [stockFe, ourFe]) for (let i = 0; i < 4; i++) expect(`${fe.name}: ${await workerOf(fe.url)}`).toBe(`${fe.name}: ${workers[1]}`);
    await stop();
    await waitFor(
      'both frontends to use worker A again',
      async () => {
        const picks = await Promise.all([workerOf(stockFe.url), workerOf(stockFe.url), workerOf(ourFe.url), workerOf(ourFe.url)]);
        return picks.filter((w) => w === workers[0]).length >= 2;
      },
      20_000,
    );
  });

  for (const [from, to] of [
    [0, 1],
    [1, 0],
  ] as const) {
    it(`kv replica sync: ${from === 0 ? 'stock' : 'our'} frontend's request is counted on its worker by the ${to === 0 ? 'stock' : 'our'} frontend (active_sequences_events)`, async () => {
      const source = pairs.sync![from];
      const peer = pairs.sync![to];
      const counted = async () => {
        const text = await (await fetch(`${peer.url}/metrics`)).text();
        return text
          .split('\n')
          .filter((l) => l.startsWith('dynamo_frontend_worker_active_decode_blocks{'))
          .map((l) => Number(l.split(' ').at(-1)));
      };
      expect((await counted()).some((n) => n > 0)).toBe(false);
      const abort = new AbortController();
      // 20 prompt blocks; a fresh prompt each way, so neither worker caches it.
      const body = { model: MODEL, prompt: Array.from({ length: 20 * BLOCK }, (_, i) => 20_000 + from * 5000 + i), max_tokens: 30_000, stream: true };
      const running = post(source.url, '/v1/completions', body, { signal: abort.signal })
        .then((r) => r.text())
        .catch(() => '');
      await waitFor(`the ${peer.name} frontend to count 20 blocks on the worker`, async () => (await counted()).some((n) => n >= 20), 20_000);
      abort.abort();
      await running;
      await waitFor(`the ${peer.name} frontend to see the request end`, async () => (await counted()).every((n) => n === 0), 20_000);
    });
  }

  for (const [from, to] of [
    [0, 1],
    [1, 0],
  ] as const) {
    it(`session affinity: a session bound by the ${from === 0 ? 'stock' : 'our'} frontend goes to the same worker through the ${to === 0 ? 'stock' : 'our'} one (session_affinity_events)`, async () => {
      const [binder, follower] = [pairs['least-loaded']![from], pairs['least-loaded']![to]];
      const session = { 'x-dynamo-session-id': `shared-${binder.name}` };
      const bound = await workerOf(binder.url, session);
      // Through the follower, least-loaded alone would pick the other worker now.
      const stop = hold(follower.url, bound);
      await new Promise((r) => setTimeout(r, 500));
      expect(await workerOf(follower.url)).toBe(workers.find((w) => w !== bound));
      for (let i = 0; i < 3; i++) expect(`${follower.name}: ${await workerOf(follower.url, session)}`).toBe(`${follower.name}: ${bound}`);
      await stop();
    });
  }

  it('session affinity: a session stays on its worker on both, even when that worker is the busier one', async () => {
    for (const fe of pairs['least-loaded']!) {
      const session = { 'x-dynamo-session-id': `interop-${fe.name}` };
      const bound = await workerOf(fe.url, session);
      const stop = hold(fe.url, bound);
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 5; i++) expect(`${fe.name}: ${await workerOf(fe.url, session)}`).toBe(`${fe.name}: ${bound}`);
      // A request of no session goes to the idle worker.
      expect(`${fe.name}: ${await workerOf(fe.url)}`).toBe(`${fe.name}: ${workers.find((w) => w !== bound)}`);
      await stop();
    }
  });
});
