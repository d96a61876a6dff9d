import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Context, DistributedRuntime, loadRuntimeConfig, MemKvSpace, type TraceContext } from '../src/index.js';
import { parseTraceparent, traceHeaders } from '../src/internal.js';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

describe('parseTraceparent', () => {
  it('reads a version-00 traceparent and keeps the tracestate', () => {
    expect(parseTraceparent(`00-${TRACE_ID}-${CALLER_SPAN}-01`, 'congo=t61rcWkgMzE')).toEqual({
      traceId: TRACE_ID,
      parentId: CALLER_SPAN,
      flags: 1,
      tracestate: 'congo=t61rcWkgMzE',
    });
  });

  it('reads a later version by its version-00 prefix, ignoring the extra fields', () => {
    expect(parseTraceparent(`cc-${TRACE_ID}-${CALLER_SPAN}-00-what-the-future-holds`)).toEqual({ traceId: TRACE_ID, parentId: CALLER_SPAN, flags: 0 });
  });

  it.each([
    ['empty', ''],
    ['uppercase hex', `00-${TRACE_ID.toUpperCase()}-${CALLER_SPAN}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`],
    ['all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE_ID}-${CALLER_SPAN}-01`],
    ['version 00 with trailing data', `00-${TRACE_ID}-${CALLER_SPAN}-01-extra`],
    ['short trace id', `00-${TRACE_ID.slice(1)}-${CALLER_SPAN}-01`],
    ['garbage', 'not a trace'],
  ])('ignores a malformed traceparent (%s)', (_what, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
  });

  it('continues a trace with a new span id, the same flags and the tracestate', () => {
    const trace: TraceContext = { traceId: TRACE_ID, parentId: CALLER_SPAN, flags: 1, tracestate: 'a=1' };
    const headers = traceHeaders(trace);
    const next = parseTraceparent(headers.traceparent, headers.tracestate)!;
    expect(next.traceId).toBe(TRACE_ID);
    expect(next.parentId).toMatch(/^[0-9a-f]{16}$/);
    expect(next.parentId).not.toBe(CALLER_SPAN);
    expect(next.flags).toBe(1);
    expect(next.tracestate).toBe('a=1');
    expect(traceHeaders(trace, 'b7ad6b7169203331')).toEqual({ traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01`, tracestate: 'a=1' });
  });
});

let nats: NatsTestServer | undefined;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await nats?.stop();
});

describe.each(['tcp', 'nats'] as const)('trace propagation through the %s request plane (mem discovery, one process)', (plane) => {
  async function runtime(space: MemKvSpace): Promise<DistributedRuntime> {
    const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_REQUEST_PLANE: plane, DYN_LOG: 'warn', ...(plane === 'nats' ? { NATS_SERVER: nats!.url } : {}) };
    return DistributedRuntime.create({ config: loadRuntimeConfig(env), memSpace: space });
  }

  it('hands the caller trace to the worker context, and a call made with that context continues it', async () => {
    const space = new MemKvSpace();
    const [front, middle, back] = [await runtime(space), await runtime(space), await runtime(space)];
    try {
      const seen: Record<string, TraceContext | undefined> = {};
      await back.endpoint('trace.back.generate').serveEndpoint(async function* (_request: unknown, context: Context) {
        seen.back = context.trace;
        yield { hop: 'back' };
      });
      const toBack = await middle.endpoint('trace.back.generate').client();
      await toBack.waitForInstances({ timeoutMs: 5000 });
      await middle.endpoint('trace.middle.generate').serveEndpoint(async function* (_request: unknown, context: Context) {
        seen.middle = context.trace;
        // Forwarding with its own context continues the trace downstream.
        for await (const item of toBack.generate({}, { context })) yield item;
      });
      const client = await front.endpoint('trace.middle.generate').client();
      await client.waitForInstances({ timeoutMs: 5000 });

      const items: unknown[] = [];
      const headers = { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: 'vendor=x' };
      for await (const item of client.generate({}, { headers })) items.push(item);

      expect(items).toEqual([{ hop: 'back' }]);
      expect(seen.middle).toEqual({ traceId: TRACE_ID, parentId: CALLER_SPAN, flags: 1, tracestate: 'vendor=x' });
      expect(seen.back?.traceId).toBe(TRACE_ID);
      expect(seen.back?.parentId).toMatch(/^[0-9a-f]{16}$/);
      expect(seen.back?.parentId).not.toBe(CALLER_SPAN);
      expect(seen.back?.tracestate).toBe('vendor=x');
    } finally {
      for (const rt of [front, middle, back]) await rt.shutdown();
    }
  });

  it('serves a request whose traceparent is malformed, with no trace in the context', async () => {
    const space = new MemKvSpace();
    const [caller, worker] = [await runtime(space), await runtime(space)];
    try {
      const traces: Array<TraceContext | undefined> = [];
      await worker.endpoint('trace.plain.generate').serveEndpoint(async function* (_request: unknown, context: Context) {
        traces.push(context.trace);
        yield { ok: true };
      });
      const client = await caller.endpoint('trace.plain.generate').client();
      await client.waitForInstances({ timeoutMs: 5000 });
      for (const headers of [{ traceparent: 'garbage' }, {}] as Array<Record<string, string>>) {
        const items: unknown[] = [];
        for await (const item of client.generate({}, { headers })) items.push(item);
        expect(items).toEqual([{ ok: true }]);
      }
      expect(traces).toEqual([undefined, undefined]);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });
});
