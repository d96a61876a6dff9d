// LoRA adapters across stock Dynamo 1.6.1 and us, both ways. Our sample-engine worker's adapter,
// loaded through its /v1/loras, behind the real stock frontend; and a stock worker's adapter
// (stock's Rust Worker driving test/interop/python/lora_engine.py, stock 1.6.1 having no CPU engine
// with LoRA) behind our frontend. Each time the frontend lists the adapter, serves it by name with
// the adapter's own output, and answers 404 once it is unloaded. Skipped, never passed, without PyPI.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Child } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { post, waitForModel } from '@dynamo/testing/frontend-stack';
import { type Frontend, InteropStack, listedModels } from '@dynamo/testing/interop-stack';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** LORA INTEROP SKIPPED: ${stock.skip} ***\n`);

const SETUP = { name: 'file + tcp', discovery: 'file', plane: 'tcp' } as const;
const adapterDir = mkdtempSync(join(tmpdir(), 'lora-interop-'));
afterAll(() => rmSync(adapterDir, { recursive: true, force: true }));

async function complete(url: string, model: string, requestId?: string): Promise<{ status: number; text: string }> {
  const res = await post(
    url,
    '/v1/completions',
    { model, prompt: 'Tell me a story', max_tokens: 6 },
    requestId === undefined ? {} : { headers: { 'x-request-id': requestId } },
  );
  const body = (await res.json()) as { choices?: Array<{ text: string }>; message?: string; error?: unknown };
  return { status: res.status, text: body.choices?.[0]?.text ?? JSON.stringify(body) };
}

/** A worker's /v1/loras (its system port): load `name` from the adapter folder, or unload it. */
function loras(admin: string, action: 'load' | 'unload', name: string): Promise<Response> {
  return action === 'load'
    ? fetch(`${admin}/v1/loras`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: name, source: { uri: `file://${adapterDir}` } }),
      })
    : fetch(`${admin}/v1/loras/${name}`, { method: 'DELETE' });
}

describe.skipIf('skip' in stock)('LoRA adapters of our worker behind the stock 1.6.1 frontend', () => {
  const MODEL = 'qwen3-lora-base';
  let stack: InteropStack;
  let frontend: Frontend;
  let admin: string;

  beforeAll(async () => {
    stack = await InteropStack.start(SETUP, (stock as { python: string }).python);
    const port = await freePort();
    admin = `http://127.0.0.1:${port}`;
    stack.ourSample(MODEL, 'lora', ['--delay-ms', '0'], { DYN_SYSTEM_PORT: String(port), DYN_SYSTEM_HOST: '127.0.0.1', DYN_LORA_ENABLED: 'true' });
    frontend = await stack.stockFrontend();
    await waitForModel(frontend.url, MODEL, 'lora', 1, 120_000);
  }, 300_000);
  afterAll(() => stack?.stop());

  it('load → the stock frontend lists it → serves it by name with its own output → unload → 404', async () => {
    expect((await loras(admin, 'load', 'pirate')).status).toBe(200);
    await waitFor('the stock frontend to list the adapter', async () => (await listedModels(frontend.url)).includes('pirate'), 60_000);

    const base = await complete(frontend.url, MODEL);
    const adapted = await complete(frontend.url, 'pirate');
    expect(base.status).toBe(200);
    expect(adapted.status, adapted.text).toBe(200);
    expect(adapted.text).not.toBe(base.text);

    expect((await loras(admin, 'unload', 'pirate')).status).toBe(200);
    await waitFor('the stock frontend to drop the adapter', async () => !(await listedModels(frontend.url)).includes('pirate'), 60_000);
    expect((await complete(frontend.url, 'pirate')).status).toBe(404);
    expect((await complete(frontend.url, MODEL)).text).toBe(base.text);
  }, 180_000);
});

describe.skipIf('skip' in stock)('LoRA adapters of a stock 1.6.1 worker behind our frontend', () => {
  // The stock sample engine serves its model folder's path as the model's name.
  const model = qwen3ModelDir();
  let stack: InteropStack;
  let frontend: Frontend;
  let worker: Child;
  let admin: string;

  beforeAll(async () => {
    stack = await InteropStack.start(SETUP, (stock as { python: string }).python);
    const port = await freePort();
    admin = `http://127.0.0.1:${port}`;
    worker = stack.stockLoraEngine(model, 'stock-lora', port);
    frontend = await stack.ourFrontend();
    await waitForModel(frontend.url, model, 'stock-lora', 1, 120_000);
  }, 300_000);
  afterAll(() => stack?.stop());

  /** The `model` and `routing` the stock worker got with the request `requestId`. */
  const received = async (requestId: string) =>
    JSON.parse((await worker.waitForLine(new RegExp(`^REQUEST ${requestId} `), 10_000)).split(' ').slice(2).join(' ')) as unknown;

  it("load → our frontend lists it → the stock worker gets the adapter's name and answers with its output → unload → 404", async () => {
    const loaded = await loras(admin, 'load', 'captain');
    expect(loaded.status, await loaded.clone().text()).toBe(200);
    await waitFor('our frontend to list the adapter', async () => (await listedModels(frontend.url)).includes('captain'), 60_000);

    const base = await complete(frontend.url, model, 'base-1');
    const adapted = await complete(frontend.url, 'captain', 'captain-1');
    expect(base.status, base.text).toBe(200);
    expect(adapted.status, adapted.text).toBe(200);
    expect(adapted.text).not.toBe(base.text);
    expect(await received('captain-1')).toEqual({ model: 'captain', routing: { lora_name: 'captain' } });
    expect(await received('base-1')).toMatchObject({ model });
    expect((await complete(frontend.url, 'captain')).text).toBe(adapted.text);

    expect((await loras(admin, 'unload', 'captain')).status).toBe(200);
    await waitFor('our frontend to drop the adapter', async () => !(await listedModels(frontend.url)).includes('captain'), 60_000);
    expect((await complete(frontend.url, 'captain')).status).toBe(404);
    expect((await complete(frontend.url, model)).text).toBe(base.text);
  }, 180_000);
});
