// The interop matrix: our frontend, workers and runtime paired with the real stock Dynamo 1.6.1
// release (its frontend, unified-backend sample engine, mocker, and workers on its Python bindings),
// each pairing on file + tcp, etcd + tcp and etcd + NATS (real servers). One deployment per setup
// runs every process at once; each test names its pairing. Skipped, never passed, without PyPI.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DistributedRuntime, InvalidArgument, loadRuntimeConfig } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { runStock, stockPython } from '@dynamo/testing/stock-dynamo';
import { startWorker } from '@dynamo/testing/worker-process';
import { modelDir, post, readStream, sseEvents } from '@dynamo/testing/frontend-stack';
import { counter, type Frontend, healthInstances, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** INTEROP MATRIX SKIPPED: ${stock.skip} ***\n`);

/** Both sample engines stream token i+1 at position i: these characters, in order. */
const SAMPLE_TEXT = `"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_\`abcdefghijklmnopqrstuvwxyz{|}~`;
const USER = 'one two three four five';

/** The workers each frontend is paired with, by the model name they serve. */
interface Worker {
  name: string;
  model: () => string;
  /** The exact text of `n` tokens, when the engine's output is known. */
  text?: (n: number) => string;
}
const WORKERS: Worker[] = [
  { name: 'our dynamo-sample-engine', model: () => 'ts-sample', text: (n) => SAMPLE_TEXT.slice(0, n) },
  { name: 'examples/custom-engine', model: () => 'ts-echo' },
  { name: 'the stock sample engine', model: () => modelDir, text: (n) => SAMPLE_TEXT.slice(0, n) },
  { name: 'the stock mocker', model: () => 'stock-mocker' },
];

/** The golden requests whose PreprocessedRequest stock 1.6.1 sent to a worker (captured by capture-llm.sh). */
const GOLDEN = (
  JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'llm-1.6.1', 'preprocessed-requests.json'), 'utf8')) as Array<{
    name: string;
    path: string;
    request: Record<string, unknown>;
    status: number;
  }>
).filter((c) => c.status === 200 && c.request.model === 'qwen3');

/** The mixed pool's model: a folder of its own, because the stock sample engine serves its folder's path as the name. */
const mixedDir = qwen3ModelDir();

type Chunk = {
  choices: Array<{ delta?: { content?: string }; text?: string; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number };
};

