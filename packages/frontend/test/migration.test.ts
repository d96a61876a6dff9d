// Request migration and cancellation through dynamo-frontend, with real worker processes that are
// SIGKILLed mid-stream. The successor engine continues whatever prompt it gets, so a migrated
// stream must still be exactly tokens p+1, p+2, ... of the original prompt [p].
import { type Tokenizer, LocalModel } from '@dynamo/llm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { Deployment, modelDir, once, post, readStream, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'successor';
let tokenizer: Tokenizer;
let deployment: Deployment;
const fe: Record<'limit0' | 'limit1' | 'limit3', string> = { limit0: '', limit1: '', limit3: '' };
const workers: Child[] = [];

/** The text of tokens first+1 .. first+count. */
const expected = (first: number, count: number) =>
  tokenizer.decode(
    Uint32Array.from({ length: count }, (_, i) => first + i + 1),
    false,
  );

const streamRequest = (url: string, first: number, maxTokens: number, id: string, signal?: AbortSignal) =>
  post(
    url,
    '/v1/completions',
    { model: MODEL, prompt: [first], max_tokens: maxTokens, stream: true },
    { headers: { 'x-request-id': id }, ...(signal && { signal }) },
  );

/** The worker that printed GENERATE for request `id`. */
async function servingWorker(id: string): Promise<Child> {
  return waitFor(`a worker to take ${id}`, () => workers.find((w) => w.lines.includes(`GENERATE ${id}`)), 10_000);
}

/** Replaces the killed `victim` by a fresh worker, once every frontend saw it go and the new one come. */
async function replace(victim: Child): Promise<void> {
  workers.splice(workers.indexOf(victim), 1);
  for (const url of Object.values(fe)) await waitForModel(url, MODEL, 'successor', 1);
  workers.push(deployment.successorWorker(['--delay-ms', '20']));
  for (const url of Object.values(fe)) await waitForModel(url, MODEL, 'successor', 2);
}

describe('request migration and cancellation (file + tcp)', () => {
  beforeAll(async () => {
    tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
    // A short discovery TTL so a SIGKILLed worker's records go away soon after its sockets do.
    deployment = await Deployment.start(SETUPS[0]!, { DYN_FILE_KV_TTL_SECS: '2' });
    workers.push(deployment.successorWorker(['--delay-ms', '20']), deployment.successorWorker(['--delay-ms', '20']));
    [fe.limit0, fe.limit1, fe.limit3] = (await Promise.all(['0', '1', '3'].map((limit) => deployment.frontend(['--migration-limit', limit])))).map(
      (f) => f.url,
    ) as [string, string, string];
    for (const url of Object.values(fe)) await waitForModel(url, MODEL, 'successor', 2);
  }, 120_000);
  afterAll(() => deployment.stop());

  // The streams are long enough (6 s and 40 s at 20 ms a token) for the kill at their 5th event to
  // land mid-stream on a busy machine, where the test may take seconds to act on an event.
  it('with migration limit 1, a worker SIGKILLed mid-stream still yields the full, gap-free sequence', async () => {
    const res = await streamRequest(fe.limit1, 1000, 300, 'migrate-1');
    expect(res.status).toBe(200);
    let victim: Child | undefined;
    const reading = readStream(
      res,
      once(
        5,
        () =>
          void servingWorker('migrate-1').then((w) => {
            victim = w;
            w.kill();
          }),
      ),
    );
    const result = await reading;
    expect(victim).toBeDefined();
    expect(result).toEqual({ text: expected(1000, 300), finishes: ['length'], done: true });
    const metrics = await (await fetch(`${fe.limit1}/metrics`)).text();
    expect(metrics).toMatch(/dynamo_frontend_model_migration_total\{model="successor"\} 1/);
    await replace(victim!);
  }, 60_000);

  it("with migration limit 0, the stream ends with stock's error frame and [DONE] instead", async () => {
    const res = await streamRequest(fe.limit0, 2000, 2000, 'no-migrate-1');
    expect(res.status).toBe(200);
    let victim: Child | undefined;
    const result = await readStream(
      res,
      once(
        5,
        () =>
          void servingWorker('no-migrate-1').then((w) => {
            victim = w;
            w.kill();
          }),
      ),
    );
    expect(result.done).toBe(true);
    expect(result.finishes).toEqual([]);
    expect(result.error).toMatch(/Stream ended before generation completed|disconnected|ended/i);
    expect(expected(2000, 2000).startsWith(result.text)).toBe(true);
    expect(result.text.length).toBeLessThan(expected(2000, 2000).length);
    await replace(victim!);
  }, 60_000);

  // The stream would run 40 s (2000 tokens at 20 ms): the worker prints STOPPED only when the
  // cancellation reaches it, so the line proves the stop. How fast it gets there is a speed goal,
  // not asserted here: a busy machine may take a second to act on the event.
  it('a client that disconnects mid-stream stops the worker', async () => {
    const abort = new AbortController();
    const res = await streamRequest(fe.limit1, 3000, 2000, 'gone-1', abort.signal);
    let abortedAt = 0;
    await readStream(
      res,
      once(5, () => {
        abortedAt = Date.now();
        abort.abort();
      }),
    ).catch(() => undefined);
    const worker = await servingWorker('gone-1');
    const line = await worker.waitForLine(/^STOPPED gone-1 \d+$/, 20_000);
    expect(Number(line.split(' ')[2])).toBeGreaterThanOrEqual(abortedAt);
  });

  it('under load: 200 streams at concurrency 32 all complete exactly while a worker is killed and restarted every 2 s', async () => {
    let running = true;
    const killer = (async () => {
      while (running) {
        await new Promise((r) => setTimeout(r, 2000));
        if (!running) break;
        const victim = workers[workers.length - 1]!;
        victim.kill();
        workers.splice(workers.indexOf(victim), 1);
        workers.push(deployment.successorWorker(['--delay-ms', '20']));
      }
    })();
    const results: Array<{ i: number; ok: boolean; detail: string }> = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < 200) {
          const i = next++;
          const first = 10_000 + i * 100;
          const res = await streamRequest(fe.limit3, first, 40, `load-${i}`);
          const result = res.status === 200 ? await readStream(res) : { text: await res.text(), finishes: [], done: false };
          const ok = result.done && result.text === expected(first, 40) && result.finishes.join() === 'length';
          results.push({ i, ok, detail: ok ? '' : JSON.stringify(result).slice(0, 300) });
        }
      }),
    );
    running = false;
    await killer;
    expect(results.filter((r) => !r.ok)).toEqual([]);
    expect(results).toHaveLength(200);
    const metrics = await (await fetch(`${fe.limit3}/metrics`)).text();
    expect(Number(/dynamo_frontend_model_migration_total\{model="successor"\} (\d+)/.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
  }, 180_000);
});
