import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CannotConnect, InvalidArgument } from '../src/errors.js';
import { encodeTwoPartText } from '../src/wire/envelope.js';
import type { RequestAcceptor, Transport } from '../src/request-plane/request-plane.js';
import type { Log } from '../src/logger.js';
import { TcpRequestPlaneClient } from '../src/request-plane/tcp-client.js';
import { TcpRequestPlaneServer } from '../src/request-plane/tcp-server.js';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { trackProcess } from '@dynamo/testing/processes';

const INSTANCE = 0x694d9a3c5e1f2a07n;

/** A logger that remembers what it was told. */
function recordingLogger() {
  const lines: { level: string; obj: object; msg: string }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => lines.push({ level, obj, msg: msg ?? '' });
  const log: Log = { warn: at('warn'), info: at('info'), debug: at('debug'), error: at('error') };
  return { log, lines, warnings: () => lines.filter((l) => l.level === 'warn').map((l) => l.msg) };
}

/** One request message, framed independently of the implementation under test. */
function frame(path: string | Buffer, headers: string | Buffer, payload: Buffer, declaredPayloadLen = payload.length): Buffer {
  const p = typeof path === 'string' ? Buffer.from(path) : path;
  const h = typeof headers === 'string' ? Buffer.from(headers) : headers;
  const out = Buffer.alloc(2 + p.length + 2 + h.length + 4);
  out.writeUInt16BE(p.length, 0);
  p.copy(out, 2);
  out.writeUInt16BE(h.length, 2 + p.length);
  h.copy(out, 4 + p.length);
  out.writeUInt32BE(declaredPayloadLen, 4 + p.length + h.length);
  return Buffer.concat([out, payload]);
}

const envelope = (body = '{"n":1}') => encodeTwoPartText('{"id":"r"}', body);

/** A raw connection that collects the worker's replies (`u32 len` + text) and notices close. */
class RawPeer {
  readonly socket: Socket;
  readonly replies: string[] = [];
  closed = false;
  #buf = Buffer.alloc(0);

  constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port });
    this.socket.on('data', (chunk: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, chunk]);
      while (this.#buf.length >= 4) {
        const len = this.#buf.readUInt32BE(0);
        if (this.#buf.length < 4 + len) break;
        this.replies.push(this.#buf.subarray(4, 4 + len).toString());
        this.#buf = this.#buf.subarray(4 + len);
      }
    });
    this.socket.on('error', () => {});
    this.socket.on('close', () => (this.closed = true));
  }

  async replyCount(n: number): Promise<string[]> {
    await waitFor(`${n} replies`, () => this.replies.length >= n);
    return this.replies;
  }
}

