// The pumped Rust path: the processor reads the worker's call-home socket itself and sends the
// events to the client's socket from the same native callback while the client keeps up. A real
// response stream server, a real worker sender (`callHome`), a real HTTP server; the clients are
// a Python socket with a 4 KiB receive buffer that waits before reading (so the server's sends
// back up, over and over), one that leaves after the first events, and fetch.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PreprocessedRequest } from '@dynamo/llm';
import { streamProcessor } from '@dynamo/llm/internal';
import { ReadFlag } from '@dynamo/runtime';
import { callHome, type ResponseSender, ResponseStreamServer, silentLog } from '@dynamo/runtime/internal';
import type { FastifyReply } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { EventOutput } from '../src/openai/event-output.js';
import { type EventsAnswer, streamEvents } from '../src/openai/respond.js';
import { FrontendMetrics } from '../src/metrics.js';
import { answerSettings, useQwen3Tokenizer } from './support/stream-answer.js';

/** Qwen3's token for 64 dashes: big events from few tokens. */
const DASHES = 3513;
const TOKENS_PER_FRAME = 1000;
/** The most a TCP socket's send buffer grows to: a stalled client backs the sends up beyond it. */
function sendBufferMax(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/tcp_wmem', 'utf8').trim().split(/\s+/)[2]) || 4 << 20;
  } catch {
    return 4 << 20;
  }
}
const FRAMES = Math.ceil((2 * sendBufferMax() + (1 << 20)) / (64 * TOKENS_PER_FRAME));
const TEXT = '-'.repeat(64 * FRAMES * TOKENS_PER_FRAME);

const tokenizerOf = useQwen3Tokenizer();
let streams: ResponseStreamServer;
const metrics = new FrontendMetrics('native_io_test');

beforeAll(async () => {
  streams = new ResponseStreamServer({ log: silentLog });
  await streams.listen();
});
afterAll(() => streams.close());

interface Served {
  /** Whether `streamEvents` finished the response. */
  complete: Promise<boolean>;
  /** The flags of the pumped reads that reached JavaScript, as the processor gave them. */
  flags: number[];
  sender: Promise<ResponseSender>;
}

/**
 * Serves one streamed chat answer of {@link FRAMES} frames from a worker that sends them as fast
 * as its socket takes them (or `paceMs` apart); returns the server, its port and what happened
 * on the server side.
 */
async function serveOne(paceMs = 0): Promise<{ server: Server; port: number; served: Promise<Served> }> {
  let resolve!: (s: Served) => void;
  const served = new Promise<Served>((r) => (resolve = r));
  const server = createServer((_req, res) => {
    const request: PreprocessedRequest = { model: 'm', token_ids: [1, 2, 3], stop_conditions: { max_tokens: FRAMES * TOKENS_PER_FRAME }, sampling_options: {} };
    const base = answerSettings(metrics, 'chat', request.token_ids.length, true);
    const output = new EventOutput(streamProcessor(tokenizerOf(), request, { surface: 'chat', ...base.ids }), base.tracker, base.promptTokens);
    const flags: number[] = [];
    const processor = output.processor;
    const pump = processor.pump.bind(processor);
    processor.pump = (fd, onRead) =>
      pump(fd, (f) => {
        flags.push(f);
        onRead(f);
      });
    const pending = streams.register('req-1', { reader: output });
    // As the frontend does: a client gone mid-answer kills the request.
    res.on('close', () => {
      if (!res.writableFinished) pending.kill();
    });
    const sender = (async () => {
      const s = await callHome(pending.connectionInfo);
      for (let i = 0; i < FRAMES && !s.killed; i++) {
        const last = i === FRAMES - 1;
        const chunk = { token_ids: new Array<number>(TOKENS_PER_FRAME).fill(DASHES), ...(last && { finish_reason: 'length' }) };
        await s.send({ data: chunk });
        if (paceMs > 0) await new Promise((r) => setTimeout(r, paceMs));
      }
      await s.complete();
      return s;
    })();
    const batches = pending.batches[Symbol.asyncIterator]() as AsyncIterator<string[]>;
    const answer: EventsAnswer = { ...base, output, events: batches };
    const complete = batches.next().then((first) => streamEvents(answer, { raw: res } as FastifyReply, first, silentLog));
    resolve({ complete, flags, sender });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, served };
}

/**
 * A raw HTTP/1.1 client in Python with a 4 KiB receive buffer: reads `stallAfter` bytes, waits
 * `waitS`, then reads slowly, up to `limit` bytes.
 */
function pythonClient(port: number, { stallAfter = 0, waitS = 0, limit = 1 << 30 }): Promise<Buffer> {
  const script = `
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", ${port}))
s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
data = bytearray()
stalled = False
while len(data) < ${limit}:
    if not stalled and len(data) >= ${stallAfter}:
        stalled = True
        time.sleep(${waitS})
    b = s.recv(4096)
    if not b:
        break
    data += b
    if stalled:
        time.sleep(0.0005)
s.close()
sys.stdout.buffer.write(data)
`;
  return new Promise((resolve, reject) => {
    const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`python client exited ${code}: ${Buffer.concat(err).toString()}`)),
    );
  });
}

