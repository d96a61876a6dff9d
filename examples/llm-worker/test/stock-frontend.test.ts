// The seeds' worker in TypeScript, served by the REAL stock Dynamo 1.6.1 frontend
// (`python -m dynamo.frontend` from the test venv) on file discovery + tcp. Skipped (never
// passed) when the package registry cannot be reached to build the venv.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type Child, startChild } from '@dynamo/testing/child';
import { freePort } from '@dynamo/testing/free-port';
import { conversations } from '@dynamo/testing/chat-goldens';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { stockPython, stockRuntimeEnv } from '@dynamo/testing/stock-dynamo';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = join(root, '..', '..');

const children: Child[] = [];
const start = (command: string, args: string[], env: Record<string, string | undefined>): Child => {
  const child = startChild(command, args, env, root);
  children.push(child);
  return child;
};

const stock = stockPython();
const modelDir = qwen3ModelDir();
const kvDir = mkdtempSync(join(tmpdir(), 'llm-worker-stock-'));
// A GGUF model (made by scripts/goldens/make-gguf-fixtures.py): its card must name files stock reads.
const ggufModel = join(kvDir, 'qwen3-tiny.gguf');
copyFileSync(join(repo, 'crates/dynamo-llm-core/tests/fixtures/qwen3-tiny.gguf'), ggufModel);
const loopback = { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1', DYN_EVENT_PLANE_HOST: '127.0.0.1', DYN_SYSTEM_HOST: '127.0.0.1' };
const env = { ...process.env, ...loopback, DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: kvDir, DYN_REQUEST_PLANE: 'tcp', DYN_LOG: 'warn', HF_HUB_OFFLINE: '1' };

let base = '';
let named: Child;
let derived: Child;
let gguf: Child;
let pre: Preprocessor;

afterAll(async () => {
  for (const c of children) c.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  for (const c of children) c.kill();
  rmSync(kvDir, { recursive: true, force: true });
});

/** The next `REQUEST` line the worker printed after `seen` lines, parsed. */
async function nextRequest(worker: Child, seen: number): Promise<{ token_ids: number[] } & Record<string, unknown>> {
  const deadline = Date.now() + 20_000;
  while (!worker.lines.slice(seen).some((l) => l.startsWith('REQUEST '))) {
    if (Date.now() > deadline) throw new Error(`worker got no request:\n${worker.lines.join('\n')}\n${worker.stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return JSON.parse(
    worker.lines
      .slice(seen)
      .find((l) => l.startsWith('REQUEST '))!
      .slice('REQUEST '.length),
  );
}

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** What the example worker answers: the prompt's ordinary tokens, up to max_tokens, as text. */
function expectedText(tokenIds: number[], maxTokens: number): string {
  const ordinary = tokenIds.filter((id) => pre.tokenizer.idToToken(id) !== null && pre.tokenizer.decode(Uint32Array.of(id), true) !== '');
  return pre.tokenizer.decode(Uint32Array.from(ordinary.slice(0, maxTokens)), false);
}

// biome-ignore lint/suspicious/noExplicitAny: the assertions walk the chunks' JSON freely.
async function sse(res: Response): Promise<Array<Record<string, any>>> {
  const text = await res.text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
}

describe.skipIf('skip' in stock)('examples/llm-worker behind the stock Dynamo 1.6.1 frontend', () => {
  beforeAll(async () => {
    const python = (stock as { python: string }).python;
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const tsx = (model: string) => ['--import', 'tsx', join(root, 'src/worker.ts'), model, '--print-requests'];
    named = start(process.execPath, [...tsx(modelDir), '--model-name', 'qwen3', '--component', 'named'], env);
    derived = start(process.execPath, [...tsx(modelDir), '--component', 'derived'], env);
    gguf = start(process.execPath, [...tsx(ggufModel), '--component', 'gguf'], env);
    start(python, ['-m', 'dynamo.frontend', '--http-host', '127.0.0.1', '--http-port', String(port), '--discovery-backend', 'file', '--request-plane', 'tcp'], {
      ...env,
      ...stockRuntimeEnv,
    });
    await Promise.all([named.waitForLine(/^READY qwen3 /, 60_000), derived.waitForLine(/^READY /, 60_000), gguf.waitForLine(/^READY qwen3-tiny /, 60_000)]);
    const model = await LocalModel.load(modelDir);
    pre = await Preprocessor.create(
      model,
      buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions, modelName: 'qwen3' }),
    );
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ids: string[] = await fetch(`${base}/v1/models`)
        .then(async (r) => ((await r.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id))
        .catch(() => []);
      if (ids.includes('qwen3') && ids.includes(basename(modelDir)) && ids.includes('qwen3-tiny')) break;
      if (Date.now() > deadline) throw new Error(`the stock frontend never listed the three models (${ids.join(', ')})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 180_000);

  it('lists the model under the explicit and under the derived name, and the GGUF model', async () => {
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string; object: string }> };
    expect(models.data.map((m) => m.id).sort()).toEqual(['qwen3', basename(modelDir), 'qwen3-tiny'].sort());
  });

  it('serves a model registered from a GGUF file, preprocessing with its tokenizer and chat template as we do', async () => {
    const model = await LocalModel.load(ggufModel);
    const ggufPre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions }));
    const body = {
      model: 'qwen3-tiny',
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Hello world' },
      ],
      max_tokens: 4,
    };
    const seen = gguf.lines.length;
    const res = await post('/v1/chat/completions', body);
    expect(res.status, await res.clone().text()).toBe(200);
    const json = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }> };
    const received = await nextRequest(gguf, seen);
    const ours = await ggufPre.preprocessChat(body);
    expect(ours.prompt).toBe('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n');
    expect(received.token_ids).toEqual(ours.request.token_ids);
    expect(json.choices[0]!.finish_reason).toBe('length');
    expect(json.choices[0]!.message.content).toBe(
      ggufPre.tokenizer.decode(
        Uint32Array.from(received.token_ids.filter((id) => ggufPre.tokenizer.decode(Uint32Array.of(id), true) !== '').slice(0, 4)),
        false,
      ),
    );
  });

  it('answers a chat completion with the worker tokens as text, from the token ids our Preprocessor computes', async () => {
    const body = { model: 'qwen3', messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 5 };
    const seen = named.lines.length;
    const res = await post('/v1/chat/completions', body);
    expect(res.status).toBe(200);
    const json = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { completion_tokens: number } };
    const received = await nextRequest(named, seen);
    const ours = (await pre.preprocessChat(body)).request;
    expect(received.token_ids).toEqual(ours.token_ids);
    expect({ ...received, mdc_sum: null }).toEqual({ ...JSON.parse(JSON.stringify(ours)), mdc_sum: null });
    expect(json.choices[0]!.message.content).toBe(expectedText(received.token_ids, 5));
    expect(json.choices[0]!.finish_reason).toBe('length');
    expect(json.usage.completion_tokens).toBe(5);
  });

  it('streams a chat completion', async () => {
    const body = {
      model: basename(modelDir),
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Tell me about tokenizers' },
      ],
      max_tokens: 8,
      stream: true,
    };
    const seen = derived.lines.length;
    const chunks = await sse(await post('/v1/chat/completions', body));
    const received = await nextRequest(derived, seen);
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('')).toBe(expectedText(received.token_ids, 8));
    expect(chunks.some((c) => c.choices?.[0]?.finish_reason === 'length')).toBe(true);
  });

  it('answers completions, streaming and not, with text and token-id prompts', async () => {
    let seen = named.lines.length;
    const plain = (await (await post('/v1/completions', { model: 'qwen3', prompt: 'Once upon a time there was', max_tokens: 4 })).json()) as {
      choices: Array<{ text: string }>;
    };
    let received = await nextRequest(named, seen);
    expect(received.token_ids).toEqual((await pre.preprocessCompletion({ model: 'qwen3', prompt: 'Once upon a time there was' })).token_ids);
    expect(plain.choices[0]!.text).toBe(expectedText(received.token_ids, 4));

    seen = named.lines.length;
    const chunks = await sse(await post('/v1/completions', { model: 'qwen3', prompt: [9707, 1879, 374, 2244], max_tokens: 3, stream: true }));
    received = await nextRequest(named, seen);
    expect(received.token_ids).toEqual([9707, 1879, 374, 2244]);
    expect(chunks.map((c) => c.choices?.[0]?.text ?? '').join('')).toBe(expectedText(received.token_ids, 3));
  });

  it('sends the worker the token ids our Preprocessor computes for every golden conversation', async () => {
    // Stock 1.6.1 ignores chat_template_kwargs.add_generation_prompt (it always adds the
    // generation prompt); we honour it as transformers and vLLM do (WIRE-NOTES.md §6).
    const differs = new Set(['assistant_last_no_generation_prompt']);
    // A null content reaches the template as "" for us, as vLLM gives it; stock passes null, which
    // this template cannot render (docs/compatibility.md).
    const nullContent = conversations.find((c) => c.name === 'tool_call_content_null')!;
    expect((await post('/v1/chat/completions', { ...nullContent.body, model: 'qwen3', max_tokens: 1 })).status).toBeGreaterThanOrEqual(400);
    expect((await pre.preprocessChat(nullContent.body)).request.token_ids.length).toBeGreaterThan(0);
    differs.add(nullContent.name);
    let compared = 0;
    for (const { name, body } of conversations.filter((c) => !differs.has(c.name))) {
      const ours = await pre.preprocessChat(body).catch(() => undefined);
      const seen = named.lines.length;
      const res = await post('/v1/chat/completions', { ...body, model: 'qwen3', max_tokens: 1 });
      if (ours === undefined) {
        // The template refuses it for us; stock refuses it too.
        expect(res.status, name).toBeGreaterThanOrEqual(400);
        continue;
      }
      expect(res.status, `${name}: ${await res.clone().text()}`).toBe(200);
      await res.text();
      expect((await nextRequest(named, seen)).token_ids, name).toEqual(ours.request.token_ids);
      compared++;
    }
    expect(compared).toBeGreaterThanOrEqual(30);
  }, 120_000);
});
