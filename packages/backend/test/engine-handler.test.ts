import { setTimeout as sleep } from 'node:timers/promises';
import { Cancelled, Context, Disconnected, DistributedRuntime, loadRuntimeConfig, MemKvSpace, type ServedEndpoint, StreamIncomplete } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { InvalidArgument, type GenerateChunk, type GenerateRequest, usage } from '../src/index.js';
import { engineHandler } from '../src/internal.js';
import { GoodEngine } from './engines.js';

/** An engine whose behaviour per request comes from the request's `extra_args.mode`. */
class ScriptedEngine extends GoodEngine {
  aborts = 0;
  closed = 0;

  override async abort(): Promise<void> {
    this.aborts++;
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    try {
      switch (request.extra_args?.mode) {
        case 'malformed':
          yield { token_ids: [1] };
          yield { token_ids: ['x' as unknown as number] };
          return;
        case 'after-terminal':
          yield { token_ids: [1], finish_reason: 'stop', completion_usage: usage(1, 1) };
          yield { token_ids: [2] };
          return;
        case 'no-terminal':
          yield { token_ids: [1] };
          return;
        case 'abort-reason':
          yield { token_ids: [1], finish_reason: 'abort', completion_usage: usage(1, 1) };
          return;
        case 'throws':
          yield { token_ids: [1] };
          throw new Error('GPU fell over');
        case 'invalid':
          throw new InvalidArgument('temperature must be >= 0');
        case 'incomplete':
          yield { token_ids: [1] };
          throw new StreamIncomplete('engine lost its KV cache');
        case 'hangs':
          await new Promise(() => {});
          return;
        case 'seed':
          // One choice per call: its seed and n, as the engine saw them.
          yield {
            token_ids: [request.sampling_options?.seed as number, request.sampling_options?.n as number],
            finish_reason: 'length',
            completion_usage: usage(1, 2),
          };
          return;
        case 'ignores-cancel':
          for (let i = 0; ; i++) {
            await sleep(5);
            yield { token_ids: [i] };
          }
        default:
          yield* super.generate(request, context);
      }
    } finally {
      this.closed++;
    }
  }
}

const space = new MemKvSpace();
let worker: DistributedRuntime;
let caller: DistributedRuntime;
let served: ServedEndpoint;
const engine = new ScriptedEngine();

beforeAll(async () => {
  const config = loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' });
  worker = await DistributedRuntime.create({ config, memSpace: space });
  caller = await DistributedRuntime.create({ config, memSpace: space });
  served = await worker.endpoint('test.engine.generate').serveEndpoint(engineHandler(engine, { log: worker.log('backend.worker') }));
});
afterAll(async () => {
  await caller.shutdown();
  await worker.shutdown();
});

async function call(mode: string | undefined, options: { context?: Context; maxTokens?: number } = {}): Promise<GenerateChunk[]> {
  const client = await caller.endpoint('test.engine.generate').client();
  await client.waitForInstances({ timeoutMs: 5000 });
  const body = { token_ids: [7], stop_conditions: { max_tokens: options.maxTokens ?? 3 }, ...(mode ? { extra_args: { mode } } : {}) };
  const out: GenerateChunk[] = [];
  for await (const chunk of client.generate(body, options.context ? { context: options.context } : {})) out.push(chunk as GenerateChunk);
  return out;
}