/** The body of a chunked HTTP/1.1 response. */
function dechunk(response: Buffer): string {
  let at = response.indexOf('\r\n\r\n') + 4;
  const parts: Buffer[] = [];
  for (;;) {
    const eol = response.indexOf('\r\n', at);
    const size = Number.parseInt(response.subarray(at, eol).toString(), 16);
    if (!(size > 0)) break;
    parts.push(response.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(parts).toString();
}

/** What a chat SSE body says: the content, the finish reason, the usage's completion tokens, whether it ended with [DONE]. */
function readSse(body: string) {
  let content = '';
  let finish: string | null = null;
  let completionTokens: number | undefined;
  const data = body
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  for (const d of data.slice(0, -1)) {
    const chunk = JSON.parse(d) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: { completion_tokens: number } };
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      finish ??= c.finish_reason;
    }
    completionTokens ??= chunk.usage?.completion_tokens;
  }
  return { content, finish, completionTokens, done: data.at(-1) === '[DONE]' };
}

describe('the pumped Rust path (native reads of the call-home socket, direct sends to the client)', () => {
  it('gives a client that reads slowly every event in order, through sends cut short again and again', async () => {
    const { server, port, served } = await serveOne(2);
    try {
      // Fast at first (direct sends start), then stalled and slow: the sends back up.
      const response = await pythonClient(port, { stallAfter: 100_000, waitS: 0.5 });
      const s = await served;
      expect(await s.complete).toBe(true);
      const sse = readSse(dechunk(response));
      expect(sse.content.length).toBe(TEXT.length);
      expect(sse.content === TEXT).toBe(true);
      expect(sse).toMatchObject({ finish: 'length', completionTokens: FRAMES * TOKENS_PER_FRAME, done: true });
      // The processor read the socket, and its direct sends were cut short by the full socket.
      expect(s.flags.length).toBeGreaterThan(0);
      expect(s.flags.some((f) => f & ReadFlag.UNSENT)).toBe(true);
      // The worker's end came through the processor too, and the worker was not stopped.
      expect(s.flags.some((f) => f & ReadFlag.END)).toBe(true);
      expect((await s.sender).killed).toBe(false);
    } finally {
      server.close();
    }
  });

  it('gives a client that keeps up the same answer, sent by the processor itself', async () => {
    const { server, port, served } = await serveOne();
    try {
      const body = await (await fetch(`http://127.0.0.1:${port}/`)).text();
      const s = await served;
      expect(await s.complete).toBe(true);
      expect(readSse(body)).toEqual({ content: TEXT, finish: 'length', completionTokens: FRAMES * TOKENS_PER_FRAME, done: true });
      // Reads whose output was sent natively reach JavaScript only to have their tokens counted.
      expect(s.flags.some((f) => f & ReadFlag.ACCOUNT && !(f & ReadFlag.OUTPUT))).toBe(true);
    } finally {
      server.close();
    }
  });

  it('stops the worker when the client leaves mid-stream, and the server serves the next client', async () => {
    const { server, port, served } = await serveOne(2);
    try {
      const partial = await pythonClient(port, { limit: 64 * 1024 });
      expect(partial.length).toBeGreaterThan(0);
      const s = await served;
      expect(await s.complete).toBe(false);
      const sender = await s.sender;
      expect(sender.killed).toBe(true);
    } finally {
      server.close();
    }
    const next = await serveOne();
    try {
      const body = await (await fetch(`http://127.0.0.1:${next.port}/`)).text();
      expect(readSse(body).content).toBe(TEXT);
    } finally {
      next.server.close();
    }
  });
});
