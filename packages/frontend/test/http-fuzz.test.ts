// A bounded HTTP fuzz run through a real dynamo-frontend (one sample worker) while good streamed
// requests flow: a wrong value for every field of every generation API, malformed JSON, huge and
// deeply nested bodies, bad UTF-8, wrong content types, raw garbage and half-sent headers on the
// socket. Every fuzz input gets a 4xx or, where the value happens to be valid, a 200 (never a 5xx,
// never a hang); every good request finishes; the process stays up.
import { connect } from 'node:net';
import { ChatCompletionRequestSchema, CompletionRequestSchema } from '@dynamo/llm/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { MessagesRequestSchema } from '../src/anthropic/request.js';
import { ResponsesRequestSchema } from '../src/responses/request.js';
import { seededRandom } from './support/seeded-random.js';
import { Deployment, post, readStream, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'qwen3-sample';
const HEADERS_TIMEOUT_S = 2;
/** Longer than any fuzz input may take: past it the frontend is hanging. */
const HANG_MS = 15_000;

let deployment: Deployment;
let url = '';
let port = 0;
let frontend: Child;

beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!);
  deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '0']);
  ({ url, child: frontend } = await deployment.frontend([
    '--enable-anthropic-api',
    '--http-body-limit-mb',
    '1',
    '--http-request-timeout-secs',
    '3',
    '--http-headers-timeout-secs',
    String(HEADERS_TIMEOUT_S),
  ]));
  port = Number(new URL(url).port);
  await waitForModel(url, MODEL, 'sample', 1);
}, 60_000);
afterAll(() => deployment.stop());

/** One fuzz input: a name to report it by, and how to send it. */
type Input = { name: string; send: () => Promise<Response>; okAllowed?: boolean };
/** What came back: the status, the start of the body, and the error's message when the body is a JSON error. */
type Outcome = { name: string; status: number; body: string; message: string | undefined };

/** The message of Dynamo's (or Anthropic's) JSON error body. */
function errorMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: { message?: unknown } };
    const message = body.message ?? body.error?.message;
    return typeof message === 'string' && message !== '' ? message : undefined;
  } catch {
    return undefined;
  }
}

const chat = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 };
const APIS: Array<{ path: string; base: Record<string, unknown>; fields: string[] }> = [
  { path: '/v1/chat/completions', base: chat, fields: Object.keys(ChatCompletionRequestSchema.shape) },
  { path: '/v1/completions', base: { model: MODEL, prompt: 'Once', max_tokens: 4 }, fields: Object.keys(CompletionRequestSchema.shape) },
  { path: '/v1/responses', base: { model: MODEL, input: 'Hi', max_output_tokens: 4 }, fields: Object.keys(ResponsesRequestSchema.shape) },
  {
    path: '/v1/messages',
    base: { model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] },
    fields: Object.keys(MessagesRequestSchema.shape),
  },
];
const WRONG: unknown[] = [true, -1, 1.5, 1e308, 'x', '', '\ud800', [], [null], [{}], {}, { a: { b: [1] } }];

