// (scripts/test.sh's Node 22 repeat pass skips these: the client libraries are checked on the first.)
// The official OpenAI Node SDK against our frontend, with the sample engine and with SmolLM2 on
// dynamo-llama-cpp behind it: whole and streamed answers, the SDK's typed errors (with their
// messages, also for a stream that fails midway), n choices, log probabilities, batch prompts, echo.
import { Context, type GenerateChunk } from '@dynamo/backend';
import { LlamaCppEngine } from '@dynamo/llama-cpp';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { sampleEmbedding, sampleLogprobs } from '@dynamo/sample-engine';
import OpenAI, { type APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { modelDir, waitForModel } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { type ClientStack, ENGINES, type Engine, SAMPLE, SMOLLM2, startClientStack } from './stack.js';

let stack: ClientStack;
let client: OpenAI;
beforeAll(async () => {
  stack = await startClientStack();
  client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 300_000);
afterAll(() => stack?.stop());

const FRANCE = 'What is the capital of France?';

describe.each(ENGINES)('the OpenAI Node SDK, $name', (engine: Engine) => {
  const chat = (extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) => ({
    model: engine.model,
    messages: engine.messages(FRANCE),
    max_tokens: 12,
    temperature: 0,
    ...extra,
  });

  it('answers chat completions whole and streamed with the same text, finish reason and usage', async () => {
    const whole = await client.chat.completions.create(chat());
    const answer = whole.choices[0]!.message.content!;
    if (engine === SAMPLE) expect(answer).toBe(stack.sampleText(12));
    else expect(answer).toContain('Paris');
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
    expect(whole.usage!.total_tokens).toBe(whole.usage!.prompt_tokens + whole.usage!.completion_tokens);

    const stream = await client.chat.completions.create({ ...chat(), stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe(answer);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    const { prompt_tokens_details: cached, ...counts } = usage!;
    const { prompt_tokens_details: _, ...wholeCounts } = whole.usage!;
    expect(counts).toEqual(wholeCounts);
    // The repeat finds the prompt in dynamo-llama-cpp's prefix cache: all of it but the last token.
    if (engine === SAMPLE) expect(cached).toEqual(whole.usage!.prompt_tokens_details);
    else expect(cached?.cached_tokens).toBe(counts.prompt_tokens - 1);
  });

  it('answers completions whole and streamed with the same text', async () => {
    const body = { model: engine.model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 };
    const whole = await client.completions.create(body);
    expect(['stop', 'length']).toContain(whole.choices[0]!.finish_reason);
    let text = '';
    for await (const chunk of await client.completions.create({ ...body, stream: true })) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(whole.choices[0]!.text);
    if (engine === SAMPLE) expect(text).toBe(stack.sampleText(8));
  });

  it('raises NotFoundError naming an unknown model, and BadRequestError naming a bad field', async () => {
    const missing = await client.chat.completions.create({ ...chat(), model: `${engine.model}-nope` }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as APIError).message).toContain(`${engine.model}-nope`);
    const bad = await client.chat.completions.create({ ...chat(), temperature: 'hot' as unknown as number }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as APIError).message).toContain('temperature');
    expect((bad as APIError).param).toBe('temperature');
  });

  it('raises APIError with the message when the stream fails after it started (the worker dies, no migration left)', async () => {
    const victim = await stack.victim(engine, 'node-sdk');
    const stream = await client.chat.completions.create(victim.body as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    let text = '';
    const failure = await (async () => {
      for await (const chunk of stream) {
        if (text === '') victim.kill();
        text += chunk.choices[0]?.delta.content ?? '';
      }
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as APIError).message).toMatch(/Stream ended before generation completed|disconnected|ended|closed/i);
    expect(text.length).toBeGreaterThan(0);
  }, 180_000);

  it('gives n: 3 choices, whole and streamed, each with its own finish reason', async () => {
    const body = chat({ n: 3, temperature: 0.8, seed: 7, max_tokens: 8 });
    const whole = await client.chat.completions.create(body);
    expect(whole.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    for (const choice of whole.choices) {
      expect(choice.message.content!.length).toBeGreaterThan(0);
      expect(['stop', 'length']).toContain(choice.finish_reason);
    }
    const texts = ['', '', ''];
    const finishes: Array<string | null> = [null, null, null];
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content ?? '';
        finishes[c.index] = c.finish_reason ?? finishes[c.index]!;
      }
    }
    // The seed makes each choice's sampling repeatable.
    expect(texts).toEqual(whole.choices.map((c) => c.message.content));
    expect(finishes).toEqual(whole.choices.map((c) => c.finish_reason));
    if (engine === SAMPLE) expect(new Set(texts)).toEqual(new Set([stack.sampleText(8)]));
  });

  it('returns logprobs with 3 top alternatives per token, each at most 0, as the engine computed them', async () => {
    const whole = await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 3, max_tokens: 6 }));
    const content = whole.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(whole.usage!.completion_tokens);
    for (const entry of content) {
      expect(entry.top_logprobs).toHaveLength(3);
      for (const value of [entry.logprob, ...entry.top_logprobs.map((t) => t.logprob)]) expect(value).toBeLessThanOrEqual(0);
      expect(entry.bytes).toEqual(Array.from(Buffer.from(entry.token)));
    }
    const engineLogprobs = await engineFirstTokens(engine, 6);
    expect(content.map((e) => (e as unknown as { token_id: number }).token_id)).toEqual(engineLogprobs.ids);
    content.forEach((entry, i) => {
      expect(entry.logprob).toBeCloseTo(engineLogprobs.logprobs[i]!, 4);
      expect(entry.top_logprobs.map((t) => t.logprob)).toEqual(engineLogprobs.top[i]!.map((l) => expect.closeTo(l, 4)));
    });

    let streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of await client.chat.completions.create({ ...chat({ logprobs: true, top_logprobs: 3, max_tokens: 6 }), stream: true })) {
      streamed = streamed.concat(chunk.choices[0]?.logprobs?.content ?? []);
    }
    expect(streamed).toEqual(content);

    const completion = await client.completions.create({ model: engine.model, prompt: 'The capital of France is', max_tokens: 4, temperature: 0, logprobs: 3 });
    const lp = completion.choices[0]!.logprobs!;
    expect(lp.tokens).toHaveLength(4);
    expect(lp.token_logprobs!.every((v) => v <= 0)).toBe(true);
    expect(lp.top_logprobs!.every((top) => Object.keys(top).length >= 2 && Object.values(top).every((v) => v <= 0))).toBe(true);
    expect(lp.text_offset).toHaveLength(4);
    expect(lp.text_offset![0]).toBe(0);
  });

  it('answers a batch of prompts with one choice per prompt and n, in order', async () => {
    const batch = await client.completions.create({ model: engine.model, prompt: ['The sky is', 'Water is'], n: 2, max_tokens: 4, temperature: 0.7, seed: 3 });
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    const generated = batch.usage!.completion_tokens;
    if (engine === SAMPLE) expect(generated).toBe(16);
    else expect(generated).toBeGreaterThanOrEqual(4);
    const single = await client.completions.create({ model: engine.model, prompt: 'The sky is', max_tokens: 4, temperature: 0 });
    expect(batch.usage!.prompt_tokens).toBeGreaterThan(single.usage!.prompt_tokens);
  });

  it('echoes the prompt before the completion with echo: true', async () => {
    const prompt = 'The capital of France is';
    const plain = await client.completions.create({ model: engine.model, prompt, max_tokens: 4, temperature: 0 });
    const echoed = await client.completions.create({ model: engine.model, prompt, max_tokens: 4, temperature: 0, echo: true });
    expect(echoed.choices[0]!.text).toBe(prompt + plain.choices[0]!.text);
    let streamed = '';
    for await (const chunk of await client.completions.create({ model: engine.model, prompt, max_tokens: 4, temperature: 0, echo: true, stream: true }))
      streamed += chunk.choices[0]?.text ?? '';
    expect(streamed).toBe(echoed.choices[0]!.text);
  });
});

