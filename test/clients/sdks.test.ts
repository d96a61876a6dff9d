// The client libraries people build on, against our frontend with the sample engine and SmolLM2 on
// dynamo-llama-cpp behind it: the Vercel AI SDK (ai + @ai-sdk/openai-compatible), LangChain JS's
// ChatOpenAI and the Anthropic SDK (the frontend serves the Messages API with --enable-anthropic-api).
// The sample engine's rotating tokens are never JSON, so tool calls and objects are SmolLM2's.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { type ClientStack, ENGINES, type Engine, SAMPLE, SMOLLM2, startClientStack } from './stack.js';

let stack: ClientStack;
beforeAll(async () => {
  stack = await startClientStack({ frontendArgs: ['--enable-anthropic-api'], embeddings: false });
}, 300_000);
afterAll(() => stack?.stop());

const FRANCE = 'What is the capital of France?';
const SYSTEM = 'You are a helpful assistant.';
const system = (engine: Engine) => (engine === SMOLLM2 ? SYSTEM : undefined);
/** What each engine answers about France in 12 tokens at temperature 0. */
const expectFrance = (engine: Engine, text: string) => (engine === SAMPLE ? expect(text).toBe(stack.sampleText(12)) : expect(text).toContain('Paris'));

describe.each(ENGINES)('the Vercel AI SDK, $name', (engine: Engine) => {
  const model = () => createOpenAICompatible({ name: 'dynamo', baseURL: `${stack.url}/v1`, apiKey: 'unused', supportsStructuredOutputs: true })(engine.model);

  it('generateText and streamText give the same answer', async () => {
    const ask = { model: model(), system: system(engine), prompt: FRANCE, temperature: 0, maxOutputTokens: 12 };
    const whole = await generateText(ask);
    expectFrance(engine, whole.text);
    expect(whole.usage.outputTokens).toBeGreaterThan(0);
    let streamed = '';
    for await (const piece of streamText(ask).textStream) streamed += piece;
    expect(streamed).toBe(whole.text);
  });

  it.runIf(engine === SMOLLM2)('runs a tool call round trip: the model calls get_weather, then answers from its result', async () => {
    const calls: string[] = [];
    const result = await generateText({
      model: model(),
      system: SYSTEM,
      prompt: 'What is the weather in Paris?',
      temperature: 0,
      maxOutputTokens: 60,
      tools: {
        get_weather: tool({
          description: 'Get the weather of a city',
          inputSchema: z.object({ city: z.string().max(20) }),
          execute: async ({ city }) => {
            calls.push(city);
            return { temperature_c: 21, sky: 'sunny' };
          },
        }),
      },
      // The first step must call the tool; the second answers from its result.
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: { type: 'tool', toolName: 'get_weather' } } : { toolChoice: 'none' }),
      stopWhen: stepCountIs(2),
    });
    expect(calls).toEqual(['Paris']);
    expect(result.text.toLowerCase()).toContain('sunny');
  });

  it.runIf(engine === SMOLLM2)('generateObject returns an object that fits a zod schema', async () => {
    const schema = z.object({ city: z.string().max(30), country: z.string().max(30), population: z.number().int() });
    const { object } = await generateObject({
      model: model(),
      system: SYSTEM,
      prompt: 'Describe Paris as JSON.',
      schema,
      temperature: 0.7,
      maxOutputTokens: 80,
    });
    expect(schema.safeParse(object).success).toBe(true);
  });
});

describe.each(ENGINES)('LangChain ChatOpenAI, $name', (engine: Engine) => {
  const chat = () =>
    new ChatOpenAI({ model: engine.model, apiKey: 'unused', configuration: { baseURL: `${stack.url}/v1` }, temperature: 0, maxTokens: 12, maxRetries: 0 });
  const messages = (engine: Engine) => [...(engine === SMOLLM2 ? [{ role: 'system', content: SYSTEM }] : []), { role: 'user', content: FRANCE }];

  it('invoke and stream give the same answer', async () => {
    const whole = await chat().invoke(messages(engine));
    expectFrance(engine, whole.content as string);
    let streamed = '';
    for await (const chunk of await chat().stream(messages(engine))) streamed += chunk.content as string;
    expect(streamed).toBe(whole.content);
  });
});

