// Tool calls, reasoning and structured outputs through dynamo-frontend, with the replaying test
// engine (its cases are Qwen3 model output in each parser's format): what the official openai
// client reads from a stream, how bad structured-output fields are refused, and parsers that a
// card names but this frontend does not have.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { REPLAY_CASES } from '@dynamo/testing/replay-cases';
import { Deployment, post, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';

const seed = (name: string): number => {
  const index = REPLAY_CASES.findIndex((c) => c.name === name);
  if (index < 0) throw new Error(`no replay case ${name}`);
  return index;
};

const TOOLS: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
];
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];

describe('tool calls, reasoning and structured outputs through dynamo-frontend', () => {
  let deployment: Deployment;
  let url = '';
  let frontend: Child;
  let client: OpenAI;
  const replay = (model: string, args: string[]) => deployment.replayWorker(model, args);

  beforeAll(async () => {
    deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' });
    replay('qwen3-tools', ['--dyn-tool-call-parser', 'hermes', '--dyn-reasoning-parser', 'qwen3']);
    replay('odd-parser', ['--dyn-tool-call-parser', 'nope']);
    replay('no-parser', []);
    ({ url, child: frontend } = await deployment.frontend());
    for (const model of ['qwen3-tools', 'odd-parser', 'no-parser']) await waitForModel(url, model, model, 1, 60_000);
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(() => deployment.stop());

  it('the openai client assembles streamed tool calls', async () => {
    const stream = client.chat.completions.stream({ model: 'qwen3-tools', messages, tools: TOOLS, seed: seed('hermes: text then two calls') });
    const completion = await stream.finalChatCompletion();
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Let me check.\n\n');
    const calls = (choice.message.tool_calls ?? []) as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ['get_weather', { city: 'Paris', unit: 'celsius' }],
      ['get_time', { zone: 'CET' }],
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    for (const call of calls) expect(call.id).toMatch(/^call-[0-9a-f-]{36}$/);
  });

  it('the openai client reads reasoning_content and content from a stream, and a whole response', async () => {
    const stream = await client.chat.completions.create({ model: 'qwen3-tools', messages, seed: seed('think block then answer'), stream: true });
    let reasoning = '';
    let content = '';
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
      reasoning += delta?.reasoning_content ?? '';
      content += delta?.content ?? '';
    }
    expect(reasoning).toBe('\nThe user asks for 2+2. That is 4.\n');
    expect(content).toBe('\n\nThe answer is 4.');

    const whole = await client.chat.completions.create({ model: 'qwen3-tools', messages, tools: TOOLS, seed: seed('hermes: think then a call') });
    const message = whole.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.reasoning_content).toBe('\nI need the weather tool.\n');
    expect((message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall).function).toEqual({
      name: 'get_weather',
      arguments: '{"city": "Paris", "unit": "celsius"}',
    });
    expect(whole.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('tool calls are parsed only when the request offers tools, and not with tool_choice none', async () => {
    const text = REPLAY_CASES[seed('hermes: one call')]!.text;
    for (const extra of [{}, { tools: TOOLS, tool_choice: 'none' as const }]) {
      const whole = await client.chat.completions.create({ model: 'qwen3-tools', messages, seed: seed('hermes: one call'), ...extra });
      expect(whole.choices[0]!.message.content).toBe(text);
      expect(whole.choices[0]!.message.tool_calls).toBeUndefined();
      expect(whole.choices[0]!.finish_reason).toBe('stop');
    }
  });

  it('malformed tool-call text comes back as content, whole and streamed', async () => {
    const { text } = REPLAY_CASES[seed('hermes: malformed JSON')]!;
    const whole = await client.chat.completions.create({ model: 'qwen3-tools', messages, tools: TOOLS, seed: seed('hermes: malformed JSON') });
    expect(whole.choices[0]!.message.content).toBe(text);
    expect(whole.choices[0]!.finish_reason).toBe('stop');
    const stream = client.chat.completions.stream({ model: 'qwen3-tools', messages, tools: TOOLS, seed: seed('hermes: malformed JSON') });
    expect((await stream.finalChatCompletion()).choices[0]!.message.content).toBe(text);
  });

  it.each([
    [{ response_format: { type: 'json_schema' } }, /request\.response_format\.json_schema/],
    [{ response_format: { type: 'json_schema', json_schema: { schema: {} } } }, /request\.response_format\.json_schema\.name/],
    [
      { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 'text' } } },
      /request\.response_format\.json_schema\.schema: must be a JSON object/,
    ],
    [{ response_format: { type: 'bogus' } }, /request\.response_format/],
    [{ response_format: 'json' }, /request\.response_format/],
    [{ guided_choice: 'yes' }, /request\.guided_choice/],
    [{ guided_json: { type: 'object' }, guided_regex: 'a' }, /Only one guided-decoding constraint can be set; received: json, regex/],
    [{ tools: TOOLS, tool_choice: 'bogus' }, /request\.tool_choice/],
    [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, /request\.tool_choice\.function\.name: no tool named "nope"/],
  ])('a bad structured-output request %j is a 400 naming the field', async (extra, message) => {
    const res = await post(url, '/v1/chat/completions', { model: 'no-parser', messages, ...extra });
    const body = (await res.json()) as { message: string };
    expect(res.status, body.message).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('the engine gets response_format as guided_decoding, and the frontend stays up after bad requests', async () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' } } };
    const worker = deployment.children.find((c) => c.child.spawnargs.includes('no-parser'))!;
    const seen = worker.lines.length;
    const res = await post(url, '/v1/chat/completions', {
      model: 'no-parser',
      messages,
      response_format: { type: 'json_schema', json_schema: { name: 'a', schema } },
    });
    expect(res.status).toBe(200);
    const line = await waitFor('the engine to print the request', () => worker.lines.slice(seen).find((l) => l.startsWith('REQUEST ')));
    expect(JSON.parse(line.slice('REQUEST '.length)).sampling_options.guided_decoding).toEqual({ json: schema });
  });

  it('a parser the frontend does not have is named in a warning, and the model is served unparsed', async () => {
    await waitFor('the warning', () => [...frontend.lines, frontend.stderr()].some((l) => /unknown tool_call_parser ."nope."/.test(l)));
    const whole = await client.chat.completions.create({ model: 'odd-parser', messages, tools: TOOLS, seed: seed('hermes: one call') });
    expect(whole.choices[0]!.message.content).toBe(REPLAY_CASES[seed('hermes: one call')]!.text);
  });

  it('--dyn-reasoning-parser applies to models whose cards name none; --reasoning-field-name renames the field', async () => {
    const other = await deployment.frontend(['--dyn-reasoning-parser', 'qwen3', '--reasoning-field-name', 'reasoning']);
    await waitForModel(other.url, 'no-parser', 'no-parser', 1);
    const body = { model: 'no-parser', messages, seed: seed('think block then answer') };
    const res = await post(other.url, '/v1/chat/completions', body);
    const whole = (await res.json()) as { choices: Array<{ message: Record<string, unknown> }>; usage: Record<string, unknown> };
    expect(whole.choices[0]!.message).toEqual({ role: 'assistant', content: '\n\nThe answer is 4.', reasoning: '\nThe user asks for 2+2. That is 4.\n' });
    expect(whole.usage.completion_tokens_details).toEqual({ reasoning_tokens: 16 });
    const events = await sseEvents(await post(other.url, '/v1/chat/completions', { ...body, stream: true }));
    const deltas = (events.slice(0, -1) as Array<{ choices: Array<{ delta: Record<string, string> }> }>).map((e) => e.choices[0]!.delta);
    expect(deltas.map((d) => d.reasoning ?? '').join('')).toBe('\nThe user asks for 2+2. That is 4.\n');
    expect(deltas.some((d) => 'reasoning_content' in d)).toBe(false);
  });
});