/**
 * What the engine itself gives for the France chat at temperature 0 with 3 alternatives per
 * token: the sample engine's made-up values, or SmolLM2's run in this process by LlamaCppEngine
 * on the same prompt ids our frontend computes.
 */
async function engineFirstTokens(engine: Engine, count: number): Promise<{ ids: number[]; logprobs: number[]; top: number[][] }> {
  if (engine === SAMPLE) {
    const ids = Array.from({ length: count }, (_, i) => i + 1);
    const each = ids.map((id) => sampleLogprobs(id, 3));
    return { ids, logprobs: each.map((e) => e.log_probs![0]!), top: each.map((e) => e.top_logprobs![0]!.map((t) => t.logprob as number)) };
  }
  const model = await LocalModel.load(stack.modelPath);
  const pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
  const { request } = await pre.preprocessChat({
    model: SMOLLM2.model,
    messages: SMOLLM2.messages(FRANCE),
    logprobs: true,
    top_logprobs: 3,
    max_tokens: count,
    temperature: 0,
  });
  const local = new LlamaCppEngine({ modelPath: stack.modelPath, parallel: 1, contextSize: 1024 });
  await local.start(1n);
  try {
    const chunks: GenerateChunk[] = [];
    for await (const chunk of local.generate(request, new Context())) chunks.push(chunk);
    const top = chunks.flatMap((c) => (c.top_logprobs ?? []) as Array<Array<{ logprob: number }>>);
    return { ids: chunks.flatMap((c) => c.token_ids), logprobs: chunks.flatMap((c) => c.log_probs ?? []), top: top.map((t) => t.map((a) => a.logprob)) };
  } finally {
    await local.cleanup();
  }
}

