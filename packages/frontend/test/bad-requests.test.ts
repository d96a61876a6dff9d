// Bad input of every kind through a real dynamo-frontend process (with one sample worker): each
// gets the right status and Dynamo's JSON error, good requests running at the same time finish,
// and 10,000 seeded random mutations of valid bodies never produce a 5xx other than 503.
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { seededRandom } from './support/seeded-random.js';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'qwen3-sample';
const chat = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 };
let deployment: Deployment;
let url = '';
let frontend: Child;

beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!);
  deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '0']);
  ({ url, child: frontend } = await deployment.frontend(['--http-body-limit-mb', '1', '--http-request-timeout-secs', '2', '--http-headers-timeout-secs', '2']));
  await waitForModel(url, MODEL, 'sample', 1);
}, 60_000);
afterAll(() => deployment.stop());

/** A request that must succeed, streamed, to run alongside the bad ones. */
async function goodStream(): Promise<string> {
  const res = await post(url, '/v1/chat/completions', { ...chat, stream: true });
  expect(res.status).toBe(200);
  return res.text();
}

const raw = (path: string, body: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }, method = 'POST') =>
  fetch(`${url}${path}`, { method, headers, ...(method === 'GET' ? {} : { body }) });

const cases: Array<[string, () => Promise<Response>, number, RegExp]> = [
  ['malformed JSON', () => raw('/v1/chat/completions', '{"model": "qwen3-sample", "messages": ['), 400, /JSON/],
  ['a body that is not an object', () => raw('/v1/chat/completions', '[1, 2]'), 400, /JSON object/],
  ['an empty body', () => raw('/v1/chat/completions', ''), 400, /empty/],
  ['messages of the wrong type', () => post(url, '/v1/chat/completions', { ...chat, messages: 'hello' }), 400, /messages/],
  ['temperature as a string', () => post(url, '/v1/chat/completions', { ...chat, temperature: 'hot' }), 400, /temperature/],
  ['negative max_tokens', () => post(url, '/v1/chat/completions', { ...chat, max_tokens: -5 }), 400, /max_tokens/],
  ['max_tokens 0', () => post(url, '/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 0 }), 400, /Max tokens must be greater than 0/],
  ['a missing model', () => post(url, '/v1/chat/completions', { messages: chat.messages }), 400, /model/],
  ['an unknown model', () => post(url, '/v1/chat/completions', { ...chat, model: 'no-such-model' }), 404, /Model not found: no-such-model/],
  ['n: 2 at temperature 0', () => post(url, '/v1/chat/completions', { ...chat, n: 2, temperature: 0 }), 400, /When n > 1, temperature must be greater than 0/],
  ['n: 129', () => post(url, '/v1/chat/completions', { ...chat, n: 129 }), 400, /n must be between 1 and 128, got 129/],
  [
    '33 stop token ids',
    () => post(url, '/v1/chat/completions', { ...chat, stop: Array.from({ length: 33 }, (_, i) => i) }),
    400,
    /Maximum of 32 stop token IDs allowed, got 33/,
  ],
  ['an unknown reasoning_effort', () => post(url, '/v1/chat/completions', { ...chat, reasoning_effort: 'huge' }), 400, /reasoning_effort/],
  [
    'an image part that is not a URL',
    () => post(url, '/v1/chat/completions', { ...chat, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'not a url' } }] }] }),
    400,
    /messages\[0\]\.content\[0\]: image_url\.url is not an absolute URL/,
  ],
  ['an unknown field', () => post(url, '/v1/chat/completions', { ...chat, bogus: true }), 400, /Unsupported parameter\(s\): `bogus`/],
  ['deprecated functions', () => post(url, '/v1/chat/completions', { ...chat, functions: [] }), 501, /deprecated/],
  [
    'a 10 MB body',
    () => raw('/v1/chat/completions', JSON.stringify({ ...chat, messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024) }] })),
    413,
    /larger than the limit/,
  ],
  ['invalid UTF-8', () => raw('/v1/chat/completions', Buffer.from([0x7b, 0x22, 0x6d, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 400, /UTF-8/],
  ['a text/plain body', () => raw('/v1/chat/completions', JSON.stringify(chat), { 'content-type': 'text/plain' }), 415, /Content-Type application\/json/],
  ['GET on a POST route', () => raw('/v1/chat/completions', '', {}, 'GET'), 405, /only takes POST/],
  ['an unknown route', () => raw('/v1/nothing', '', {}, 'GET'), 404, /Route not found: GET \/v1\/nothing/],
  [
    'a batch of too many choices',
    () => post(url, '/v1/completions', { model: MODEL, prompt: ['a', 'b'], n: 65 }),
    400,
    /Total choices \(batch_size × n = 2 × 65 = 130\) exceeds maximum of 128/,
  ],
  ['a bad instance pin', () => post(url, '/v1/chat/completions', chat, { headers: { 'x-dynamo-worker-instance-id': 'abc' } }), 400, /instance id/],
];

describe('bad requests', () => {
  it.each(cases)('%s gets the right status and a JSON error, while good requests finish', async (_name, send, status, message) => {
    const [res, good] = await Promise.all([send(), goodStream()]);
    expect(res.status).toBe(status);
    const body = (await res.json()) as { message: string; type: string; code: number; error: { message: string; type: string; code: number } };
    expect(body.code).toBe(status);
    expect(typeof body.type).toBe('string');
    expect(body.message).toMatch(message);
    // The OpenAI SDKs read the same error from its `error` object.
    expect(body.error).toMatchObject({ message: body.message, code: status });
    expect(body.error.type).toMatch(/^[a-z_]+$/);
    expect(good).toContain('data: [DONE]');
  });

  it('a body nested 100 levels deep is served, in template arguments and in a tool schema; one level deeper is a 400 naming the limit', async () => {
    const kwargs = (depth: number) => `${JSON.stringify(chat).slice(0, -1)},"chat_template_kwargs":{"x":${'['.repeat(depth - 2)}${']'.repeat(depth - 2)}}}`;
    // body, tools, the tool, function, parameters, then the properties' levels
    const tools = (depth: number) =>
      `${JSON.stringify(chat).slice(0, -1)},"tools":[{"type":"function","function":{"name":"f","parameters":${'{"properties":'.repeat(depth - 5)}{}${'}'.repeat(depth - 5)}}}]}`;
    for (const body of [kwargs(100), tools(100)]) {
      const served = await raw('/v1/chat/completions', body);
      expect(served.status, await served.clone().text()).toBe(200);
    }
    for (const body of [kwargs(101), tools(101)]) {
      const deeper = await raw('/v1/chat/completions', body);
      expect(deeper.status).toBe(400);
      expect(((await deeper.json()) as { message: string }).message).toBe('request body nests arrays and objects deeper than 100 levels');
    }
  });

  it('a slow-loris client gets a 408 JSON error after the request timeout, and others are served meanwhile', async () => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8').on('data', (d: string) => (received += d));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    const drip = setInterval(() => socket.writable && socket.write('x-slow: 1\r\n'), 300);
    const started = Date.now();
    for (let i = 0; i < 3; i++) expect(await goodStream()).toContain('data: [DONE]');
    await closed;
    clearInterval(drip);
    expect(Date.now() - started).toBeLessThan(6000);
    expect(received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 408, type: 'Request Timeout' });
  });

  it('closes 1,000 sockets that send half a request, or nothing, and never read, within the headers timeout, while good requests are answered', async () => {
    const port = Number(new URL(url).port);
    const pid = frontend.child.pid!;
    const fds = () => readdirSync(`/proc/${pid}/fd`).length;
    const before = fds();
    // As many as this process may open beside what it has (the machine's open-file limit).
    const count = Math.min(1000, openFileLimit() - 300);
    const halves = ['', 'POST /v1/chat/comp', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n', 'GET /live HTTP/1.1\r\nHo'];
    // Clients that never read: a server that only ends its side would keep every socket.
    const sockets = Array.from({ length: count }, (_, i) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.on('connect', () => socket.write(halves[i % halves.length]!));
      return socket;
    });
    try {
      await waitFor('the frontend to accept the sockets', () => fds() >= before + count / 2, 10_000);
      for (let i = 0; i < 3; i++) expect(await goodStream()).toContain('data: [DONE]');
      expect(count).toBeGreaterThanOrEqual(500);
      // The headers timeout is 2 s, then a second for the 408 to go out.
      await waitFor('the frontend to close them (its open files back to where they were)', () => fds() <= before + 10, 8_000);
      expect((await fetch(`${url}/live`)).status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 60_000);

  it('closes connections past the per-address limit at once, with a warning that names the flag', async () => {
    const capped = await deployment.frontend(['--http-max-connections-per-ip', '5']);
    const port = Number(new URL(capped.url).port);
    const open = Array.from({ length: 5 }, () => connect(port, '127.0.0.1').on('error', () => {}));
    await Promise.all(open.map((s) => new Promise((resolve) => s.on('connect', resolve))));
    const sixth = connect(port, '127.0.0.1').on('error', () => {});
    await new Promise((resolve) => sixth.on('close', resolve));
    await waitFor('the warning', () =>
      [...capped.child.lines, capped.child.stderr()].some((l) => /5 connections are open from this address \(raise --http-max-connections-per-ip\)/.test(l)),
    );
    for (const s of open) s.destroy();
    await waitFor('a connection to be taken again', async () => (await fetch(`${capped.url}/live`).catch(() => undefined))?.status === 200);
  });

  it('closes a keep-alive connection after --http-max-requests-per-socket requests, and the client reconnects', async () => {
    /** The sockets four sequential GET /live took through one keep-alive agent. */
    const socketsFor = async (base: string) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const sockets = new Set<Socket>();
      for (let i = 0; i < 4; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = get(`${base}/live`, { agent }, (res) => res.resume().on('end', resolve));
          req.on('socket', (socket) => sockets.add(socket)).on('error', reject);
        });
      }
      agent.destroy();
      return sockets.size;
    };
    expect(await socketsFor(url)).toBe(1);
    const capped = await deployment.frontend(['--http-max-requests-per-socket', '2']);
    expect(await socketsFor(capped.url)).toBe(2);
  });

  it('10,000 seeded random mutations of valid bodies produce no 5xx but 503, and the frontend stays up', async () => {
    const random = seededRandom(20261123);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const values = [null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, '', 'x', '\u0000', '\ud800', [], [1, 'a'], {}, { a: { b: [] } }, 'qwen3-sample'];
    const bases: Array<[string, Record<string, unknown>]> = [
      ['/v1/chat/completions', { ...chat, temperature: 0.5, stop: ['z'], stream: false }],
      ['/v1/chat/completions', { ...chat, stream: true, stream_options: { include_usage: true }, nvext: { ignore_eos: true } }],
      ['/v1/completions', { model: MODEL, prompt: 'Once', max_tokens: 3, top_p: 0.9 }],
      ['/v1/completions', { model: MODEL, prompt: [1, 2, 3], max_tokens: 3, stream: true, min_tokens: 1 }],
    ];
    const mutate = (body: Record<string, unknown>): Record<string, unknown> | string => {
      const out = structuredClone(body);
      const keys = Object.keys(out);
      for (let n = 1 + Math.floor(random() * 3); n > 0; n--) {
        const roll = random();
        if (roll < 0.3) out[pick(keys)] = pick(values);
        else if (roll < 0.45) delete out[pick(keys)];
        else if (roll < 0.6)
          out[pick(['n', 'logprobs', 'top_logprobs', 'seed', 'max_completion_tokens', 'tools', 'response_format', 'top_k', 'echo', 'best_of', 'zz'])] =
            pick(values);
        else if (roll < 0.75) {
          const messages = out.messages;
          if (Array.isArray(messages) && typeof messages[0] === 'object' && messages[0] !== null)
            (messages[0] as Record<string, unknown>)[pick(['role', 'content', 'name'])] = pick(values);
          else out.prompt = pick(values);
        } else if (roll < 0.85)
          out.nvext = pick([{ token_data: pick(values) }, { annotations: pick(values) }, { backend_instance_id: pick(values) }, pick(values)]);
        else {
          const text = JSON.stringify(out);
          const at = Math.floor(random() * text.length);
          return roll < 0.93 ? text.slice(0, at) : text.slice(0, at) + String.fromCharCode(Math.floor(random() * 0x3000)) + text.slice(at + 1);
        }
      }
      // Keep generation short: the sample engine would honour a huge max_tokens.
      for (const key of ['max_tokens', 'max_completion_tokens', 'min_tokens'] as const) {
        if (typeof out[key] === 'number' && (out[key] as number) > 8) out[key] = 8;
      }
      return out;
    };
    const statuses = new Map<number, number>();
    const bad: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < 10_000) {
          next += 1;
          const [path, base] = pick(bases);
          const body = mutate(base);
          const res = await raw(path, typeof body === 'string' ? body : JSON.stringify(body));
          const text = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status >= 500 && res.status !== 503)
            bad.push(`${res.status} ${typeof body === 'string' ? body : JSON.stringify(body)} -> ${text.slice(0, 200)}`);
          else if (res.status >= 400 && !(typeof JSON.parse(text).message === 'string')) bad.push(`no JSON error: ${text.slice(0, 200)}`);
        }
      }),
    );
    expect(bad.slice(0, 5)).toEqual([]);
    expect([...statuses.keys()]).toContain(200);
    expect([...statuses.keys()]).toContain(400);
    expect((await fetch(`${url}/live`)).status).toBe(200);
    expect(await goodStream()).toContain('data: [DONE]');
  }, 300_000);
});

/** This process's limit of open files (Linux), or a conservative guess elsewhere. */
function openFileLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    return Number(line?.trim().split(/\s+/)[3] ?? 1024) || 1024;
  } catch {
    return 1024;
  }
}
