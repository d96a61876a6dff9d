import { writeSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Cancelled, CannotConnect, Disconnected, DynamoException } from '../src/errors.js';
import type { ConnectionInfo } from '../src/wire/control.js';
import { encodeTwoPartText, TwoPartDecoder } from '../src/wire/envelope.js';
import type { Log } from '../src/logger.js';
import { callHome, type ResponseSender } from '../src/response-plane/call-home.js';
import { ResponseProtocolError } from '../src/response-plane/frames.js';
import type { PendingResponse } from '../src/response-plane/response-stream.js';
import { ResponseStreamServer } from '../src/response-plane/stream-server.js';
import { ReadFlag, type StreamReader } from '../src/response-plane/stream-reader.js';
import { freePort, waitFor } from '@dynamo/testing/free-port';

function recordingLogger() {
  const lines: { level: string; msg: string }[] = [];
  const at = (level: string) => (_obj: object, msg?: string) => lines.push({ level, msg: msg ?? '' });
  const log: Log = { warn: at('warn'), info: at('info'), debug: at('debug'), error: at('error') };
  return { log, warnings: () => lines.filter((l) => l.level === 'warn').map((l) => l.msg) };
}

/** Reads the whole stream; returns the items and the error it ended with, if any. */
async function drain(p: PendingResponse): Promise<{ items: unknown[]; error?: unknown }> {
  const items: unknown[] = [];
  try {
    for await (const item of p.stream) items.push(item);
    return { items };
  } catch (error) {
    return { items, error };
  }
}

/** A hand-rolled worker: dials the caller and writes raw frames, independent of `callHome`. */
async function rawWorker(info: ConnectionInfo): Promise<{ socket: Socket; frames: string[]; closed: Promise<void> }> {
  const { host, port } = { host: '127.0.0.1', port: Number(info.info.address.split(':')[1]) };
  const socket = connect({ host, port });
  await new Promise((r) => socket.once('connect', r));
  const frames: string[] = [];
  const decoder = new TwoPartDecoder();
  socket.on('data', (c: Buffer) => decoder.push(c, (f) => frames.push(`${f.header.toString()}|${f.body.toString()}`)));
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  return { socket, frames, closed };
}

