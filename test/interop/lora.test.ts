// A LoRA adapter of our sample-engine worker behind the real stock Dynamo 1.6.1 frontend: loaded
// through the worker's /v1/loras, the stock frontend lists it, serves it by name with the
// adapter's own output, and answers 404 once it is unloaded. Skipped, never passed, without PyPI.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { post, waitForModel } from '@dynamo/testing/frontend-stack';
import { type Frontend, InteropStack } from '@dynamo/testing/interop-stack';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** LORA INTEROP SKIPPED: ${stock.skip} ***\n`);

const MODEL = 'qwen3-lora-base';
const adapterDir = mkdtempSync(join(tmpdir(), 'lora-interop-'));

describe.skipIf('skip' in stock)('LoRA adapters of our worker behind the stock 1.6.1 frontend', () => {
  let stack: InteropStack;
  let frontend: Frontend;
  let admin: string;

  beforeAll(async () => {
    stack = await InteropStack.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, (stock as { python: string }).python);
    const port = await freePort();
    admin = `http://127.0.0.1:${port}`;
    stack.ourSample(MODEL, 'lora', ['--delay-ms', '0'], { DYN_SYSTEM_PORT: String(port), DYN_SYSTEM_HOST: '127.0.0.1', DYN_LORA_ENABLED: 'true' });
    frontend = await stack.stockFrontend();
    await waitForModel(frontend.url, MODEL, 'lora', 1, 120_000);
  }, 300_000);
  afterAll(async () => {
    await stack?.stop();
    rmSync(adapterDir, { recursive: true, force: true });
  });

  const listed = async () => ((await (await fetch(`${frontend.url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
  async function complete(model: string): Promise<{ status: number; text: string }> {
    const res = await post(frontend.url, '/v1/completions', { model, prompt: 'Tell me a story', max_tokens: 6 });
    const body = (await res.json()) as { choices?: Array<{ text: string }>; message?: string; error?: unknown };
    return { status: res.status, text: body.choices?.[0]?.text ?? JSON.stringify(body) };
  }

  it('load → the stock frontend lists it → serves it by name with its own output → unload → 404', async () => {
    const loaded = await fetch(`${admin}/v1/loras`, { method: 'POST', body: JSON.stringify({ lora_name: 'pirate', source: { uri: `file://${adapterDir}` } }) });
    expect(loaded.status).toBe(200);
    await waitFor('the stock frontend to list the adapter', async () => (await listed()).includes('pirate'), 60_000);

    const base = await complete(MODEL);
    const adapted = await complete('pirate');
    expect(base.status).toBe(200);
    expect(adapted.status, adapted.text).toBe(200);
    expect(adapted.text).not.toBe(base.text);

    const unloaded = await fetch(`${admin}/v1/loras/pirate`, { method: 'DELETE' });
    expect(unloaded.status).toBe(200);
    await waitFor('the stock frontend to drop the adapter', async () => !(await listed()).includes('pirate'), 60_000);
    expect((await complete('pirate')).status).toBe(404);
    expect((await complete(MODEL)).text).toBe(base.text);
  }, 180_000);
});