describe('engineHandler', () => {
  it('streams the engine chunks and never calls abort on a stream that simply ends', async () => {
    const before = engine.aborts;
    const chunks = await call(undefined);
    expect(chunks.map((c) => c.token_ids)).toEqual([[1], [2], [3]]);
    expect(chunks.at(-1)).toMatchObject({ finish_reason: 'length', completion_usage: { completion_tokens: 3 } });
    expect(engine.aborts).toBe(before);
  });

  it('normalizes finish_reason "abort" to "cancelled"', async () => {
    expect((await call('abort-reason')).at(-1)!.finish_reason).toBe('cancelled');
  });

  it.each([
    ['malformed', 'engine ScriptedEngine: yielded a malformed chunk 1: token_ids.0:'],
    ['after-terminal', 'engine ScriptedEngine: yielded chunk 1 after its terminal chunk'],
    ['no-terminal', 'engine ScriptedEngine: ended its stream without a terminal chunk'],
  ])('reports an engine that breaks the stream rules (%s) to that caller only', async (mode, message) => {
    const closedBefore = engine.closed;
    await expect(call(mode)).rejects.toThrow(message);
    expect(engine.closed).toBe(closedBefore + 1);
    expect((await call(undefined)).at(-1)!.finish_reason).toBe('length');
  });

  it('passes Dynamo errors through by type and wraps anything else', async () => {
    const invalid = await call('invalid').catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidArgument);
    expect((invalid as Error).message).toContain('temperature must be >= 0');
    await expect(call('throws')).rejects.toThrow('GPU fell over');
  });

  it('ends the stream without its final marker on StreamIncomplete, so the caller may migrate', async () => {
    // What a Dynamo caller reads for a stream without its end marker (the migration trigger).
    const err = await call('incomplete').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Disconnected);
    expect((err as Error).message).toContain('Stream ended before generation completed');
  });

  it('calls engine.abort once when the caller stops the request', async () => {
    const before = engine.aborts;
    const context = new Context();
    const client = await caller.endpoint('test.engine.generate').client();
    const chunks: GenerateChunk[] = [];
    for await (const chunk of client.generate({ token_ids: [7], stop_conditions: { max_tokens: 1000 } }, { context })) {
      chunks.push(chunk as GenerateChunk);
      if (chunks.length === 2) context.stopGenerating();
    }
    expect(chunks.at(-1)!.finish_reason).toBe('cancelled');
    await sleep(20);
    expect(engine.aborts).toBe(before + 1);
  });

  it('frees the caller and tells the engine when one ignores a kill', async () => {
    const before = engine.aborts;
    const closedBefore = engine.closed;
    const context = new Context();
    const chunks = call('ignores-cancel', { context }).catch((e: unknown) => e);
    await sleep(50);
    context.kill();
    const result = await chunks;
    expect(result instanceof Cancelled || Array.isArray(result)).toBe(true);
    await sleep(50);
    expect(engine.aborts).toBe(before + 1);
    expect(engine.closed).toBe(closedBefore + 1);
  });

  it('an engine that hangs before its first chunk holds only its own request, and a kill frees it', async () => {
    const context = new Context();
    const hung = call('hangs', { context }).catch((e: unknown) => e);
    await sleep(50);
    expect(served.inflight).toBe(1);
    expect((await call(undefined)).at(-1)!.finish_reason).toBe('length');
    context.kill();
    const result = await hung;
    expect(result instanceof Cancelled || Array.isArray(result)).toBe(true);
    for (let i = 0; i < 100 && served.inflight > 0; i++) await sleep(10);
    expect(served.inflight).toBe(0);
  });

  it('names a bad request field', async () => {
    const client = await caller.endpoint('test.engine.generate').client();
    const bad = async () => {
      for await (const _ of client.generate({ token_ids: 'nope' })) void _;
    };
    await expect(bad()).rejects.toThrow('request.token_ids');
  });

  it('answers n choices from an engine that makes one per call: n calls, each with n = 1 and its own seed, chunks tagged by index', async () => {
    const client = await caller.endpoint('test.engine.generate').client();
    const out: GenerateChunk[] = [];
    for await (const chunk of client.generate({ token_ids: [7], sampling_options: { n: 3, seed: 10 }, extra_args: { mode: 'seed' } }))
      out.push(chunk as GenerateChunk);
    expect(out.map((c) => [c.index, c.token_ids]).sort()).toEqual([
      [0, [10, 1]],
      [1, [11, 1]],
      [2, [12, 1]],
    ]);
  });

  it('leaves n to an engine that makes its choices itself', async () => {
    class NativeChoices extends GoodEngine {
      override get generatesChoices(): boolean {
        return true;
      }
    }
    const native = await worker.endpoint('test.native.generate').serveEndpoint(engineHandler(new NativeChoices(), { log: worker.log('backend.worker') }));
    try {
      const client = await caller.endpoint('test.native.generate').client();
      await client.waitForInstances({ timeoutMs: 5000 });
      const out: GenerateChunk[] = [];
      for await (const chunk of client.generate({ token_ids: [7], sampling_options: { n: 3 }, stop_conditions: { max_tokens: 2 } }))
        out.push(chunk as GenerateChunk);
      expect(out.map((c) => c.token_ids)).toEqual([[1], [2]]);
    } finally {
      await native.unregister();
    }
  });
});
