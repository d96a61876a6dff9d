// A LoRA adapter's round trip through our frontend: loaded on a sample-engine worker through its
// /v1/loras (stock 1.6.1's routes and reply shapes), listed by /v1/models, served by name with
// the adapter's own output, then unloaded: 404. Then how the frontend groups adapter cards, as
// stock 1.6.1 does: an adapter is served only by instances that also registered its base model,
// the worker learns the adapter from `model` and `routing.lora_name`, and a record whose key and
// card disagree on being an adapter's is refused. Last, an adapter fetched from a (local stand-in
// for the) Hugging Face Hub, and KV routing that matches an adapter's prompts only against that
// adapter's cached blocks.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Child } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { type HubServer, startHubServer } from '@dynamo/testing/hub-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MODEL = 'qwen3-base';
const adapterDir = mkdtempSync(join(tmpdir(), 'lora-adapter-'));
let deployment: Deployment;
let frontend: Child;
let url: string;
let admin: string;

beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!);
  ({ url, child: frontend } = await deployment.frontend());
  const port = await freePort();
  admin = `http://127.0.0.1:${port}`;
  deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '0'], {
    DYN_SYSTEM_PORT: String(port),
    DYN_SYSTEM_HOST: '127.0.0.1',
    DYN_LORA_ENABLED: 'true',
  });
  await waitForModel(url, MODEL, 'sample', 1);
}, 60_000);
afterAll(async () => {
  await deployment?.stop();
  rmSync(adapterDir, { recursive: true, force: true });
});

async function loras(method: string, path = '', body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${admin}/v1/loras${path}`, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const listed = async () => ((await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id).sort();

async function complete(model: string, requestId?: string): Promise<{ status: number; text: string }> {
  const res = await post(
    url,
    '/v1/completions',
    { model, prompt: 'Tell me a story', max_tokens: 6 },
    requestId === undefined ? {} : { headers: { 'x-request-id': requestId } },
  );
  const body = (await res.json()) as { choices?: Array<{ text: string }>; error?: { message: string } };
  return { status: res.status, text: body.choices?.[0]?.text ?? body.error?.message ?? '' };
}

describe('LoRA adapters through our frontend', () => {
  it('load → listed → served with its own output → unload → 404', async () => {
    expect(await loras('GET')).toEqual({ status: 200, body: { status: 'success', loras: {}, count: 0 } });
    expect(await loras('POST', '', { lora_name: 'pirate', source: { uri: `file://${adapterDir}` } })).toEqual({
      status: 200,
      body: { status: 'success', message: "LoRA adapter 'pirate' loaded successfully", lora_name: 'pirate', lora_id: expect.any(Number) },
    });
    await waitFor('the adapter in /v1/models', async () => (await listed()).includes('pirate'), 20_000);
    expect(await listed()).toEqual(['pirate', MODEL]);

    const base = await complete(MODEL);
    const adapted = await complete('pirate');
    expect(base.status).toBe(200);
    expect(adapted.status).toBe(200);
    expect(adapted.text).not.toBe(base.text);
    // The same adapter answers the same way.
    expect((await complete('pirate')).text).toBe(adapted.text);

    expect(await loras('GET')).toMatchObject({ status: 200, body: { count: 1, loras: { pirate: expect.any(Number) } } });
    expect(await loras('DELETE', '/pirate')).toMatchObject({
      status: 200,
      body: { status: 'success', message: "LoRA adapter 'pirate' unloaded successfully" },
    });
    await waitFor('the adapter to leave /v1/models', async () => !(await listed()).includes('pirate'), 20_000);
    const gone = await complete('pirate');
    expect(gone.status).toBe(404);
    expect((await complete(MODEL)).text).toBe(base.text);
  }, 60_000);

  it("answers bad requests with stock's messages (500 through /v1/loras) and keeps serving", async () => {
    expect(await loras('POST', '', { lora_name: 'x' })).toEqual({ status: 500, body: { status: 'error', message: "'source' object is required in request" } });
    expect(await loras('POST', '', { lora_name: 'x', source: { uri: `file://${adapterDir}/missing` } })).toMatchObject({
      status: 500,
      body: { status: 'error', message: expect.stringContaining('no such file or folder') },
    });
    expect(await loras('DELETE', '/nobody')).toEqual({
      status: 500,
      body: { status: 'error', message: "LoRA adapter 'nobody' not found. Available LoRAs: []" },
    });
    const direct = await fetch(`${admin}/engine/update/unload_lora`, { method: 'POST', body: '{"lora_name":"nobody"}' });
    // The same refusal on the engine route is a 200, as stock's.
    expect(direct.status).toBe(200);
    expect((await complete(MODEL)).status).toBe(200);
  });
});

