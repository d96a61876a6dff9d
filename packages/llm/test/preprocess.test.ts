import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgument } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { ModelDeploymentCardSchema, mdcsum } from '../src/internal.js';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

const here = dirname(fileURLToPath(import.meta.url));
const stockDir = join(here, '../../../test/interop/fixtures/llm-1.6.1');
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** What the stock 1.6.1 frontend sent a worker for each request (test/interop/capture-llm.sh). */
const stockRequests = readJson(join(stockDir, 'preprocessed-requests.json')) as Array<{
  name: string;
  path: string;
  request: Record<string, unknown>;
  received: Record<string, unknown>;
}>;
/** What the stock 1.6.1 frontend answered to bad (and borderline) requests. */
const stockErrors = readJson(join(stockDir, 'errors.json')) as Array<{
  name: string;
  path: string;
  status: number;
  request?: unknown;
  body?: unknown;
  response?: { message?: string };
}>;
/** The cards the stock workers registered (default and small context). */
const stockCards = Object.values(readJson(join(stockDir, 'mdc-records.llm-workers.json')) as Record<string, string>).map((r) => JSON.parse(r).card_json);

let dir: string;
let pre: Preprocessor;
let small: Preprocessor;

beforeAll(async () => {
  dir = qwen3ModelDir();
  const model = await LocalModel.load(dir);
  pre = await Preprocessor.create(
    model,
    buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions, modelName: 'qwen3' }),
  );
  small = await Preprocessor.create(
    model,
    buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat, modelName: 'qwen3', contextLength: 32 }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function preprocess(p: Preprocessor, path: string, body: unknown) {
  return path.endsWith('/chat/completions') ? [(await p.preprocessChat(body)).request] : p.preprocessCompletions(body);
}

describe('Preprocessor against the stock Dynamo 1.6.1 frontend', () => {
  it.each(stockRequests.map((c) => [c.name, c] as const))('sends what stock sends for %s', async (name, c) => {
    const p = name.startsWith('small-ctx') ? small : pre;
    const [ours] = await preprocess(p, c.path, c.request);
    // mdc_sum covers the model's path, which differs between machines; it is pinned below.
    expect({ ...ours, mdc_sum: 'x' }).toStrictEqual({ ...c.received, mdc_sum: 'x' });
    expect(Object.keys(ours!)).toEqual(Object.keys(c.received));
  });

  it('computes the mdc_sum stock computes for the same card', () => {
    const ours = stockCards.map((card) => mdcsum(ModelDeploymentCardSchema.parse(card)));
    for (const sum of new Set(stockRequests.map((c) => c.received.mdc_sum))) expect(ours).toContain(sum);
  });

  const refused = stockErrors.filter((c) => c.status === 400 && c.request !== undefined && typeof c.request === 'object' && !Array.isArray(c.request));
  // Unknown root fields are refused by stock from its own list of accepted fields (not ours to guess).
  const notOurs = new Set(['unknown-root-field']);
  it.each(refused.filter((c) => !notOurs.has(c.name)).map((c) => [c.name, c] as const))('refuses %s like stock', async (_name, c) => {
    const err = await preprocess(pre, c.path, c.request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    const stock = c.response?.message ?? '';
    if (stock.startsWith('Validation: ')) expect((err as Error).message).toBe(stock);
  });

  const accepted = stockErrors.filter((c) => c.status === 200 && c.request !== undefined);
  it.each(accepted.map((c) => [c.name, c] as const))('accepts %s like stock', async (name, c) => {
    const requests = await preprocess(name.startsWith('prompt-') ? small : pre, c.path, c.request);
    expect(requests.length).toBeGreaterThan(0);
  });
});

/** A body Qwen3's template cannot render: with tools, it adds a string to the system message's content, here a list of parts. */
const templateError = {
  model: 'qwen3',
  messages: [
    { role: 'system', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] },
    { role: 'user', content: 'x' },
  ],
  tools: [{ type: 'function', function: { name: 'f' } }],
};