const stock = stockPython();
describe.skipIf('skip' in stock)(`n choices and embeddings behind either frontend${'skip' in stock ? ` (skipped: ${stock.skip})` : ''}`, () => {
  let stockUrl = '';
  let stockWorkerModel = '';
  beforeAll(async () => {
    const python = (stock as { python: string }).python;
    stockUrl = (await stack.deployment.stockFrontend(python)).url;
    // Stock's sample engine serves the model under its folder's path, and ignores n.
    stockWorkerModel = modelDir;
    stack.deployment.stockProcess(python, [
      '-m',
      'dynamo.common.backend.sample_main',
      '--model-name',
      modelDir,
      '--component',
      'stocksample',
      '--discovery-backend',
      'file',
      '--request-plane',
      'tcp',
      '--delay',
      '0',
    ]);
    await waitForModel(stack.url, stockWorkerModel, 'stocksample', 1, 120_000);
    await waitFor(
      'the stock frontend to list our models',
      async () => {
        const models = (await (await fetch(`${stockUrl}/v1/models`, { signal: AbortSignal.timeout(5000) })).json()) as { data: Array<{ id: string }> };
        return ENGINES.flatMap((e) => [e.model, e.embedModel]).every((m) => models.data.some((d) => d.id === m));
      },
      150_000,
    );
  }, 300_000);

  it.each(ENGINES)('the stock frontend gets n: 3 choices from our $name (our worker makes them)', async (engine) => {
    const stockClient = new OpenAI({ baseURL: `${stockUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
    const body = { model: engine.model, messages: engine.messages(FRANCE), n: 3, temperature: 0.8, seed: 7, max_tokens: 8 };
    const viaStock = await stockClient.chat.completions.create(body);
    expect(viaStock.choices.map((c) => c.index).sort()).toEqual([0, 1, 2]);
    // The same seeds through either frontend: the same three answers.
    const viaOurs = await client.chat.completions.create(body);
    const byIndex = (r: OpenAI.ChatCompletion) => [...r.choices].sort((a, b) => a.index - b.index).map((c) => c.message.content);
    expect(byIndex(viaStock)).toEqual(byIndex(viaOurs));
  });

  it.each(ENGINES)("the stock frontend gets our $name embedding worker's vectors, the same as ours gives", async (engine) => {
    const stockClient = new OpenAI({ baseURL: `${stockUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
    const body = { model: engine.embedModel, input: ['The cat sat on the mat.', 'Hello'] };
    const [viaStock, viaOurs] = await Promise.all([stockClient.embeddings.create(body), client.embeddings.create(body)]);
    expect(viaStock.data.map((d) => d.embedding)).toEqual(viaOurs.data.map((d) => d.embedding));
    expect(viaStock.usage).toEqual(viaOurs.usage);
  });

  it("our frontend gets n: 3 choices from stock's sample engine, which makes one (one request per choice)", async () => {
    const whole = await client.chat.completions.create({ model: stockWorkerModel, messages: SAMPLE.messages(FRANCE), n: 3, temperature: 0.8, max_tokens: 5 });
    expect(whole.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    for (const choice of whole.choices) expect(choice.message.content).toBe(stack.sampleText(5));
    expect(whole.usage!.completion_tokens).toBe(15);
  });
});

describe.each(ENGINES)('embeddings through the OpenAI Node SDK, $name', (engine: Engine) => {
  const inputs = ['The cat sat on the mat.', 'A cat was sitting on a mat.', 'Quarterly revenue rose by four percent.'];

  it('embeds a batch of strings, as floats and as base64 decoding to the same vectors', async () => {
    // The SDK asks for base64 unless told otherwise, and decodes it.
    const viaBase64 = await client.embeddings.create({ model: engine.embedModel, input: inputs });
    const viaFloat = await client.embeddings.create({ model: engine.embedModel, input: inputs, encoding_format: 'float' });
    expect(viaBase64.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(viaFloat.data.map((d) => d.embedding.map(Math.fround))).toEqual(viaBase64.data.map((d) => d.embedding));
    expect(viaFloat.usage.prompt_tokens).toBeGreaterThan(0);
    const [cat, cat2, revenue] = viaBase64.data.map((d) => d.embedding);
    if (engine === SAMPLE) {
      expect(cat).toEqual(Array.from(sampleEmbedding(stack.sampleTokens(inputs[0]!))));
      expect(viaFloat.usage.prompt_tokens).toBe(inputs.reduce((sum, text) => sum + stack.sampleTokens(text).length, 0));
    } else {
      // SmolLM2's hidden size; two sentences about a cat are closer to each other than to revenue.
      expect(cat).toHaveLength(576);
      expect(cosine(cat!, cat2!)).toBeGreaterThan(cosine(cat!, revenue!));
    }
  });

  it('embeds token ids, cuts vectors to dimensions, and names a bad input', async () => {
    const ids = await client.embeddings.create({
      model: engine.embedModel,
      input: [
        [1, 2, 3],
        [4, 5],
      ],
    });
    expect(ids.data).toHaveLength(2);
    expect(ids.usage.prompt_tokens).toBe(5);
    if (engine === SAMPLE) expect(ids.data[0]!.embedding).toEqual(Array.from(sampleEmbedding([1, 2, 3])));
    const short = await client.embeddings.create({ model: engine.embedModel, input: 'hello', dimensions: 8 });
    expect(short.data[0]!.embedding).toHaveLength(8);
    const bad = await client.embeddings.create({ model: engine.embedModel, input: [] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as APIError).message).toContain('request.input');
  });
});

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot / (Math.hypot(...a) * Math.hypot(...b));
}

describe.each(ENGINES)('the Responses API through the OpenAI Node SDK, $name', (engine: Engine) => {
  const instructions = engine === SMOLLM2 ? 'You are a helpful assistant.' : undefined;
  const body = { model: engine.model, input: FRANCE, temperature: 0, max_output_tokens: 12, ...(instructions && { instructions }) };

  it('answers whole and streamed with the same text, with typed events', async () => {
    const whole = await client.responses.create(body);
    expect(whole.status === 'completed' || whole.status === 'incomplete').toBe(true);
    if (engine === SAMPLE) expect(whole.output_text).toBe(stack.sampleText(12));
    else expect(whole.output_text).toContain('Paris');
    expect(whole.usage!.output_tokens).toBeGreaterThan(0);
    const types: string[] = [];
    let text = '';
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of await client.responses.create({ ...body, stream: true })) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
    }
    expect(text).toBe(whole.output_text);
    expect(
      final!.output_text ?? final!.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join(''),
    ).toBe(whole.output_text);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      final!.status === 'completed' ? 'response.completed' : 'response.incomplete',
    ]);
  });

  it.runIf(engine === SMOLLM2)('makes a function call and answers from its output (a round trip; the sample engine makes no calls)', async () => {
    const tools: OpenAI.Responses.FunctionTool[] = [
      {
        type: 'function',
        name: 'get_weather',
        description: 'Get the weather of a city',
        strict: true,
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'], additionalProperties: false },
      },
    ];
    const ask = { model: engine.model, instructions: 'You are a helpful assistant.', temperature: 0, max_output_tokens: 60, tools };
    const first = await client.responses.create({ ...ask, input: 'What is the weather in Paris?', tool_choice: { type: 'function', name: 'get_weather' } });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call.name).toBe('get_weather');
    expect(JSON.parse(call.arguments)).toEqual({ city: 'Paris' });
    // Streamed, the call comes as its item and its arguments.
    let args = '';
    for await (const event of await client.responses.create({
      ...ask,
      input: 'What is the weather in Paris?',
      tool_choice: { type: 'function', name: 'get_weather' },
      stream: true,
    })) {
      if (event.type === 'response.function_call_arguments.done') args = event.arguments;
    }
    expect(JSON.parse(args)).toEqual({ city: 'Paris' });
    const second = await client.responses.create({
      ...ask,
      input: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 21, "sky": "sunny"}' },
      ],
    });
    expect(second.output_text.toLowerCase()).toContain('sunny');
  });

  it('refuses previous_response_id with 501, as a stateless frontend', async () => {
    const err = await client.responses.create({ ...body, previous_response_id: 'resp_1' }).catch((e: unknown) => e);
    expect((err as APIError).status).toBe(501);
    expect((err as APIError).message).toContain('previous_response_id');
  });
});
