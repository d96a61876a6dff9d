// The request shapes coding agents send, through a real dynamo-frontend to a worker that prints
// what it received (the replay engine, hermes tool calls): Claude Code's `system` turns inside
// `messages` and its billing-header line, an assistant turn of only tool calls, its HEAD / probe;
// Codex's namespace and hosted tools; a chat assistant message with no `content` key. The
// prompts are checked as the Qwen3 template renders them. The real agents run in
// test/clients/agents.test.ts.
import { type Tokenizer, LocalModel } from '@dynamo/llm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { REPLAY_CASES } from '@dynamo/testing/replay-cases';
import { Deployment, modelDir, post, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'tools';
const BILLING = 'x-anthropic-billing-header: cc_version=2.1.197.a1b; cc_entrypoint=sdk-cli; cch=00000;';
const seed = (name: string): number => REPLAY_CASES.findIndex((c) => c.name === name);

let deployment: Deployment;
let tokenizer: Tokenizer;
let worker: Child;
/** The frontend with stock's defaults, and one with --no-strip-anthropic-preamble. */
let url = '';
let keepsPreamble = '';

/** Sends `body` to `path` and returns the prompt the worker got, as text. */
async function prompt(path: string, body: Record<string, unknown>, base = url): Promise<string> {
  const seen = worker.lines.length;
  const res = await post(base, path, { model: MODEL, ...body });
  expect(res.status, await res.clone().text()).toBe(200);
  await res.text();
  const line = await waitFor('the engine to print the request', () => worker.lines.slice(seen).find((l) => l.startsWith('REQUEST ')));
  return tokenizer.decode(Uint32Array.from((JSON.parse(line.slice('REQUEST '.length)) as { token_ids: number[] }).token_ids), false);
}

beforeAll(async () => {
  tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
  deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' });
  worker = deployment.replayWorker(MODEL, ['--dyn-tool-call-parser', 'hermes']);
  deployment.sampleWorker(['--model-name', 'cached', '--component', 'cached', '--simulate-kv-cache', '--delay-ms', '0', '--context-length', '40960']);
  [{ url }, { url: keepsPreamble }] = await Promise.all([
    deployment.frontend(['--enable-anthropic-api']),
    deployment.frontend(['--enable-anthropic-api', '--no-strip-anthropic-preamble']),
  ]);
  for (const base of [url, keepsPreamble]) await waitForModel(base, MODEL, MODEL, 1, 60_000);
  await waitForModel(url, 'cached', 'cached', 1, 60_000);
}, 120_000);
afterAll(() => deployment.stop());

describe('Claude Code over the Anthropic Messages API', () => {
  it('renders a system turn inside messages in place, its text blocks joined with a newline', async () => {
    const text = await prompt('/v1/messages', {
      max_tokens: 16,
      system: 'You are an agent.',
      messages: [
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'ok' },
        {
          role: 'system',
          content: [
            { type: 'text', text: 'Agents: explore, plan.' },
            { type: 'text', text: 'Skills: none.', cache_control: { type: 'ephemeral' } },
          ],
        },
        { role: 'user', content: [{ type: 'text', text: 'second' }] },
      ],
    });
    expect(text).toBe(
      '<|im_start|>system\nYou are an agent.<|im_end|>\n<|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n' +
        '<|im_start|>system\nAgents: explore, plan.\nSkills: none.<|im_end|>\n<|im_start|>user\nsecond<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('drops the billing-header line from the system prompt by default, and keeps it with --no-strip-anthropic-preamble', async () => {
    const body = {
      max_tokens: 16,
      system: [
        { type: 'text', text: BILLING },
        { type: 'text', text: 'You are Claude Code.' },
      ],
      messages: [{ role: 'user', content: 'hi' }],
    };
    expect(await prompt('/v1/messages', body)).toBe(
      '<|im_start|>system\nYou are Claude Code.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(await prompt('/v1/messages', body, keepsPreamble)).toBe(
      `<|im_start|>system\n${BILLING}\nYou are Claude Code.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n`,
    );
    // A system prompt that is only the header line has no newline after it: kept, as in stock.
    expect(await prompt('/v1/messages', { ...body, system: BILLING })).toContain(BILLING);
    const count = async (base: string) =>
      (
        (await (await post(base, '/v1/messages/count_tokens', { model: MODEL, system: body.system, messages: body.messages })).json()) as {
          input_tokens: number;
        }
      ).input_tokens;
    expect(await count(keepsPreamble)).toBeGreaterThan((await count(url)) + 20);
  });

  it('renders an assistant turn of only tool_use and thinking blocks, and its tool result', async () => {
    const text = await prompt('/v1/messages', {
      max_tokens: 16,
      tools: [
        { name: 'Bash', input_schema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { command: { type: 'string' } } } },
      ],
      thinking: { type: 'adaptive' },
      output_config: { effort: 'high' },
      context_management: { edits: [] },
      metadata: { user_id: 'u' },
      messages: [
        { role: 'user', content: 'list files' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'I should run ls.', signature: 's' },
            { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } },
          ],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'a.txt' }], cache_control: { type: 'ephemeral' } }],
        },
      ],
    });
    expect(text).toContain(
      '<|im_start|>assistant\n<think>\nI should run ls.\n</think>\n\n<tool_call>\n{"name": "Bash", "arguments": {"command":"ls"}}\n</tool_call><|im_end|>\n',
    );
    expect(text).toContain('<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
  });

  it("reports the engine's cached prompt tokens as cache_read_input_tokens, whole and streamed", async () => {
    const body = { model: 'cached', max_tokens: 4, system: 'You are a careful agent. '.repeat(20), messages: [{ role: 'user', content: 'hi' }] };
    type Usage = { input_tokens: number; cache_read_input_tokens?: number };
    const first = ((await (await post(url, '/v1/messages', body)).json()) as { usage: Usage }).usage;
    expect(first.cache_read_input_tokens).toBeUndefined();
    const again = ((await (await post(url, '/v1/messages', body)).json()) as { usage: Usage }).usage;
    // The simulated cache holds whole 16-token blocks of the prompt it saw.
    expect(again.cache_read_input_tokens).toBeGreaterThanOrEqual(first.input_tokens - 16);
    expect(again.input_tokens + again.cache_read_input_tokens!).toBe(first.input_tokens);
    const delta = (await (await post(url, '/v1/messages', { ...body, stream: true })).text()).split('\n\n').find((e) => e.startsWith('event: message_delta'))!;
    expect((JSON.parse(delta.slice(delta.indexOf('\ndata: ') + 7)) as { usage: Usage }).usage).toEqual(again);
  });

  it('answers the HEAD / probe with 200', async () => {
    expect((await fetch(`${url}/`, { method: 'HEAD' })).status).toBe(200);
  });

  it('refuses a tool of a type it cannot run with a 400 in Anthropic shape naming the tool', async () => {
    const res = await post(url, '/v1/messages', {
      model: MODEL,
      max_tokens: 16,
      tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/^request\.tools\.0\.type: /) },
    });
  });
});