describe('Preprocessor', () => {
  it('renders the chat template and tokenizes the prompt', async () => {
    const { request, prompt } = await pre.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: 'Hello there' }] });
    expect(prompt).toBe('<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n');
    expect(request.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync(prompt, false)));
    expect(request.mdc_sum).toBe(mdcsum(pre.card));
  });

  it('renders an assistant turn of only tool calls alike with content null, "" or no content key', async () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'ls', arguments: '{}' } };
    const turn = (assistant: Record<string, unknown>) =>
      pre.preprocessChat({
        model: 'qwen3',
        messages: [
          { role: 'user', content: 'list' },
          { role: 'assistant', tool_calls: [call], ...assistant },
          { role: 'tool', tool_call_id: 'call_1', content: 'a.txt' },
        ],
      });
    const empty = await turn({ content: '' });
    expect(empty.prompt).toContain('<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>');
    expect((await turn({ content: null })).prompt).toBe(empty.prompt);
    expect((await turn({})).prompt).toBe(empty.prompt);
  });

  it('preprocesses a chat body the same on the calling thread as off it, NULs and u64 fields included', async () => {
    const body = {
      model: 'qwen3',
      messages: [{ role: 'user', content: 'Hi\0 there', name: 2n ** 63n }],
      max_tokens: 7,
      nvext: { backend_instance_id: 2n ** 63n + 5n },
    };
    const off = await pre.preprocessChat(body);
    const on = await pre.preprocessChat(body, { onCallingThread: true });
    expect(on).toEqual(off);
    expect(off.request.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync(off.prompt.replaceAll('\0', ''), false)));
    await expect(pre.preprocessChat(templateError, { onCallingThread: true })).rejects.toThrow(/^request: /);
  });

  it('encodes a prompt on either thread with the same result', async () => {
    for (const prompt of ['Hi\0 there', 'The quick brown fox jumps over the lazy dog. '.repeat(400)]) {
      const off = await pre.preprocessCompletion({ model: 'qwen3', prompt });
      const on = await pre.preprocessCompletion({ model: 'qwen3', prompt }, { onCallingThread: true });
      expect(on).toEqual(off);
      expect(off.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync(prompt.replaceAll('\0', ''), false)));
    }
  });

  const longText = 'The quick brown fox jumps over the lazy dog. '.repeat(60_000);
  it.each([
    ['a completion prompt', () => pre.preprocessCompletion({ model: 'qwen3', prompt: longText }, { onCallingThread: true })],
    ['a chat', () => pre.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: longText }] }, { onCallingThread: true })],
  ])('keeps the JS thread free while %s this long is encoded, even when the calling thread is allowed', async (_what, run) => {
    // The longest stall between timer ticks: an encode on the event loop would stall it for the
    // whole encode. Durations are not asserted, so a fast or busy machine passes alike.
    let last = performance.now();
    let longestStall = 0;
    let ticks = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      longestStall = Math.max(longestStall, now - last);
      last = now;
      ticks++;
    }, 1);
    const started = performance.now();
    await run();
    const elapsed = performance.now() - started;
    clearInterval(timer);
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(longestStall).toBeLessThan(elapsed / 2);
  });

  it('strips NUL characters before tokenizing', async () => {
    const out = await pre.preprocessCompletion({ model: 'qwen3', prompt: 'a\0b' });
    expect(out.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync('ab', false)));
  });

  it('names the field of a mistyped body and a template error', async () => {
    await expect(pre.preprocessChat({ model: 'qwen3', messages: 'hi' })).rejects.toThrow('request.messages');
    await expect(pre.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: 'x' }], chat_template_kwargs: 'yes' })).rejects.toThrow(
      'request.chat_template_kwargs',
    );
    await expect(pre.preprocessCompletion({ model: 'qwen3', prompt: ['a', 'b'] })).rejects.toThrow('holds 2 prompts; use preprocessCompletions');
    await expect(pre.preprocessChat(templateError)).rejects.toThrow(/^request: /);
  });
});