const send = (path: string, body: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(`${url}${path}`, { method: 'POST', headers, body, signal: AbortSignal.timeout(HANG_MS) });
const deep = (depth: number, open: string, close: string, inner = '1') => open.repeat(depth) + inner + close.repeat(depth);

/** Every input of the HTTP-level fuzz: each must get a 4xx (or a 200 when `okAllowed`). */
function inputs(): Input[] {
  const random = seededRandom(20261126);
  const list: Input[] = [];
  // A wrong (or, by chance, valid) value for every field each API reads.
  for (const api of APIS) {
    for (const field of api.fields) {
      for (const value of WRONG)
        list.push({
          name: `${api.path} ${field}: ${JSON.stringify(value)}`,
          send: () => send(api.path, JSON.stringify({ ...api.base, [field]: value })),
          okAllowed: true,
        });
    }
  }
  // Malformed JSON: every cut of a valid body, and bytes changed at random.
  for (const api of APIS) {
    const text = JSON.stringify(api.base);
    for (let at = 0; at < text.length; at++) list.push({ name: `${api.path} cut at ${at}`, send: () => send(api.path, text.slice(0, at)) });
    for (let i = 0; i < 20; i++) {
      const at = Math.floor(random() * text.length);
      const broken = `${text.slice(0, at)}${'{}[],:"\\'[Math.floor(random() * 8)]}${text.slice(at)}`;
      list.push({ name: `${api.path} ${JSON.stringify(broken)}`, send: () => send(api.path, broken), okAllowed: true });
    }
  }
  // Huge bodies, just under the 1 MB limit and over it.
  const many = (n: number, item: unknown) => Array.from({ length: n }, () => item);
  list.push(
    { name: '20,000 messages', send: () => send('/v1/chat/completions', JSON.stringify({ ...chat, messages: many(20_000, { role: 'user', content: 'a' }) })) },
    { name: 'a 900 kB prompt', send: () => send('/v1/completions', JSON.stringify({ model: MODEL, prompt: 'word '.repeat(180_000), max_tokens: 4 })) },
    { name: '100,000 stop strings', send: () => send('/v1/chat/completions', JSON.stringify({ ...chat, stop: many(100_000, 'z') })) },
    { name: '200,000 prompt token ids', send: () => send('/v1/completions', JSON.stringify({ model: MODEL, prompt: many(200_000, 7), max_tokens: 4 })) },
    { name: 'a 300-digit number', send: () => send('/v1/chat/completions', `{"model":"${MODEL}","messages":[],"max_tokens":${'9'.repeat(300)}}`) },
    {
      name: 'a 20-digit max_tokens',
      send: () => send('/v1/chat/completions', JSON.stringify(chat).replace('"max_tokens":4', `"max_tokens":${'1'.repeat(20)}`)),
    },
    { name: 'a 2 MB body', send: () => send('/v1/chat/completions', JSON.stringify({ ...chat, user: 'x'.repeat(2 * 2 ** 20) })) },
    {
      name: '10,000 fields',
      send: () => send('/v1/chat/completions', JSON.stringify({ ...chat, ...Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`f${i}`, i])) })),
    },
  );
  // Deeply nested values where the frontend reads, validates, templates or forwards them.
  const nested: Array<[string, string, string]> = [
    ['/v1/chat/completions', 'messages', deep(100_000, '[', ']')],
    ['/v1/chat/completions', 'response_format', deep(100_000, '{"a":', '}')],
    ['/v1/chat/completions', 'chat_template_kwargs', `{"x":${deep(50_000, '[', ']')}}`],
    ['/v1/chat/completions', 'tools', `[{"type":"function","function":{"name":"f","parameters":${deep(50_000, '{"properties":', '}', '{}')}}}]`],
    ['/v1/chat/completions', 'nvext', `{"annotations":${deep(100_000, '[', ']')}}`],
    ['/v1/completions', 'prompt', deep(100_000, '[', ']')],
    ['/v1/responses', 'input', `[{"role":"user","content":${deep(100_000, '[', ']')}}]`],
    ['/v1/messages', 'metadata', deep(100_000, '{"a":', '}')],
  ];
  for (const [path, field, value] of nested) {
    const base = JSON.stringify(APIS.find((a) => a.path === path)!.base);
    list.push({ name: `${path} ${field} nested deep`, send: () => send(path, `${base.slice(0, -1)},"${field}":${value}}`), okAllowed: true });
  }
  list.push({ name: 'nesting past the JSON parser', send: () => send('/v1/chat/completions', deep(300_000, '[', ']')) });
  // Bad UTF-8: a stray byte, an overlong encoding, a surrogate, a cut multi-byte character, in values and keys.
  for (const bytes of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
    const bad = Buffer.from(bytes);
    list.push(
      {
        name: `UTF-8 ${bad.toString('hex')} in content`,
        send: () =>
          send(
            '/v1/chat/completions',
            Buffer.concat([Buffer.from(`{"model":"${MODEL}","max_tokens":4,"messages":[{"role":"user","content":"a`), bad, Buffer.from('"}]}')]),
          ),
      },
      {
        name: `UTF-8 ${bad.toString('hex')} in a key`,
        send: () => send('/v1/completions', Buffer.concat([Buffer.from(`{"model":"${MODEL}","prompt":"a","`), bad, Buffer.from('":1}')])),
      },
    );
  }
  // Wrong content types.
  for (const type of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    'application/octet-stream',
    '',
  ]) {
    for (const path of ['/v1/chat/completions', '/v1/messages']) {
      list.push({
        name: `${path} as "${type}"`,
        send: () => send(path, JSON.stringify(APIS.find((a) => a.path === path)!.base), type === '' ? {} : { 'content-type': type }),
      });
    }
  }
  return list;
}

/** Raw bytes on a fresh socket: what came back, and whether the frontend closed it in time (no hang). */
function onSocket(bytes: Buffer): Promise<{ reply: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const hang = setTimeout(
      () => {
        socket.destroy();
        resolve({ reply, closed: false });
      },
      (HEADERS_TIMEOUT_S + 4) * 1000,
    );
    socket.on('data', (d: Buffer) => (reply += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(hang);
      resolve({ reply, closed: true });
    });
    socket.write(bytes);
  });
}