describe('TCP request plane', () => {
  let server: TcpRequestPlaneServer;
  let client: TcpRequestPlaneClient;
  let logs: ReturnType<typeof recordingLogger>;
  let received: { envelope: Buffer; headers: Record<string, string> }[];
  let transport: { tcp: string };
  let port: number;
  const peers: RawPeer[] = [];

  const accept: RequestAcceptor = (env, headers) => {
    received.push({ envelope: Buffer.from(env), headers });
    return '';
  };

  beforeEach(async () => {
    logs = recordingLogger();
    received = [];
    server = new TcpRequestPlaneServer({ host: '127.0.0.1', port: 0, log: logs.log });
    client = new TcpRequestPlaneClient({ log: logs.log });
    transport = (await server.serve('dynamo', 'backend', 'generate', INSTANCE, accept)) as { tcp: string };
    port = (await server.listen()).port;
  });

  afterEach(async () => {
    for (const p of peers.splice(0)) p.socket.destroy();
    await client.close();
    await server.close();
  });

  const peer = () => {
    const p = new RawPeer(port);
    peers.push(p);
    return p;
  };

  /** Sends a fresh good request through the client and checks the worker saw it. */
  async function expectServing(): Promise<void> {
    const before = received.length;
    await client.send(transport, envelope('{"probe":true}'), {});
    expect(received.length).toBe(before + 1);
    expect(received.at(-1)!.envelope).toEqual(envelope('{"probe":true}'));
  }

  it("advertises Dynamo's transport and acks a request, passing envelope and headers through", async () => {
    expect(transport).toEqual({ tcp: `127.0.0.1:${port}/694d9a3c5e1f2a07/dynamo/backend/generate` });
    await client.send(transport, envelope(), { traceparent: '00-abc-def-01' });
    expect(received).toEqual([{ envelope: envelope(), headers: { traceparent: '00-abc-def-01' } }]);
  });

  it('advertises the configured host', async () => {
    const other = new TcpRequestPlaneServer({ host: '127.0.0.1', advertiseHost: 'worker-7.example', log: logs.log });
    try {
      const t = await other.serve('dynamo', 'backend', 'generate', 1n, accept);
      expect((t as { tcp: string }).tcp).toMatch(/^worker-7\.example:\d+\/1\/dynamo\/backend\/generate$/);
    } finally {
      await other.close();
    }
  });

  it('gives a second component with the same endpoint name its own path, and refuses serving twice', async () => {
    const prefill: string[] = [];
    const t = await server.serve('dynamo', 'prefill', 'generate', INSTANCE, () => {
      prefill.push('x');
      return '';
    });
    expect(t).toEqual({ tcp: `127.0.0.1:${port}/694d9a3c5e1f2a07/dynamo/prefill/generate` });
    await client.send(t, envelope(), {});
    await client.send(transport, envelope(), {});
    expect(prefill).toHaveLength(1);
    expect(received).toHaveLength(1);
    await expect(server.serve('dynamo', 'backend', 'generate', INSTANCE, accept)).rejects.toThrow(InvalidArgument);
  });

  it('answers pipelined requests on one connection in order', async () => {
    await server.serve('dynamo', 'backend', 'busy', INSTANCE, () => 'Server overloaded: queue full');
    const p = peer();
    const good = frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{}', envelope());
    p.socket.write(
      Buffer.concat([
        good,
        frame('694d9a3c5e1f2a07/nope', '{}', envelope()),
        frame('694d9a3c5e1f2a07/dynamo/backend/busy', '{}', envelope()),
        good,
        frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{"x-request-id":"abc"}', envelope()),
      ]),
    );
    const replies = await p.replyCount(5);
    expect(replies[0]).toBe('');
    expect(replies[1]).toMatch(/^Server unavailable: no endpoint '694d9a3c5e1f2a07\/nope'/);
    expect(replies[2]).toBe('Server overloaded: queue full');
    expect(replies.slice(3)).toEqual(['', '']);
    expect(received.at(-1)!.headers).toEqual({ 'x-request-id': 'abc' });
  });

  it('pairs each pipelined client request with its own reply (FIFO over one pooled connection)', async () => {
    const single = new TcpRequestPlaneClient({ poolSize: 1 });
    await server.serve('dynamo', 'backend', 'odd', INSTANCE, (env) => {
      const n = Number(/"n":(\d+)/.exec(Buffer.from(env).toString())![1]);
      return n % 2 === 1 ? `Server overloaded: odd ${n}` : '';
    });
    const odd = { tcp: transport.tcp.replace(/generate$/, 'odd') } as Transport;
    try {
      const results = await Promise.allSettled(Array.from({ length: 300 }, (_, n) => single.send(odd, envelope(`{"n":${n}}`), {})));
      results.forEach((r, n) => {
        if (n % 2 === 0) expect(r.status).toBe('fulfilled');
        else expect((r as PromiseRejectedResult).reason.message).toContain(`Server overloaded: odd ${n}`);
      });
    } finally {
      await single.close();
    }
  });

  it('refuses an unknown endpoint as unavailable, and an unserved one too', async () => {
    const nope = { tcp: `127.0.0.1:${port}/694d9a3c5e1f2a07/nope` };
    const err = await client.send(nope, envelope(), {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toMatch(/refused the request: Server unavailable: no endpoint/);

    await server.unserve('dynamo', 'backend', 'generate');
    await expect(client.send(transport, envelope(), {})).rejects.toThrow(/Server unavailable:/);
  });

  describe('survives bad input', () => {
    const good = () => frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{}', envelope());

    /**
     * Runs one bad connection next to a good request on another connection; then checks the
     * server still serves and the bad input was logged.
     */
    async function withBadPeer(bad: Buffer, opts: { endAfter?: boolean; logged: RegExp }): Promise<RawPeer> {
      const p = peer();
      const goodPeer = peer();
      p.socket.write(bad);
      if (opts.endAfter) p.socket.end();
      goodPeer.socket.write(good());
      expect(await goodPeer.replyCount(1)).toEqual(['']);
      await waitFor('the bad input to be logged', () => logs.warnings().some((m) => opts.logged.test(m)));
      await expectServing();
      return p;
    }

    it('garbage bytes: error reply, then the connection is closed', async () => {
      const p = await withBadPeer(Buffer.alloc(300, 0xff), { logged: /closing connection: Invalid endpoint path/ });
      expect(await p.replyCount(1)).toEqual(['Invalid endpoint path: length 65535 is outside 1..1024 bytes']);
      await waitFor('bad connection closed', () => p.closed);
    });

    it('a zero-length path: error reply and close', async () => {
      const p = await withBadPeer(frame('', '{}', envelope()), { logged: /Invalid endpoint path: length 0/ });
      expect(await p.replyCount(1)).toEqual(['Invalid endpoint path: length 0 is outside 1..1024 bytes']);
    });

    it('a truncated frame then close: logged and discarded', async () => {
      const whole = good();
      await withBadPeer(whole.subarray(0, whole.length - 5), { endAfter: true, logged: /truncated frame/ });
    });

    it('an oversized declared length: error reply and close, without waiting for the bytes', async () => {
      const p = await withBadPeer(frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{}', Buffer.alloc(0), 0xffff_fff0), {
        logged: /exceeds the 33554432-byte limit/,
      });
      expect((await p.replyCount(1))[0]).toMatch(/^Read error: message of \d+ bytes exceeds the 33554432-byte limit$/);
      await waitFor('bad connection closed', () => p.closed);
    });

    it('malformed headers JSON: error reply, and the same connection keeps working', async () => {
      const p = await withBadPeer(Buffer.concat([frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{"a":', envelope()), good()]), {
        logged: /malformed headers JSON/,
      });
      const replies = await p.replyCount(2);
      expect(replies[0]).toMatch(/^Invalid request headers: not JSON/);
      expect(replies[1]).toBe('');
      expect(p.closed).toBe(false);
    });

    it('headers that are not a string map: error reply', async () => {
      const p = await withBadPeer(frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{"a":1}', envelope()), { logged: /not a string-to-string/ });
      expect(await p.replyCount(1)).toEqual(['Invalid request headers: expected a JSON object of string values']);
    });

    it('an invalid two-part payload: error reply, and the same connection keeps working', async () => {
      const broken = envelope().subarray(0, 30);
      const p = await withBadPeer(Buffer.concat([frame('694d9a3c5e1f2a07/dynamo/backend/generate', '{}', broken), good()]), {
        logged: /invalid two-part payload/,
      });
      const replies = await p.replyCount(2);
      expect(replies[0]).toMatch(/^Invalid request payload: two-part message declares/);
      expect(replies[1]).toBe('');
    });

    it('an acceptor that throws: refused as unavailable, logged as an error', async () => {
      await server.serve('dynamo', 'backend', 'broken', INSTANCE, () => {
        throw new Error('boom');
      });
      const broken = { tcp: transport.tcp.replace(/generate$/, 'broken') };
      await expect(client.send(broken, envelope(), {})).rejects.toThrow(/Server unavailable: .*boom/);
      expect(logs.lines.some((l) => l.level === 'error' && /acceptor threw/.test(l.msg))).toBe(true);
      await expectServing();
    });
  });

  describe('client errors are CannotConnect', () => {
    it('when nothing listens', async () => {
      const dead = { tcp: `127.0.0.1:${await freePort()}/1/generate` };
      const err = await client.send(dead, envelope(), {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CannotConnect);
      expect((err as Error).message).toMatch(/cannot connect to 127\.0\.0\.1:\d+: .*ECONNREFUSED/);
    });

    it('when the connection cannot be made in time', async () => {
      const { port: stuck, release } = await unacceptingPort();
      const fast = new TcpRequestPlaneClient({ connectTimeoutMs: 200 });
      try {
        const err = await fast.send({ tcp: `127.0.0.1:${stuck}/1/generate` }, envelope(), {}).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(CannotConnect);
        expect((err as Error).message).toBe(`cannot connect to 127.0.0.1:${stuck}: no connection within 200 ms`);
      } finally {
        await fast.close();
        release();
      }
    });

    it('not when the ack arrived while the caller was stalled past its deadline', async () => {
      // The worker acks at once from its own thread while this thread is busy for longer than the
      // ack timeout: the due timer must not win over the ack already waiting in the socket.
      const acker = new Worker(
        `const { createServer } = require('node:net');
        const server = createServer((s) => {
          let buf = Buffer.alloc(0);
          s.on('data', (d) => {
            buf = Buffer.concat([buf, d]);
            for (;;) {
              if (buf.length < 2) return;
              const path = buf.readUInt16BE(0);
              if (buf.length < path + 4) return;
              const fixed = path + buf.readUInt16BE(2 + path) + 8;
              if (buf.length < fixed) return;
              const total = fixed + buf.readUInt32BE(fixed - 4);
              if (buf.length < total) return;
              buf = buf.subarray(total);
              s.write(Buffer.alloc(4));
            }
          });
        });
        server.listen(0, '127.0.0.1', () => require('node:worker_threads').parentPort.postMessage(server.address().port));`,
        { eval: true },
      );
      const patientOnce = new TcpRequestPlaneClient({ requestTimeoutMs: 100 });
      try {
        const [port] = (await once(acker, 'message')) as [number];
        const transport = { tcp: `127.0.0.1:${port}/1/generate` };
        // Connected first: the stall below must fall after the request left, not before.
        await patientOnce.send(transport, envelope(), {});
        const sent = patientOnce.send(transport, envelope(), {});
        await new Promise((r) => process.nextTick(r));
        const until = Date.now() + 400;
        while (Date.now() < until);
        await expect(sent).resolves.toBeUndefined();
      } finally {
        await patientOnce.close();
        await acker.terminate();
      }
    });

    describe('against a worker that never replies', () => {
      let silent: Server;
      let silentPort: number;
      let accepted: Socket[];
      beforeEach(async () => {
        accepted = [];
        silent = createServer((s) => {
          accepted.push(s);
          s.on('error', () => {});
        });
        await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
        silentPort = (silent.address() as { port: number }).port;
      });
      afterEach(async () => {
        for (const s of accepted) s.destroy();
        await new Promise((r) => silent.close(r));
      });

      it('times out waiting for the ack', async () => {
        const impatient = new TcpRequestPlaneClient({ requestTimeoutMs: 150 });
        try {
          const started = Date.now();
          const err = await impatient.send({ tcp: `127.0.0.1:${silentPort}/1/generate` }, envelope(), {}).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(CannotConnect);
          expect((err as Error).message).toMatch(/did not acknowledge the request within 150 ms/);
          expect(Date.now() - started).toBeGreaterThanOrEqual(140);
        } finally {
          await impatient.close();
        }
      });

      it('fails outstanding requests when the worker drops the connection', async () => {
        const pending = client.send({ tcp: `127.0.0.1:${silentPort}/1/generate` }, envelope(), {});
        await waitFor('the connection', () => accepted.length > 0);
        for (const s of accepted) s.destroy();
        await expect(pending).rejects.toThrow(/closed before the worker acknowledged the request/);
      });
    });

    it('for a malformed transport', async () => {
      await expect(client.send({ tcp: 'no-port/1/generate' }, envelope(), {})).rejects.toThrow(/malformed tcp transport address 'no-port'/);
      await expect(client.send({ tcp: '127.0.0.1:9' }, envelope(), {})).rejects.toThrow(/expected HOST:PORT\/PATH/);
    });

    it('for a transport of another request plane', async () => {
      await expect(client.send({ nats_tcp: 'dynamo_backend.generate-1' }, envelope(), {})).rejects.toThrow(
        /not a tcp transport; start caller and worker with the same DYN_REQUEST_PLANE/,
      );
    });

    it('after the worker shut down', async () => {
      await client.send(transport, envelope(), {});
      await server.close();
      await expect(client.send(transport, envelope(), {})).rejects.toThrow(CannotConnect);
    });
  });

  it('rejects a message over the size limit before sending it', async () => {
    const small = new TcpRequestPlaneClient({ maxMessageSize: 100 });
    try {
      await expect(small.send(transport, envelope('x'.repeat(100)), {})).rejects.toThrow(InvalidArgument);
    } finally {
      await small.close();
    }
  });

  it('carries a large envelope intact', async () => {
    const body = JSON.stringify({ token_ids: Array.from({ length: 200_000 }, (_, i) => i) });
    await client.send(transport, envelope(body), {});
    expect(received.at(-1)!.envelope.equals(envelope(body))).toBe(true);
  });
});

/**
 * A loopback port whose listener never accepts and whose accept queue is full, so new connection
 * attempts hang (Linux drops their SYNs). Node cannot listen without accepting, hence python3.
 */
async function unacceptingPort(): Promise<{ port: number; release(): void }> {
  const script = [
    'import socket, sys',
    's = socket.socket()',
    "s.bind(('127.0.0.1', 0))",
    's.listen(0)',
    'print(s.getsockname()[1], flush=True)',
    'sys.stdin.read()',
  ].join('\n');
  const py = spawn('python3', ['-c', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  trackProcess('python3 (a listener that never accepts)', py);
  const port = await new Promise<number>((resolve, reject) => {
    py.once('error', reject);
    py.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  const fillers: Socket[] = [];
  // Fill the accept queue: connect until an attempt no longer completes.
  for (let i = 0; i < 8; i++) {
    const s = connect({ host: '127.0.0.1', port });
    s.on('error', () => {});
    fillers.push(s);
    const connected = await new Promise<boolean>((resolve) => {
      s.once('connect', () => resolve(true));
      setTimeout(() => resolve(false), 200);
    });
    if (!connected) break;
  }
  return {
    port,
    release() {
      for (const s of fillers) s.destroy();
      py.stdin.end();
      py.kill();
    },
  };
}