describe('adapter cards grouped as stock 1.6.1 groups them', () => {
  let withBase: Child;
  let withoutBase: Child;
  const health = async () => ((await (await fetch(`${url}/health`)).json()) as { instances: Array<{ component: string }> }).instances.map((i) => i.component);

  beforeAll(async () => {
    // The same adapter on two instances; only one of them registered the base model.
    withBase = deployment.loraCardsWorker('echo-base', 'lora-with-base', ['base', 'adapter=shared']);
    withoutBase = deployment.loraCardsWorker('echo-base', 'lora-without-base', ['adapter=shared', 'adapter=orphan']);
    await Promise.all([withBase.waitForLine(/^REGISTERED$/), withoutBase.waitForLine(/^REGISTERED$/)]);
    await waitFor('the adapter of the instance with the base card in /v1/models', async () => (await listed()).includes('shared'), 20_000);
    // Its instance shows in /health once the frontend has taken in its adapter records.
    await waitFor('the instance without a base card in /health', async () => (await health()).includes('lora-without-base'), 20_000);
  }, 60_000);

  it('serves an adapter only on instances that registered its base model', async () => {
    expect(await listed()).toEqual(['echo-base', MODEL, 'shared']);
    expect((await complete('orphan')).status).toBe(404);
    for (let i = 0; i < 6; i++) expect((await complete('shared')).status).toBe(200);
    expect(withBase.lines.filter((l) => l.startsWith('REQUEST ')).length).toBe(6);
    expect(withoutBase.lines.filter((l) => l.startsWith('REQUEST '))).toEqual([]);
  });

  it("sends the adapter's name as the request's model and routing.lora_name", async () => {
    const sent = async (requestId: string) =>
      JSON.parse((await withBase.waitForLine(new RegExp(`^REQUEST ${requestId} `), 5_000)).split(' ').slice(2).join(' ')) as unknown;
    expect((await complete('shared', 'lora-by-name')).status).toBe(200);
    expect(await sent('lora-by-name')).toEqual({ model: 'shared', routing: { lora_name: 'shared' } });
    expect((await complete('echo-base', 'base-by-name')).status).toBe(200);
    expect(await sent('base-by-name')).toEqual({ model: 'echo-base', routing: {} });
  });

  it('refuses a record whose key and card disagree on being an adapter, and serves the rest', async () => {
    deployment.loraCardsWorker('mismatch-base', 'lora-mismatch', ['base', 'mismatch=rogue']);
    await waitFor(
      'the refusal in the frontend log',
      () =>
        frontend
          .stderr()
          .split('\n')
          .find((l) => l.includes('LoRA discovery identity and card metadata disagree')),
      20_000,
    );
    await waitForModel(url, 'mismatch-base', 'lora-mismatch', 1);
    expect(await listed()).toEqual(['echo-base', 'mismatch-base', MODEL, 'shared']);
    expect((await complete('rogue')).status).toBe(404);
    for (const model of ['mismatch-base', 'shared', MODEL]) expect((await complete(model)).status, model).toBe(200);
  });
});

