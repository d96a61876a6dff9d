import { describe, expect, it } from 'vitest';
import { Cancelled, Context, DistributedRuntime, loadRuntimeConfig, MemKvSpace, StreamIncomplete } from '../src/index.js';

async function memRuntime(space: MemKvSpace): Promise<DistributedRuntime> {
  return DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'warn' }), memSpace: space });
}

describe('runtime in one process (mem discovery, tcp)', () => {
  it('serves an endpoint and streams responses to a client', async () => {
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    try {
      const endpoint = worker.namespace('test').component('echo').endpoint('generate');
      await endpoint.component.createService();
      await endpoint.serveEndpoint(async function* (request: { count: number }) {
        for (let i = 0; i < request.count; i++) yield { i };
      });
      const client = await caller.endpoint('test.echo.generate').client();
      expect(await client.waitForInstances({ timeoutMs: 5000 })).toEqual([worker.instanceId]);
      const items: unknown[] = [];
      for await (const item of client.generate({ count: 3 })) items.push(item);
      expect(items).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });

  it('passes the context to handlers that declare it, and a stop reaches it', async () => {
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    try {
      let sawStop = false;
      await worker.endpoint('test.ticker.generate').serveEndpoint(async function* (_request: unknown, context: Context) {
        for (let i = 0; ; i++) {
          if (context.isStopped()) {
            sawStop = true;
            yield { final: true };
            return;
          }
          yield { i };
          await new Promise((r) => setTimeout(r, 5));
        }
      });
      const client = await caller.endpoint('test.ticker.generate').client();
      await client.waitForInstances();
      const context = new Context();
      const items: unknown[] = [];
      for await (const item of client.generate({}, { context })) {
        items.push(item);
        if (items.length === 3) context.stopGenerating();
      }
      expect(sawStop).toBe(true);
      expect(items.length).toBeGreaterThanOrEqual(3);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });

  it('turns a handler error into an error at the caller, and StreamIncomplete into an incomplete stream', async () => {
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    try {
      await worker.endpoint('test.fail.generate').serveEndpoint(async function* (request: { mode: string }) {
        yield { ok: 1 };
        if (request.mode === 'cancel') throw new Cancelled('nope');
        throw new StreamIncomplete('engine going away');
      });
      const client = await caller.endpoint('test.fail.generate').client();
      await client.waitForInstances();
      const drain = async (mode: string) => {
        const items: unknown[] = [];
        try {
          for await (const item of client.generate({ mode })) items.push(item);
        } catch (err) {
          return { items, err: err as Error };
        }
        return { items, err: undefined };
      };
      const cancelled = await drain('cancel');
      expect(cancelled.items).toEqual([{ ok: 1 }]);
      expect(cancelled.err).toBeInstanceOf(Cancelled);
      const incomplete = await drain('incomplete');
      expect(incomplete.items).toEqual([{ ok: 1 }]);
      expect(incomplete.err?.name).toBe('Disconnected');
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });

  it("answers a new request's first item while another stream's handler yields without pause (one item per stream per loop turn)", async () => {
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    try {
      const sent = { a: 0 };
      await worker.endpoint('test.burst.generate').serveEndpoint(async function* (request: { count: number; tag: 'a' | 'b' }) {
        for (let i = 0; i < request.count; i++) {
          if (request.tag === 'a') sent.a = i + 1;
          yield { i };
        }
      });
      const client = await caller.endpoint('test.burst.generate').client();
      await client.waitForInstances();
      const count = 20_000;
      let firstOfA!: () => void;
      const aStarted = new Promise<void>((resolve) => (firstOfA = resolve));
      const a = (async () => {
        let n = 0;
        for await (const _ of client.generate({ count, tag: 'a' })) if (++n === 1) firstOfA();
        return n;
      })();
      await aStarted;
      let sentOfAWhenBAnswered = -1;
      for await (const _ of client.generate({ count: 1, tag: 'b' })) sentOfAWhenBAnswered = sent.a;
      expect(await a).toBe(count);
      // Without the round-robin, b waited until a's handler had run to its end.
      expect(sentOfAWhenBAnswered).toBeLessThan(count / 2);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });

  it('merges the items a handler yields in one turn of the loop, after the first, where mergeItems says how', async () => {
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    type Item = { ids: number[]; end?: true };
    const pause = () => new Promise((resolve) => setTimeout(resolve, 10));
    try {
      const mergeItems = (held: unknown, next: unknown) => {
        const [a, b] = [held as Item, next as Item];
        return a.end || b.end ? undefined : { ids: [...a.ids, ...b.ids] };
      };
      await worker.endpoint('test.merge.generate').serveEndpoint(
        async function* () {
          for (let i = 0; i <= 4; i++) yield { ids: [i] };
          await pause();
          yield { ids: [5] };
          await pause();
          yield { ids: [6] };
          yield { ids: [7] };
          yield { ids: [], end: true };
        },
        { mergeItems },
      );
      const client = await caller.endpoint('test.merge.generate').client();
      await client.waitForInstances();
      const items: Item[] = [];
      for await (const item of client.generate({})) items.push(item as Item);
      // The first item alone (time to first token), nothing lost or reordered, the refused merge
      // kept apart, and items of different turns never joined.
      expect(items[0]).toEqual({ ids: [0] });
      expect(items.flatMap((item) => item.ids)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(items.at(-1)).toEqual({ ids: [], end: true });
      expect(items).toContainEqual({ ids: [5] });
      expect(items.length).toBeLessThan(9);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });
});

describe('bad requests at an endpoint', () => {
  it('answers a body that is not JSON with an error prologue, while good requests complete', async () => {
    const { CannotConnect } = await import('../src/index.js');
    const { controlHeader, encodeRequestEnvelope } = await import('../src/internal.js');
    const space = new MemKvSpace();
    const worker = await memRuntime(space);
    const caller = await memRuntime(space);
    try {
      await worker.endpoint('test.bad.generate').serveEndpoint(async function* (request: { n: number }) {
        await new Promise((r) => setTimeout(r, 20));
        yield { n: request.n };
      });
      const client = await caller.endpoint('test.bad.generate').client();
      await client.waitForInstances();
      const [record] = await caller.discovery.listInstances('test', 'bad', 'generate');
      const responses = await caller.responseServer();
      const pending = responses.register('bad-body');
      const envelope = encodeRequestEnvelope(controlHeader('bad-body', pending.connectionInfo), Buffer.from('{"n": oops'));
      const good = (async () => {
        const items: unknown[] = [];
        for await (const item of client.generate({ n: 7 })) items.push(item);
        return items;
      })();
      await (await caller.requestClient()).send(record!.transport, envelope, {});
      const failure = await (async () => {
        try {
          for await (const _ of pending.stream) void _;
        } catch (err) {
          return err as Error;
        }
        return undefined;
      })();
      expect(failure).toBeInstanceOf(CannotConnect);
      expect(failure?.message).toMatch(/not valid JSON/);
      expect(await good).toEqual([{ n: 7 }]);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });
});