/** What goes on the socket: random bytes, a request line then garbage, headers cut short, broken framing. */
function socketInputs(): Array<[string, Buffer]> {
  const random = seededRandom(31);
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256)));
  const text = (s: string) => Buffer.from(s, 'latin1');
  const list: Array<[string, Buffer]> = [];
  for (let i = 0; i < 40; i++) list.push([`${1 + i * 97} random bytes`, bytes(1 + i * 97)]);
  for (let i = 0; i < 20; i++)
    list.push([`a request line, then ${i * 50} random bytes`, Buffer.concat([text('POST /v1/chat/completions HTTP/1.1\r\n'), bytes(i * 50)])]);
  for (const head of [
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-',
    'GET /v1/mod',
    'POST',
    '\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"model"',
  ])
    list.push([`half: ${JSON.stringify(head)}`, text(head)]);
  for (const head of [
    'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
    `GET /${'a'.repeat(100_000)} HTTP/1.1\r\n\r\n`,
    `GET / HTTP/1.1\r\nX: ${'b'.repeat(100_000)}\r\n\r\n`,
    'GET / HTTP/9.9\r\n\r\n',
    'BREW /v1/models HTTP/1.1\r\n\r\n',
    'GET /v1/models HTTP/1.1\r\nHost: a\r\n bad folding\r\n\r\n',
  ])
    list.push([`framing: ${JSON.stringify(head.slice(0, 60))}`, text(head)]);
  return list;
}

/** Runs `jobs` at `concurrency`, collecting what each returned. */
async function pool<T>(jobs: Array<() => Promise<T>>, concurrency: number): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++]!;
        results.push(await job());
      }
    }),
  );
  return results;
}

describe('HTTP fuzz', () => {
  it('every malformed input gets a 4xx, never a 5xx or a hang, while good streams finish and the frontend stays up', async () => {
    let fuzzing = true;
    const good = { sent: 0, finished: 0, problems: [] as string[] };
    // Good streamed requests all the while, two at a time.
    const flow = Promise.all(
      [0, 1].map(async () => {
        while (fuzzing) {
          good.sent += 1;
          const res = await post(url, '/v1/chat/completions', { ...chat, stream: true }, { signal: AbortSignal.timeout(HANG_MS) }).catch((err: Error) => err);
          const got = res instanceof Response && res.status === 200 ? await readStream(res).catch((err: Error) => err) : res;
          if (!(got instanceof Error) && !(got instanceof Response) && got.done && got.finishes.length === 1 && got.error === undefined) good.finished += 1;
          else if (good.problems.length < 5)
            good.problems.push(got instanceof Response ? `HTTP ${got.status}` : got instanceof Error ? got.message : JSON.stringify(got));
        }
      }),
    );

    const http = inputs();
    const outcomes = await pool(
      http.map((input) => async (): Promise<Outcome & { okAllowed: boolean }> => {
        const res = await input.send().catch((err: Error) => err);
        if (res instanceof Error) return { name: input.name, status: 0, body: res.message, message: undefined, okAllowed: false };
        const text = await res.text();
        return { name: input.name, status: res.status, body: text.slice(0, 300), message: errorMessage(text), okAllowed: input.okAllowed ?? false };
      }),
      8,
    );
    const sockets = socketInputs();
    const socketOutcomes = await pool(
      sockets.map(([name, bytes]) => async () => ({ name, ...(await onSocket(bytes)) })),
      16,
    );
    fuzzing = false;
    await flow;

    expect(outcomes).toHaveLength(http.length);
    const wrong = outcomes.filter((o) => !((o.status >= 400 && o.status < 500) || (o.okAllowed && o.status === 200)));
    expect(wrong.slice(0, 10), `of ${outcomes.length} fuzz requests, these got no 4xx`).toEqual([]);
    // Each 4xx is Dynamo's JSON error (or Anthropic's, under /v1/messages), naming what was wrong.
    expect(outcomes.filter((o) => o.status >= 400 && o.message === undefined).slice(0, 5)).toEqual([]);
    expect(outcomes.find((o) => o.name === '10,000 fields')?.message).toMatch(/^Validation: Unsupported parameter\(s\): `f0`, .* and 9980 more$/);
    expect(outcomes.find((o) => o.name === '/v1/chat/completions tools nested deep')?.message).toBe(
      'request body nests arrays and objects deeper than 100 levels',
    );
    expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o.status === 400).length).toBeGreaterThan(outcomes.length / 2);

    const hung = socketOutcomes.filter((o) => !o.closed);
    expect(hung.map((o) => o.name)).toEqual([]);
    // Whatever the frontend answered on a raw socket is an HTTP 4xx.
    const answered = socketOutcomes.filter((o) => o.reply !== '');
    expect(answered.length).toBeGreaterThan(sockets.length / 2);
    expect(answered.filter((o) => !/^HTTP\/1\.1 4\d\d /.test(o.reply)).map((o) => `${o.name}: ${o.reply.slice(0, 80)}`)).toEqual([]);

    expect(good.problems).toEqual([]);
    expect(good.finished).toBe(good.sent);
    expect(good.sent).toBeGreaterThan(20);
    expect(frontend.child.exitCode).toBeNull();
    expect((await fetch(`${url}/live`)).status).toBe(200);
  }, 300_000);
});