describe('Codex over the Responses API', () => {
  const tools = [
    { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } },
    { type: 'function', name: 'wait_agent', parameters: { type: 'object', properties: {} } },
    {
      type: 'namespace',
      name: 'multi_agent_v1',
      description: 'agents',
      tools: [
        { type: 'function', name: 'spawn_agent', parameters: { type: 'object', properties: {} } },
        { type: 'function', name: 'wait_agent', parameters: { type: 'object', properties: {} } },
      ],
    },
    { type: 'web_search', external_web_access: true },
    { type: 'image_generation' },
  ];

  it('flattens namespace tools (aliasing a name two tools share) and leaves hosted tools out, naming them in a header', async () => {
    const text = await prompt('/v1/responses', { input: 'hi', tools });
    const offered = [...text.matchAll(/^\{"type": "function", "function": \{"name": "([^"]+)"/gm)].map((m) => m[1]);
    expect(offered).toEqual(['exec_command', 'function__wait_agent', 'spawn_agent', 'multi_agent_v1__wait_agent']);
    expect(text).not.toContain('web_search');
    const res = await post(url, '/v1/responses', { model: MODEL, input: 'hi', tools });
    expect(res.headers.get('x-dynamo-dropped-tools')).toBe('web_search, image_generation');
  });

  it("names a call of a namespace's function with its namespace, whole and streamed", async () => {
    const weather = [
      {
        type: 'namespace',
        name: 'weather',
        description: 'weather tools',
        tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
      },
    ];
    const body = { model: MODEL, input: `Weather in Paris? [case ${seed('hermes: one call')}]`, tools: weather };
    const whole = (await (await post(url, '/v1/responses', body)).json()) as { output: Array<Record<string, unknown>> };
    expect(whole.output).toEqual([
      expect.objectContaining({ type: 'function_call', name: 'get_weather', namespace: 'weather', arguments: '{"city": "Paris", "unit": "celsius"}' }),
    ]);
    const events = (await (await post(url, '/v1/responses', { ...body, stream: true })).text())
      .split('\n\n')
      .filter((e) => e.startsWith('event: response.output_item.done'));
    expect(JSON.parse(events[0]!.slice(events[0]!.indexOf('\ndata: ') + 7)).item).toMatchObject({ name: 'get_weather', namespace: 'weather' });
  });

  it('renders a text-less function_call turn with its namespace, and takes back a reasoning item it returned', async () => {
    const text = await prompt('/v1/responses', {
      tools,
      include: ['reasoning.encrypted_content'],
      store: false,
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'spawn one' }] },
        { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Spawn it.' }], encrypted_content: null },
        { type: 'function_call', call_id: 'c1', name: 'wait_agent', namespace: 'multi_agent_v1', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'done' },
      ],
    });
    expect(text).toContain('<tool_call>\n{"name": "multi_agent_v1__wait_agent", "arguments": {}}\n</tool_call>');
    expect(text).toContain('<tool_response>\ndone\n</tool_response>');
  });

  it('offers a custom (freeform) tool as a function of one string, and returns its call as a custom_tool_call', async () => {
    const patch = {
      type: 'custom',
      name: 'apply_patch',
      description: 'Edit files.',
      format: { type: 'grammar', syntax: 'lark', definition: 'start: "*** Begin Patch"' },
    };
    const text = await prompt('/v1/responses', {
      tools: [patch],
      input: [
        { type: 'message', role: 'user', content: 'patch it' },
        { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', call_id: 'c1', output: 'Done!' },
      ],
    });
    expect(text).toContain(
      '"name": "apply_patch", "description": "Edit files.\\n\\nThe input follows this lark grammar:\\nstart: \\"*** Begin Patch\\"", "parameters": {"type": "object", "properties": {"input": {"type": "string"',
    );
    expect(text).toContain('<tool_call>\n{"name": "apply_patch", "arguments": {"input":"*** Begin Patch"}}\n</tool_call>');
    expect(text).toContain('<tool_response>\nDone!\n</tool_response>');
    // The replayed case calls get_weather with JSON arguments: a custom tool's input is that text as written.
    const body = { model: MODEL, input: `Weather? [case ${seed('hermes: one call')}]`, tools: [{ type: 'custom', name: 'get_weather' }] };
    const whole = (await (await post(url, '/v1/responses', body)).json()) as { output: Array<Record<string, unknown>> };
    expect(whole.output).toEqual([
      expect.objectContaining({
        type: 'custom_tool_call',
        name: 'get_weather',
        input: '{"city": "Paris", "unit": "celsius"}',
        id: expect.stringMatching(/^ctc_/),
      }),
    ]);
    const events = (await (await post(url, '/v1/responses', { ...body, stream: true })).text()).split('\n\n').map((e) => e.slice(0, e.indexOf('\n')));
    expect(events).toEqual(expect.arrayContaining(['event: response.custom_tool_call_input.delta', 'event: response.custom_tool_call_input.done']));
    expect(events).not.toContain('event: response.function_call_arguments.delta');
  });

  it('refuses a tool of a type nobody knows with a 400 naming it', async () => {
    const res = await post(url, '/v1/responses', { model: MODEL, input: 'hi', tools: [{ type: 'teleport' }] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /^request\.tools\.0\.type: must be a function, namespace or custom tool, or one of the hosted tools/,
    );
  });
});

describe('chat completions', () => {
  it('renders an assistant message with no content key like content null', async () => {
    const call = { id: 'c1', type: 'function', function: { name: 'ls', arguments: '{}' } };
    const turn = (assistant: Record<string, unknown>) =>
      prompt('/v1/chat/completions', {
        messages: [
          { role: 'user', content: 'list' },
          { role: 'assistant', tool_calls: [call], ...assistant },
          { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
        ],
      });
    expect(await turn({})).toBe(await turn({ content: null }));
  });
});