describe('an hf:// adapter under KV routing', () => {
  const KV_MODEL = 'qwen3-kv';
  const BLOCK = 16;
  const root = mkdtempSync(join(tmpdir(), 'lora-hub-'));
  const loraPath = join(root, 'loras');
  let hub: HubServer;
  let kvUrl: string;
  let kvAdmin: string;

  beforeAll(async () => {
    const repo = join(root, 'repo');
    mkdirSync(repo);
    writeFileSync(join(repo, 'captain.gguf'), 'adapter weights the sample engine does not read');
    hub = await startHubServer({ repos: { 'Adapters/Captain-GGUF': { main: { sha: 'c4'.repeat(20), dir: repo } } } });
    ({ url: kvUrl } = await deployment.frontend(['--router-mode', 'kv']));
    const port = await freePort();
    kvAdmin = `http://127.0.0.1:${port}`;
    const cache = ['--simulate-kv-cache', '--kv-block-size', String(BLOCK), '--total-kv-blocks', '256'];
    const env = {
      DYN_SYSTEM_PORT: String(port),
      DYN_SYSTEM_HOST: '127.0.0.1',
      DYN_LORA_ENABLED: 'true',
      HF_ENDPOINT: hub.url,
      HF_HUB_OFFLINE: '0',
      DYN_LORA_PATH: loraPath,
    };
    deployment.sampleWorker(['--model-name', KV_MODEL, '--component', 'sample-kv', '--delay-ms', '0', ...cache], env);
    await waitForModel(kvUrl, KV_MODEL, 'sample-kv', 1);
  }, 60_000);
  afterAll(async () => {
    await hub?.close();
    rmSync(root, { recursive: true, force: true });
  });

  /** The prompt tokens the worker found cached, and how many the router expected it to have. */
  async function send(model: string, tokens: number[]): Promise<{ cached: number; routerSaw: number }> {
    const before = await routerCachedTokens();
    const res = await post(kvUrl, '/v1/completions', { model, prompt: tokens, max_tokens: 2 });
    const body = (await res.json()) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
    expect(res.status, JSON.stringify(body)).toBe(200);
    return { cached: body.usage?.prompt_tokens_details?.cached_tokens ?? 0, routerSaw: (await routerCachedTokens()) - before };
  }
  async function routerCachedTokens(): Promise<number> {
    const metrics = await (await fetch(`${kvUrl}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith(`dynamo_component_router_kv_selected_cached_prefix_tokens_total{model="${KV_MODEL}"}`));
    return Number(line?.split(' ').at(-1) ?? 0);
  }

  it('downloads the adapter into DYN_LORA_PATH, and the router matches its prompts only against its own blocks', async () => {
    const load = await fetch(`${kvAdmin}/v1/loras`, {
      method: 'POST',
      body: JSON.stringify({ lora_name: 'captain', source: { uri: 'hf://Adapters/Captain-GGUF' } }),
    });
    const loaded = (await load.json()) as Record<string, unknown>;
    expect(loaded, JSON.stringify(loaded)).toMatchObject({ status: 'success', lora_name: 'captain' });
    expect(existsSync(join(loraPath, 'models--Adapters--Captain-GGUF', 'snapshots', 'c4'.repeat(20), 'captain.gguf'))).toBe(true);
    await waitFor(
      'the adapter in /v1/models',
      async () => ((await (await fetch(`${kvUrl}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.some((m) => m.id === 'captain'),
      20_000,
    );

    const prompt = Array.from({ length: 8 * BLOCK }, (_, i) => 3000 + i);
    expect((await send('captain', prompt)).cached).toBe(0);
    // The worker's stored events (hashed under the adapter's name) reach the router a moment later.
    await waitFor('the router to match the adapter prompt against its blocks', async () => (await send('captain', [...prompt, 1])).routerSaw === 8 * BLOCK);
    // The base model's copy of the same prompt matches none of them, in the router or the engine.
    expect(await send(KV_MODEL, [...prompt, 2])).toEqual({ cached: 0, routerSaw: 0 });
    expect(await send('captain', [...prompt, 3])).toEqual({ cached: 8 * BLOCK, routerSaw: 8 * BLOCK });
  }, 60_000);
});