describe.skipIf('skip' in stock).each(MATRIX_SETUPS)('interop matrix, $name', (setup) => {
  let stack: InteropStack;
  const frontends: Record<'stock' | 'our', Frontend> = {} as never;
  const workers = new Map<string, Child>();

  beforeAll(async () => {
    stack = await InteropStack.start(setup, (stock as { python: string }).python);
    workers.set('ts-sample', stack.ourSample('ts-sample', 'ts-sample', ['--delay-ms', '5'], { DYN_LOG: 'warn,engine=debug' }));
    workers.set('ts-echo', stack.customEngine('ts-echo', 'echo', ['--pause-ms', '5', '--tokens-per-chunk', '1']));
    workers.set('stock-sample', stack.stockSample(modelDir, 'sample', ['--delay', '0.005']));
    workers.set('stock-mocker', stack.stockMocker('stock-mocker'));
    workers.set('recorder', stack.stockLlmWorker(['--model-name', 'recorder', '--endpoint', 'dynamo.recorder.generate', '--delay-ms', '5', '--cycle']));
    [frontends.stock, frontends.our] = await Promise.all([
      stack.stockFrontend(['--migration-limit', '3']),
      stack.ourFrontend(['--migration-limit', '3'], { DYN_LOG: 'info' }),
    ]);
    await Promise.all([startMixed('stock'), startMixed('our')]);
    const wanted = [...WORKERS.map((w) => w.model()), 'recorder', mixedDir];
    // Both frontends at once, so the waits add up to less than the hook's time and a timeout
    // names its step (the failure report then shows every process's output).
    await Promise.all(
      Object.values(frontends).map(async (fe) => {
        let listed: string[] = [];
        await waitFor(
          `the ${fe.name} frontend to list ${wanted.join(', ')}`,
          async () => {
            listed = await listedModels(fe.url);
            return wanted.every((m) => listed.includes(m));
          },
          150_000,
        ).catch((err: Error) => {
          throw new Error(`${err.message}; it lists ${listed.join(', ') || 'none (or did not answer GET /v1/models)'}`);
        });
        await waitFor(
          `the ${fe.name} frontend to see both workers of the mixed pool`,
          async () => (await healthInstances(fe.url, 'mixed')).length === 2,
          60_000,
        );
      }),
    );
  }, 400_000);

  /** The mixed pool: one model served by a stock sample engine and ours at 20 ms a token, each with its metrics port. */
  const mixed = new Map<'stock' | 'our', { child: Child; metrics: string }>();
  async function startMixed(kind: 'stock' | 'our'): Promise<void> {
    const port = await freePort(); // below the ephemeral range, so below 32768: stock reads DYN_SYSTEM_PORT as an i16
    const env = { DYN_SYSTEM_PORT: String(port) };
    const child =
      kind === 'stock'
        ? stack.stockSample(mixedDir, 'mixed', ['--delay', '0.02'], env)
        : stack.ourSample(mixedDir, 'mixed', ['--delay-ms', '20'], env, mixedDir);
    mixed.set(kind, { child, metrics: `http://127.0.0.1:${port}/metrics` });
  }
  afterAll(() => stack?.stop());

  const pairings = (['stock', 'our'] as const).flatMap((frontend) =>
    WORKERS.map((worker) => ({ frontend, worker, label: `${frontend} frontend → ${worker.name}` })),
  );

  for (const { frontend, worker, label } of pairings)
    describe(label, () => {
      it('chat, whole and streamed with usage', async () => {
        const url = frontends[frontend].url;
        const body = { model: worker.model(), messages: [{ role: 'user', content: USER }], max_tokens: 8 };
        const res = await post(url, '/v1/chat/completions', body);
        expect(res.status, await res.clone().text()).toBe(200);
        const whole = (await res.json()) as {
          choices: Array<{ message: { content: string }; finish_reason: string }>;
          usage: { prompt_tokens: number; completion_tokens: number };
        };
        expect(whole.choices[0]!.finish_reason).toBe('length');
        expect(whole.choices[0]!.message.content.length).toBeGreaterThan(0);
        if (worker.text) expect(whole.choices[0]!.message.content).toBe(worker.text(8));
        expect(whole.usage.completion_tokens).toBe(8);
        // The Qwen3 chat template around the five-word message.
        expect(whole.usage.prompt_tokens).toBe(13);

        const events = await sseEvents(await post(url, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } }));
        expect(events.at(-1)).toBe('[DONE]');
        const chunks = events.slice(0, -1) as Chunk[];
        const text = chunks
          .flatMap((c) => c.choices)
          .map((c) => c.delta?.content ?? '')
          .join('');
        expect(text.length).toBeGreaterThan(0);
        if (worker.text) expect(text).toBe(worker.text(8));
        expect(
          chunks
            .flatMap((c) => c.choices)
            .map((c) => c.finish_reason)
            .filter(Boolean),
        ).toEqual(['length']);
        expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 13, completion_tokens: 8 });
      });

      it('completions, whole and streamed, text and token prompts', async () => {
        const url = frontends[frontend].url;
        const res = await post(url, '/v1/completions', { model: worker.model(), prompt: USER, max_tokens: 5 });
        expect(res.status, await res.clone().text()).toBe(200);
        const whole = (await res.json()) as {
          choices: Array<{ text: string; finish_reason: string }>;
          usage: { prompt_tokens: number; completion_tokens: number };
        };
        expect(whole.choices[0]!.finish_reason).toBe('length');
        if (worker.text) expect(whole.choices[0]!.text).toBe(worker.text(5));
        else expect(whole.choices[0]!.text.length).toBeGreaterThan(0);
        expect(whole.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 5 });

        const events = await sseEvents(
          await post(url, '/v1/completions', { model: worker.model(), prompt: [9707, 1879, 374, 2244], max_tokens: 3, stream: true }),
        );
        expect(events.at(-1)).toBe('[DONE]');
        const chunks = events.slice(0, -1) as Chunk[];
        const text = chunks
          .flatMap((c) => c.choices)
          .map((c) => c.text ?? '')
          .join('');
        if (worker.text) expect(text).toBe(worker.text(3));
        else expect(text.length).toBeGreaterThan(0);
        expect(
          chunks
            .flatMap((c) => c.choices)
            .map((c) => c.finish_reason)
            .filter(Boolean),
        ).toEqual(['length']);
      });

      // Only an engine with known output has a stop string that is sure to come.
      if (worker.text)
        it('a stop string ends the output early with finish_reason stop', async () => {
          const url = frontends[frontend].url;
          const events = await sseEvents(
            await post(url, '/v1/chat/completions', {
              model: worker.model(),
              messages: [{ role: 'user', content: USER }],
              max_tokens: 20,
              stop: ['&'],
              stream: true,
            }),
          );
          const chunks = events.slice(0, -1) as Chunk[];
          expect(
            chunks
              .flatMap((c) => c.choices)
              .map((c) => c.delta?.content ?? '')
              .join(''),
          ).toBe('"#$%');
          expect(
            chunks
              .flatMap((c) => c.choices)
              .map((c) => c.finish_reason)
              .filter(Boolean),
          ).toEqual(['stop']);
        });
    });

  it('our runtime client streams from a stock dynamo_worker endpoint, and gets its errors typed', async () => {
    const worker = runStock(stack.python, 'worker.py', ['-n', 'interop', '-c', 'stockrt'], stack.deployment.stockEnv());
    const caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...stack.deployment.env, DYN_LOG: 'error' }) });
    try {
      const instanceId = BigInt((await worker.waitForLine(/^READY /)).split(' ')[1]!);
      const client = await caller.endpoint('interop.stockrt.generate').client();
      expect(await client.waitForInstances({ timeoutMs: 30_000 })).toEqual([instanceId]);
      const items: unknown[] = [];
      for await (const item of client.direct({ count: 3, tag: 'from-ts' }, instanceId)) items.push(item);
      expect(items).toEqual([0, 1, 2].map((n) => ({ n, echo: { count: 3, tag: 'from-ts' } })));

      const partial: unknown[] = [];
      const failure = await (async () => {
        try {
          for await (const item of client.generate({ count: 3, fail_at: 1 })) partial.push(item);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(partial).toHaveLength(1);
      expect(failure).toBeInstanceOf(InvalidArgument);
      expect((failure as Error).message).toContain('fail_at 1');
    } finally {
      await caller.shutdown();
      await worker.stop();
    }
  });

  it('a stock Python client streams from our runtime worker, and its stop reaches our handler', async () => {
    const worker = await startWorker(stack.deployment.env, ['interop', 'tsrt']);
    try {
      const client = runStock(stack.python, 'client.py', ['-n', 'interop', '-c', 'tsrt', '--count', '4'], stack.deployment.stockEnv());
      expect(await client.exited, client.stderr()).toBe(0);
      expect(client.lines.map((l) => JSON.parse(l) as unknown)).toEqual([0, 1, 2, 3].map((i) => ({ i, instance: worker.instanceId.toString(16) })));

      const stopper = runStock(
        stack.python,
        'client.py',
        ['-n', 'interop', '-c', 'tsrt', '--request', '{"mode":"forever","delayMs":5}', '--stop-after', '2'],
        stack.deployment.stockEnv(),
      );
      expect(await stopper.exited, stopper.stderr()).toBe(0);
      await worker.waitForLine(/^STOPPED /, 10_000);
    } finally {
      await worker.stop();
    }
  });

  // The same golden request through either frontend reaches the worker as the same PreprocessedRequest.
  it.for(GOLDEN)('preprocessing parity, $name: both frontends send the worker identical requests', async ({ path, request }) => {
    const recorder = workers.get('recorder')!;
    const received: unknown[] = [];
    for (const fe of [frontends.stock, frontends.our]) {
      const seen = recorder.lines.length;
      const res = await post(fe.url, path, { ...request, model: 'recorder' });
      expect(res.status, `${fe.name} frontend: ${await res.clone().text()}`).toBe(200);
      await res.text();
      const line = await waitFor('the recorder to print the request', () => recorder.lines.slice(seen).find((l) => l.startsWith('REQUEST ')), 10_000);
      received.push(JSON.parse(line.slice('REQUEST '.length)));
    }
    expect(received[1]).toEqual(received[0]);
  });

  /** Starts a long stream, reads its first event, and drops the connection. */
  async function disconnectMidStream(url: string, model: string): Promise<void> {
    const controller = new AbortController();
    const res = await post(
      url,
      '/v1/chat/completions',
      { model, messages: [{ role: 'user', content: USER }], max_tokens: 5000, stream: true },
      { signal: controller.signal },
    );
    expect(res.status).toBe(200);
    await res.body!.getReader().read();
    controller.abort();
  }

  it('cancellation, stock frontend → our engine: a client that disconnects mid-stream stops our engine', async () => {
    const worker = workers.get('ts-sample')!;
    const aborted = () =>
      worker
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"msg":"request aborted"')).length;
    const before = aborted();
    await disconnectMidStream(frontends.stock.url, 'ts-sample');
    await waitFor('our engine to see the abort', () => aborted() > before, 15_000);
  });

  it('cancellation, our frontend → a stock engine: a client that disconnects mid-stream stops the stock engine', async () => {
    const recorder = workers.get('recorder')!;
    const cancelled = () => recorder.lines.filter((l) => l.startsWith('CANCELLED ')).length;
    const before = cancelled();
    await disconnectMidStream(frontends.our.url, 'recorder');
    await waitFor('the stock engine to see the cancellation', () => cancelled() > before, 15_000);
  });

  describe.for(['stock', 'our'] as const)('mixed pool behind the %s frontend', (name) => {
    it('one model served by a stock worker and ours at once: the load is spread over both', async () => {
      const requests = async () => Promise.all([...mixed.values()].map(async (w) => counter(w.metrics, 'dynamo_component_requests_total')));
      const before = await requests();
      for (let i = 0; i < 6; i++) {
        const res = await post(frontends[name].url, '/v1/completions', { model: mixedDir, prompt: USER, max_tokens: 2 });
        expect(res.status, await res.clone().text()).toBe(200);
        expect(((await res.json()) as { choices: Array<{ text: string }> }).choices[0]!.text).toBe(SAMPLE_TEXT.slice(0, 2));
      }
      const after = await requests();
      for (const [i, kind] of [...mixed.keys()].entries()) expect(after[i]! - before[i]!, `requests served by the ${kind} worker`).toBeGreaterThanOrEqual(2);
    });

    it.for(['stock', 'our'] as const)('a stream migrates gap-free from a dying %s worker to the other', async (victim) => {
      const url = frontends[name].url;
      const N = 60;
      // Four streams at once, so that the victim surely holds one when it is SIGKILLed.
      const counts = [0, 0, 0, 0];
      const streams = counts.map(async (_, i) =>
        readStream(await post(url, '/v1/completions', { model: mixedDir, prompt: USER, max_tokens: N, stream: true }), (n) => (counts[i] = n)),
      );
      await waitFor('every stream to be under way', () => counts.every((n) => n >= 5), 30_000);
      const dead = mixed.get(victim)!.child;
      dead.kill();
      const results = await Promise.all(streams);
      let migrated = 0;
      for (const r of results) {
        expect(r.error).toBeUndefined();
        expect(r.done).toBe(true);
        expect(r.finishes).toEqual(['length']);
        // Both engines count from token 1 again on the resent request: prefix k, then N - k more.
        const k = [...Array(N).keys()].find((k) => k > 0 && r.text === SAMPLE_TEXT.slice(0, k) + SAMPLE_TEXT.slice(0, N - k));
        if (k !== undefined) migrated += 1;
        else expect(r.text).toBe(SAMPLE_TEXT.slice(0, N));
      }
      expect(migrated, 'streams that were cut and resumed on the other worker').toBeGreaterThanOrEqual(1);

      await dead.exited;
      const survivors = new Set((await healthInstances(url, 'mixed')).map(String));
      await startMixed(victim);
      for (const fe of Object.values(frontends)) {
        await waitFor(
          `the restarted ${victim} worker behind the ${fe.name} frontend`,
          async () => (await healthInstances(fe.url, 'mixed')).some((id) => !survivors.has(String(id))),
          60_000,
        );
      }
    });
  });

  /** Streams `max_tokens` from `model`, SIGTERMs `worker` after the 10th event, and expects the whole stream. */
  async function drains(url: string, model: string, worker: Child): Promise<void> {
    const res = await post(url, '/v1/completions', { model, prompt: USER, max_tokens: 300, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    let signalled = false;
    const result = await readStream(res, (n) => {
      if (n >= 10 && !signalled) {
        signalled = true;
        worker.child.kill('SIGTERM');
      }
    });
    expect(signalled).toBe(true);
    expect(result.error).toBeUndefined();
    expect(result.done).toBe(true);
    expect(result.finishes).toEqual(['length']);
    expect(await worker.exited).toBe(0);
  }

  it('SIGTERM drain, stock frontend → our engine: the stream in flight finishes, then the worker exits 0', async () => {
    await drains(frontends.stock.url, 'ts-sample', workers.get('ts-sample')!);
  });

  it('SIGTERM drain, our frontend → the stock sample engine: the stream in flight finishes, then the worker exits 0', async () => {
    await drains(frontends.our.url, modelDir, workers.get('stock-sample')!);
  });
});