describe.each(ENGINES)('the Anthropic SDK, $name', (engine: Engine) => {
  const client = () => new Anthropic({ baseURL: stack.url, apiKey: 'unused', maxRetries: 0 });
  const ask = (engine: Engine) => ({
    model: engine.model,
    max_tokens: 12,
    temperature: 0,
    messages: [{ role: 'user' as const, content: FRANCE }],
    ...(system(engine) && { system: SYSTEM }),
  });

  it('messages.create answers whole and streamed alike, with the stop reason', async () => {
    const whole = await client().messages.create(ask(engine));
    const text = whole.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    expectFrance(engine, text);
    expect(['end_turn', 'max_tokens']).toContain(whole.stop_reason);
    expect(whole.usage.output_tokens).toBeGreaterThan(0);
    const stream = client().messages.stream(ask(engine));
    let streamed = '';
    stream.on('text', (t) => (streamed += t));
    const final = await stream.finalMessage();
    expect(streamed).toBe(text);
    expect(final.stop_reason).toBe(whole.stop_reason);
    expect(final.usage.output_tokens).toBe(whole.usage.output_tokens);
  });

  it('stops at a stop sequence and names it', async () => {
    const whole = await client().messages.create({
      ...ask(engine),
      max_tokens: 40,
      stop_sequences: [engine === SAMPLE ? stack.sampleText(5).slice(-1) : 'Paris'],
    });
    expect(whole.stop_reason).toBe('stop_sequence');
    expect(whole.stop_sequence).toBe(engine === SAMPLE ? stack.sampleText(5).slice(-1) : 'Paris');
  });

  it('countTokens counts the prompt as the model sees it', async () => {
    const { input_tokens } = await client().messages.countTokens({
      model: engine.model,
      messages: ask(engine).messages,
      ...(system(engine) && { system: SYSTEM }),
    });
    const whole = await client().messages.create(ask(engine));
    // Anthropic's input_tokens leaves out what was read from the cache (dynamo-llama-cpp's prefix cache).
    expect(input_tokens).toBe(whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0));
  });

  it("names an unknown model in a NotFoundError of Anthropic's shape", async () => {
    const err = await client()
      .messages.create({ ...ask(engine), model: `${engine.model}-nope` })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect((err as APIError).message).toContain(`${engine.model}-nope`);
    expect((err as APIError).error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });

  it.runIf(engine === SMOLLM2)('runs a tool_use round trip: the model calls get_weather, then answers from its result', async () => {
    const tools: Anthropic.Tool[] = [
      {
        name: 'get_weather',
        description: 'Get the weather of a city',
        input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'], additionalProperties: false },
      },
    ];
    const question = { role: 'user' as const, content: 'What is the weather in Paris?' };
    // The frontend maps temperature as stock does; this SDK's types no longer list it.
    const greedy = { temperature: 0 };
    const first = await client().messages.create({
      model: engine.model,
      system: SYSTEM,
      max_tokens: 60,
      ...greedy,
      tools,
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [question],
    });
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(call).toMatchObject({ name: 'get_weather', input: { city: 'Paris' } });
    // Streamed, the call arrives as a tool_use block with its input.
    const streamed = await client()
      .messages.stream({
        model: engine.model,
        system: SYSTEM,
        max_tokens: 60,
        ...greedy,
        tools,
        tool_choice: { type: 'tool', name: 'get_weather' },
        messages: [question],
      })
      .finalMessage();
    expect(streamed.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'get_weather', input: { city: 'Paris' } });
    const second = await client().messages.create({
      model: engine.model,
      system: SYSTEM,
      max_tokens: 60,
      ...greedy,
      tools,
      messages: [
        question,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '{"temperature_c": 21, "sky": "sunny"}' }] },
      ],
    });
    expect(
      second.content
        .map((b) => (b.type === 'text' ? b.text : ''))
        .join('')
        .toLowerCase(),
    ).toContain('sunny');
  });
});