/** A hand-rolled caller: a TCP server that records each call-home connection and the subject of its handshake. */
async function rawCaller() {
  const conns: { socket: Socket; subject?: string; ended: boolean }[] = [];
  const server = createServer((socket) => {
    const conn: (typeof conns)[number] = { socket, ended: false };
    conns.push(conn);
    const decoder = new TwoPartDecoder();
    socket.on('data', (c: Buffer) => decoder.push(c, (f) => (conn.subject ??= JSON.parse(f.header.toString()).subject)));
    socket.on('end', () => {
      conn.ended = true;
      socket.end();
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const address = `127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    conns,
    /** Connection info naming `subject`, with the caller's handshake timeout when given. */
    info: (subject: string, handshakeTimeoutMs?: number): ConnectionInfo => ({
      transport: 'tcp_server',
      info: { address, subject, context: subject, stream_type: 'response', ...(handshakeTimeoutMs && { handshake_timeout_ms: handshakeTimeoutMs }) },
    }),
    close: async () => {
      for (const c of conns) c.socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const handshake = (info: ConnectionInfo) => encodeTwoPartText(JSON.stringify({ subject: info.info.subject, stream_type: 'response' }), '');
const prologueOk = encodeTwoPartText('{"error":null}', '');
const item = (data: unknown) => encodeTwoPartText('', JSON.stringify({ data, complete_final: false }));
const end = encodeTwoPartText('', '{"complete_final":true}');
const sentinel = encodeTwoPartText('"sentinel"', '');

describe('call-home response plane', () => {
  let server: ResponseStreamServer;
  let logs: ReturnType<typeof recordingLogger>;
  const senders: ResponseSender[] = [];

  beforeEach(async () => {
    logs = recordingLogger();
    server = new ResponseStreamServer({ host: '127.0.0.1', log: logs.log });
    await server.listen();
  });

  afterEach(async () => {
    for (const s of senders.splice(0)) s.abort();
    await server.close();
  });

  async function worker(info: ConnectionInfo): Promise<ResponseSender> {
    const s = await callHome(info, { log: logs.log });
    senders.push(s);
    return s;
  }

  it('delivers a full stream in order and both sides close cleanly', async () => {
    const p = server.register('req-1');
    expect(p.connectionInfo).toEqual({
      transport: 'tcp_server',
      info: { address: server.address, subject: expect.any(String), context: 'req-1', stream_type: 'response', handshake_timeout_ms: 10_000 },
    });
    const reading = drain(p);
    const w = await worker(p.connectionInfo);
    await w.prologue();
    for (let i = 0; i < 10; i++) await w.send({ data: { token_ids: [i], text: `t${i}` } });
    await w.complete(); // resolves once the caller closed after the sentinel
    const { items, error } = await reading;
    expect(error).toBeUndefined();
    expect(items).toEqual(Array.from({ length: 10 }, (_, i) => ({ data: { token_ids: [i], text: `t${i}` } })));
    expect(w.signal.aborted).toBe(false);
    expect(server.pendingCount).toBe(0);
  });

  it("puts Dynamo's exact frames on the wire from the worker side", async () => {
    const frames: string[] = [];
    const raw: Server = createServer((s) => {
      const decoder = new TwoPartDecoder();
      s.on('data', (c: Buffer) =>
        decoder.push(c, (f) => {
          frames.push(`${f.header.toString()}|${f.body.toString()}`);
          if (f.header.toString() === '"sentinel"') s.end();
        }),
      );
    });
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
    const address = `127.0.0.1:${(raw.address() as { port: number }).port}`;
    try {
      const w = await callHome({ transport: 'tcp_server', info: { address, subject: 'sub-1', context: 'req-1', stream_type: 'response' } });
      await w.send({ data: { token_ids: [7] } });
      await w.send({ n: 18446744073709551615n });
      await w.complete();
      expect(frames).toEqual([
        '{"subject":"sub-1","stream_type":"response"}|',
        '{"error":null}|',
        '|{"data":{"data":{"token_ids":[7]}},"complete_final":false}',
        '|{"data":{"n":18446744073709551615},"complete_final":false}',
        '|{"complete_final":true}',
        '"sentinel"|',
      ]);
    } finally {
      await new Promise((r) => raw.close(r));
    }
  });

  it('reads a hand-written stock-style stream and closes after the sentinel', async () => {
    const p = server.register('req-raw');
    const reading = drain(p);
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, item({ a: 1 }), item({ text: 'ünï ✓' })]));
    w.socket.write(Buffer.concat([item({ big: 1 }).subarray(0, 10)]));
    w.socket.write(Buffer.concat([item({ big: 1 }).subarray(10), end, sentinel]));
    await w.closed; // the caller closed its side after the sentinel
    expect(await reading).toEqual({ items: [{ a: 1 }, { text: 'ünï ✓' }, { big: 1 }] });
  });

  it('read as batches, the first item alone, then items that arrive together come together, in order, then the end', async () => {
    const p = server.register('req-batches');
    const batches: unknown[][] = [];
    const reading = (async () => {
      for await (const batch of p.batches) batches.push(batch);
    })();
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, item(1), item(2), item(3)]));
    await waitFor('the first batches', () => batches.length === 2);
    w.socket.write(Buffer.concat([item(4), item(5), end, sentinel]));
    await reading;
    // The first token is not held back by the backlog that arrived with it.
    expect(batches).toEqual([[1], [2, 3], [4, 5]]);
  });

  it('read as batches, a backlog comes at most 16 items at a time, in order', async () => {
    const p = server.register('req-batch-cap');
    const batches: unknown[][] = [];
    const reading = (async () => {
      for await (const batch of p.batches) batches.push(batch);
    })();
    const w = await rawWorker(p.connectionInfo);
    const n = 100;
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, ...Array.from({ length: n }, (_, i) => item(i)), end, sentinel]));
    await reading;
    expect(batches.flat()).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(Math.max(...batches.map((b) => b.length))).toBe(16);
  });

  it('spreads registrations over several listening sockets, each of which takes its streams', async () => {
    const pending = Array.from({ length: 16 }, (_, i) => server.register(`req-spread-${i}`));
    const addresses = new Set(pending.map((p) => p.connectionInfo.info.address));
    expect(addresses.size).toBe(8);
    expect(server.address).toBe(pending[0]!.connectionInfo.info.address);
    const answers = pending.map((p) => drain(p));
    await Promise.all(
      pending.map(async (p, i) => {
        const s = await worker(p.connectionInfo);
        await s.prologue(null);
        await s.send({ i });
        await s.complete();
      }),
    );
    expect((await Promise.all(answers)).map((a) => a.items)).toEqual(pending.map((_, i) => [{ i }]));
  });

  it('listens on one socket when its port is fixed', async () => {
    const port = await freePort();
    const fixed = new ResponseStreamServer({ host: '127.0.0.1', port });
    try {
      expect(await fixed.listen()).toBe(`127.0.0.1:${port}`);
      const addresses = new Set(Array.from({ length: 4 }, (_, i) => fixed.register(`req-fixed-${i}`).connectionInfo.info.address));
      expect([...addresses]).toEqual([`127.0.0.1:${port}`]);
    } finally {
      await fixed.close();
    }
  });

  it('read as batches, a worker abort gives the items sent, then Disconnected', async () => {
    const p = server.register('req-batches-abort');
    const seen: unknown[] = [];
    const reading = (async () => {
      for await (const batch of p.batches) seen.push(...batch);
    })().catch((err: unknown) => err);
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, item('a'), item('b')]));
    await waitFor('the items', () => seen.length === 2);
    w.socket.write(item('c'));
    w.socket.end();
    expect(await reading).toBeInstanceOf(Disconnected);
    expect(seen).toEqual(['a', 'b', 'c']);
  });

  it('keeps u64 integers in items exact', async () => {
    const p = server.register('req-big');
    const reading = drain(p);
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(handshake(p.connectionInfo));
    w.socket.write(prologueOk);
    w.socket.write(encodeTwoPartText('', '{"data":{"worker_id":7587890531256969735},"complete_final":false}'));
    w.socket.write(Buffer.concat([end, sentinel]));
    expect((await reading).items).toEqual([{ worker_id: 7587890531256969735n }]);
  });

  it('surfaces an error prologue as CannotConnect with the message', async () => {
    const p = server.register('req-2');
    const reading = drain(p);
    const w = await worker(p.connectionInfo);
    await w.prologue('invalid request: max_tokens must be >= 1');
    const { items, error } = await reading;
    expect(items).toEqual([]);
    expect(error).toBeInstanceOf(CannotConnect);
    expect((error as Error).message).toBe('worker generate() failed before response stream: invalid request: max_tokens must be >= 1');
  });

  it('turns a worker abort (no complete_final) into Disconnected after the items already sent', async () => {
    const p = server.register('req-3');
    const reading = drain(p);
    const w = await worker(p.connectionInfo);
    for (let i = 0; i < 3; i++) await w.send({ i });
    w.abort();
    const { items, error } = await reading;
    expect(items).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(error).toBeInstanceOf(Disconnected);
    expect((error as Error).message).toMatch(/^Stream ended before generation completed/);
  });

  it('turns a reset mid-stream into Disconnected', async () => {
    const p = server.register('req-reset');
    const reading = drain(p);
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, item(1), item(2).subarray(0, 30)]));
    setTimeout(() => w.socket.resetAndDestroy(), 50);
    const { items, error } = await reading;
    expect(items).toEqual([1]);
    expect(error).toBeInstanceOf(Disconnected);
  });

  it('caller stop reaches the worker as a graceful stop, and the stream then ends silently', async () => {
    const p = server.register('req-4');
    const w = await worker(p.connectionInfo);
    await w.prologue();
    await w.send({ n: 0 });
    const it = p.stream[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: { n: 0 } });
    p.stop();
    await waitFor('worker to see the stop', () => w.stopped);
    expect(w.killed).toBe(false);
    expect(w.signal.aborted).toBe(true);
    expect(w.signal.reason).toBeInstanceOf(Cancelled);
    // A stopped worker may still send its last item, then close without complete_final.
    await w.send({ n: 1, finish_reason: 'cancelled' });
    w.abort();
    expect(await it.next()).toEqual({ done: false, value: { n: 1, finish_reason: 'cancelled' } });
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it('caller kill reaches the worker, ends the stream at once, and later sends are dropped', async () => {
    const p = server.register('req-5');
    const w = await worker(p.connectionInfo);
    await w.send({ n: 0 });
    const it = p.stream[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ n: 0 });
    p.kill();
    expect(await it.next()).toEqual({ done: true, value: undefined });
    await waitFor('worker to see the kill', () => w.killed);
    expect(w.signal.aborted).toBe(true);
    expect(w.send({ n: 1 })).toBeUndefined();
    await w.closed;
  });

  it('an aborted AbortSignal kills the stream', async () => {
    const ac = new AbortController();
    const p = server.register('req-6', { signal: ac.signal });
    const reading = drain(p);
    const w = await worker(p.connectionInfo);
    await w.send({ n: 0 });
    ac.abort();
    const { error } = await reading;
    expect(error).toBeUndefined();
    await waitFor('worker to see the kill', () => w.killed);
  });

  it('a signal aborted before registering yields an empty, silent stream', async () => {
    const p = server.register('req-aborted', { signal: AbortSignal.abort() });
    expect(server.pendingCount).toBe(0);
    expect(await drain(p)).toEqual({ items: [] });
  });

  it.each(['items', 'batches'] as const)('leaving a for-await early over %s kills the stream', async (how) => {
    const p = server.register(`req-7-${how}`);
    const w = await worker(p.connectionInfo);
    const producing = (async () => {
      for (let i = 0; i < 1000 && !w.killed; i++) await w.send({ i });
    })();
    const items =
      how === 'items'
        ? p.stream
        : (async function* () {
            for await (const batch of p.batches) yield* batch;
          })();
    for await (const x of items) {
      if ((x as { i: number }).i === 5) break;
    }
    await waitFor('worker to see the kill', () => w.killed);
    await producing;
  });

  it('a stop or kill issued before the worker called home is delivered when it does', async () => {
    const stopped = server.register('req-8');
    stopped.stop();
    const w1 = await worker(stopped.connectionInfo);
    await waitFor('stop after call-home', () => w1.stopped);
    expect(w1.killed).toBe(false);

    const killed = server.register('req-9');
    killed.kill();
    expect(server.pendingCount).toBe(0); // req-8 was claimed by its worker; req-9 was dropped
    const w2 = await worker(killed.connectionInfo);
    await waitFor('kill after call-home', () => w2.killed);
    expect(await drain(killed)).toEqual({ items: [] });
  });

  it('closes a call-home connection with an unknown subject', async () => {
    const w = await worker({
      transport: 'tcp_server',
      info: { address: server.address!, subject: 'not-registered', context: 'x', stream_type: 'response' },
    });
    await w.closed;
    expect(w.killed).toBe(true);
    expect(logs.warnings().some((m) => /unknown subject/.test(m))).toBe(true);
  });

  it('closes a connection whose first frame is not a handshake', async () => {
    const p = server.register('req-10');
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(item({ a: 1 }));
    await w.closed;
    expect(logs.warnings().some((m) => /not a header-only handshake/.test(m))).toBe(true);
    expect(server.pendingCount).toBe(1);
  });

  it('fails a stream whose worker never calls home with Disconnected', async () => {
    const p = server.register('req-11', { callHomeTimeoutMs: 100 });
    const { error } = await drain(p);
    expect(error).toBeInstanceOf(Disconnected);
    expect((error as Error).message).toBe('worker never called home for request req-11 within 100 ms');
    expect(server.pendingCount).toBe(0);
  });

  it('cancel() drops the registration and fails the stream with the given error', async () => {
    const p = server.register('req-12');
    p.cancel(new CannotConnect('no instance reachable'));
    expect(server.pendingCount).toBe(0);
    const { error } = await drain(p);
    expect((error as Error).message).toBe('no instance reachable');
  });

  it.each([
    ['data after complete_final', [item(1), end, item(2)], /data frame after complete_final/],
    ['data with neither data nor complete_final', [item(1), encodeTwoPartText('', '{"complete_final":false}')], /neither data nor complete_final/],
    ['a sentinel before complete_final', [item(1), sentinel], /sentinel before complete_final/],
    ['a body that is not JSON', [item(1), encodeTwoPartText('', '{nope')], /data frame is not JSON/],
  ])('treats %s as a protocol error', async (_name, frames, message) => {
    const p = server.register('req-proto');
    const w = await rawWorker(p.connectionInfo);
    w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk, ...frames]));
    const { items, error } = await drain(p);
    expect(items).toEqual([1]);
    expect(error).toBeInstanceOf(ResponseProtocolError);
    expect((error as Error).message).toMatch(message);
    await w.closed;
  });

  it('delivers 100k small items complete and in order', async () => {
    const N = 100_000;
    const p = server.register('req-long');
    const w = await worker(p.connectionInfo);
    const producing = (async () => {
      await w.prologue();
      for (let i = 0; i < N; i++) await w.send({ token_ids: [i] });
      await w.complete();
    })();
    let expected = 0;
    for await (const x of p.stream) {
      if ((x as { token_ids: number[] }).token_ids[0] !== expected) throw new Error(`item ${expected} out of order`);
      expected++;
    }
    await producing;
    expect(expected).toBe(N);
  });

  it('holds a worker back while the caller does not read (TCP back-pressure), losing nothing', async () => {
    const p = server.register('req-bp');
    const w = await worker(p.connectionInfo);
    const chunk = 'x'.repeat(4096);
    let blocked = 0;
    const N = 5000; // ~20 MiB: more than socket buffers hold
    const producing = (async () => {
      for (let i = 0; i < N; i++) {
        const pending = w.send({ i, chunk });
        if (pending) {
          blocked++;
          await pending;
        }
      }
      await w.complete();
    })();
    await waitFor('the worker to be held back', () => blocked > 0);
    let count = 0;
    for await (const x of p.stream) {
      expect((x as { i: number }).i).toBe(count);
      count++;
    }
    await producing;
    expect(count).toBe(N);
  });

  it('fails streams still waiting when the server closes', async () => {
    const p = server.register('req-13');
    const reading = drain(p);
    await server.close();
    const { error } = await reading;
    expect(error).toBeInstanceOf(Disconnected);
    expect(() => server.register('late')).toThrow(/closed/);
  });

  it('callHome rejects with CannotConnect when the caller is unreachable', async () => {
    await expect(callHome({ transport: 'tcp_server', info: { address: '127.0.0.1:1', subject: 's', context: 'c', stream_type: 'response' } })).rejects.toThrow(
      /cannot call home to 127\.0\.0\.1:1: .*ECONNREFUSED/,
    );
  });

  describe('connections dialed ahead', () => {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

    it('a caller that sets handshake_timeout_ms gets its next stream over a connection dialed after the last', async () => {
      const caller = await rawCaller();
      try {
        await worker(caller.info('a', 10_000));
        await waitFor('the first handshake and a spare connection', () => caller.conns.length === 2 && caller.conns[0]!.subject === 'a', 5000);
        expect(caller.conns[1]!.subject).toBeUndefined();
        await worker(caller.info('b', 10_000));
        await waitFor('the second handshake, on the spare', () => caller.conns[1]!.subject === 'b', 5000);
        await waitFor('the next spare', () => caller.conns.length === 3, 5000);
      } finally {
        await caller.close();
      }
    });

    it("a caller without it, as stock's frontend, gets only the connections its streams need", async () => {
      const caller = await rawCaller();
      try {
        await worker(caller.info('a'));
        await waitFor('the handshake', () => caller.conns[0]?.subject === 'a', 5000);
        await sleep(100);
        expect(caller.conns.length).toBe(1);
      } finally {
        await caller.close();
      }
    });

    it('closes a spare unused for half the timeout and dials no other', async () => {
      const caller = await rawCaller();
      try {
        await worker(caller.info('a', 200));
        await waitFor('the spare to be closed unused', () => caller.conns.length === 2 && caller.conns[1]!.ended, 5000);
        expect(caller.conns[1]!.subject).toBeUndefined();
        await sleep(300);
        expect(caller.conns.length).toBe(2);
      } finally {
        await caller.close();
      }
    });

    it('our stream server takes streams over spares and logs nothing when one closes unused', async () => {
      const quick = new ResponseStreamServer({ host: '127.0.0.1', log: logs.log, handshakeTimeoutMs: 200 });
      try {
        await quick.listen();
        for (const id of ['s-1', 's-2']) {
          const p = quick.register(id);
          const reading = drain(p);
          const w = await worker(p.connectionInfo);
          await w.prologue(null);
          await w.send({ id });
          await w.complete();
          expect((await reading).items).toEqual([{ id }]);
        }
        await sleep(400);
        expect(logs.warnings()).toEqual([]);
      } finally {
        await quick.close();
      }
    });

    it('does not use a spare its caller closed: the next stream dials afresh', async () => {
      const caller = await rawCaller();
      try {
        await worker(caller.info('a', 10_000));
        await waitFor('a spare connection', () => caller.conns.length === 2, 5000);
        caller.conns[1]!.socket.destroy();
        await sleep(50);
        await worker(caller.info('b', 10_000));
        await waitFor('the handshake on a new connection', () => caller.conns.slice(2).some((c) => c.subject === 'b'), 5000);
        expect(caller.conns[1]!.subject).toBeUndefined();
      } finally {
        await caller.close();
      }
    });
  });

  describe('the first item sent from another thread', () => {
    /** Records each call and writes what it takes (up to `take` bytes) with a plain write on the descriptor. */
    function recordingSend(take = Number.POSITIVE_INFINITY) {
      const calls: { fd: number; text: string }[] = [];
      const send = (fd: number, bytes: Uint8Array) => {
        const n = Math.min(take, bytes.length);
        calls.push({ fd, text: Buffer.from(bytes).toString() });
        return n === 0 ? 0 : writeSync(fd, bytes, 0, n);
      };
      return { calls, send };
    }

    async function stream(send: (fd: number, bytes: Uint8Array) => number) {
      const p = server.register('off-1');
      const reading = drain(p);
      const w = await callHome(p.connectionInfo, { log: logs.log, offThreadSend: send });
      senders.push(w);
      await w.prologue(null);
      for (let i = 0; i < 5; i++) await w.send({ token_ids: [i] });
      await w.complete();
      return reading;
    }

    it('only the first item goes through it, after the handshake and prologue, and the stream arrives in order', async () => {
      const { calls, send } = recordingSend();
      const { items, error } = await stream(send);
      expect(error).toBeUndefined();
      expect(items).toEqual(Array.from({ length: 5 }, (_, i) => ({ token_ids: [i] })));
      expect(calls).toHaveLength(1);
      expect(calls[0]!.fd).toBeGreaterThan(0);
      expect(calls[0]!.text).toContain('{"data":{"token_ids":[0]},"complete_final":false}');
    });

    it('what it did not take, Node writes after it: the first item arrives whole', async () => {
      for (const take of [0, 3]) {
        const { calls, send } = recordingSend(take);
        const { items, error } = await stream(send);
        expect(error).toBeUndefined();
        expect(items).toEqual(Array.from({ length: 5 }, (_, i) => ({ token_ids: [i] })));
        expect(calls).toHaveLength(1);
      }
    });
  });

  describe('a stream with a reader', () => {
    /**
     * A reader of the frames it is given, as the frontend's Rust reader reads them: items are each
     * data frame's body as text, and the flags say what each read brought.
     */
    class FrameReader implements StreamReader {
      readonly pieces: Buffer[] = [];
      connects = 0;
      problem = '';
      problemKind = '';
      #decoder = new TwoPartDecoder();
      #items: string[] = [];
      connect(): void {
        this.connects += 1;
      }
      read(piece: Buffer): number {
        this.pieces.push(Buffer.from(piece));
        let flags = 0;
        this.#decoder.push(piece, ({ header, body }) => {
          const h = header.toString();
          if (h === '{"error":null}') flags |= ReadFlag.STARTED;
          else if (h.startsWith('{"error":')) {
            this.problem = JSON.parse(h).error;
            flags |= ReadFlag.REFUSED;
          } else if (h === '"sentinel"') flags |= ReadFlag.SENTINEL;
          else if (h !== '') {
            this.problem = `unexpected header ${h}`;
            flags |= ReadFlag.VIOLATION;
          } else if (body.toString() === '{"complete_final":true}') flags |= ReadFlag.END;
          else if (body.toString().includes('"event":"error"')) {
            [this.problemKind, this.problem] = ['EngineShutdown', 'the engine is going away'];
            flags |= ReadFlag.WORKER_ERROR;
          } else {
            this.#items.push(body.toString());
            flags |= ReadFlag.OUTPUT;
          }
        });
        return flags;
      }
      take(): unknown {
        const items = this.#items;
        this.#items = [];
        return items.join('|');
      }
      get buffered(): number {
        return this.#decoder.buffered;
      }
    }

    it("gets the bytes after the handshake whole, the rest of the handshake's read included; its items are the stream's", async () => {
      const reader = new FrameReader();
      const p = server.register('req-reader', { reader });
      const reading = drain(p);
      const w = await rawWorker(p.connectionInfo);
      const first = Buffer.concat([prologueOk, item({ a: 1 })]);
      w.socket.write(Buffer.concat([handshake(p.connectionInfo), first]));
      await waitFor('the first read', () => reader.pieces.length > 0, 5000);
      const second = Buffer.concat([item({ b: 2 }), item({ c: 3 }), end, sentinel]);
      w.socket.write(second);
      await w.closed; // the caller closed its side after the sentinel
      expect(Buffer.concat(reader.pieces)).toEqual(Buffer.concat([first, second]));
      expect(reader.connects).toBe(1);
      expect(await reading).toEqual({
        items: ['{"data":{"a":1},"complete_final":false}', '{"data":{"b":2},"complete_final":false}|{"data":{"c":3},"complete_final":false}'],
      });
    });

    it('a reader that throws fails its stream with the reason, and the server serves the next', async () => {
      const broken = new FrameReader();
      broken.read = () => {
        throw new Error('the reader broke');
      };
      const p = server.register('req-broken', { reader: broken });
      const reading = drain(p);
      const w = await rawWorker(p.connectionInfo);
      w.socket.write(Buffer.concat([handshake(p.connectionInfo), prologueOk]));
      const { error } = await reading;
      expect(error).toEqual(new ResponseProtocolError('response stream protocol error: the reader broke'));
      await w.closed;
      const next = server.register('req-after', { reader: new FrameReader() });
      const after = drain(next);
      const w2 = await rawWorker(next.connectionInfo);
      w2.socket.write(Buffer.concat([handshake(next.connectionInfo), prologueOk, item({ a: 1 }), end, sentinel]));
      expect(await after).toEqual({ items: ['{"data":{"a":1},"complete_final":false}'] });
    });

    it("fails the stream as the reader's flags say: a refusal, a worker's error after its items, a violation", async () => {
      const cases: { frames: Buffer[]; error: (err: unknown) => void; items: unknown[] }[] = [
        {
          frames: [encodeTwoPartText('{"error":"no room"}', '')],
          items: [],
          error: (err) => expect(err).toEqual(new CannotConnect('worker generate() failed before response stream: no room')),
        },
        {
          frames: [prologueOk, item({ a: 1 }), encodeTwoPartText('', '{"data":{"event":"error"},"complete_final":false}')],
          items: ['{"data":{"a":1},"complete_final":false}'],
          error: (err) => {
            expect(err).toBeInstanceOf(DynamoException);
            expect((err as DynamoException).kind).toBe('EngineShutdown');
            expect((err as Error).message).toBe('the engine is going away');
          },
        },
        {
          frames: [prologueOk, encodeTwoPartText('"what"', '')],
          items: [],
          error: (err) => expect(err).toEqual(new ResponseProtocolError('response stream protocol error: unexpected header "what"')),
        },
      ];
      for (const c of cases) {
        const reader = new FrameReader();
        const p = server.register('req-reader-fail', { reader });
        const reading = drain(p);
        const w = await rawWorker(p.connectionInfo);
        w.socket.write(Buffer.concat([handshake(p.connectionInfo), ...c.frames]));
        const { items, error } = await reading;
        expect(items).toEqual(c.items);
        c.error(error);
        await w.closed;
      }
    });
  });
});
