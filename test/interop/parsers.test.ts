// Tool-call and reasoning parsing against the release: a replaying engine (one worker per parser
// setting) emits fixed Qwen3 token sequences, one token per chunk: tool calls in each parser's
// format, <think> blocks, malformed tool-call text and plain text. For each, our frontend and the
// stock 1.6.1 frontend, in front of the same worker, must return the same tool_calls,
// reasoning_content, content and finish_reason, whole and streamed (deltas joined). Skipped,
// never passed, without PyPI.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { REPLAY_CASES, type ReplayCase } from '@dynamo/testing/replay-cases';
import { waitFor } from '@dynamo/testing/free-port';
import { modelDir, packageDir, post, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';
import { type Frontend, InteropStack } from '@dynamo/testing/interop-stack';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** PARSER PARITY SKIPPED: ${stock.skip} ***\n`);

const replayEngine = join(packageDir, 'test', 'fixtures', 'replay-engine.ts');

/** A worker's parser flags, and the fixture formats it is asked for besides the plain ones. */
interface ParserWorker {
  model: string;
  args: string[];
  format?: string;
}
const PARSER_WORKERS: ParserWorker[] = [
  { model: 'replay-hermes', args: ['--dyn-tool-call-parser', 'hermes'], format: 'hermes' },
  { model: 'replay-qwen3-coder', args: ['--dyn-tool-call-parser', 'qwen3_coder'], format: 'qwen3_coder' },
  { model: 'replay-llama3-json', args: ['--dyn-tool-call-parser', 'llama3_json'], format: 'llama3_json' },
  { model: 'replay-mistral', args: ['--dyn-tool-call-parser', 'mistral'], format: 'mistral' },
  { model: 'replay-pythonic', args: ['--dyn-tool-call-parser', 'pythonic'], format: 'pythonic' },
  { model: 'replay-deepseek-v3', args: ['--dyn-tool-call-parser', 'deepseek_v3'], format: 'deepseek_v3' },
  { model: 'replay-think-basic', args: ['--dyn-reasoning-parser', 'basic'] },
  { model: 'replay-think-qwen3', args: ['--dyn-reasoning-parser', 'qwen3'] },
  { model: 'replay-think-r1', args: ['--dyn-reasoning-parser', 'deepseek_r1'] },
  { model: 'replay-qwen3', args: ['--dyn-tool-call-parser', 'hermes', '--dyn-reasoning-parser', 'qwen3'], format: 'hermes' },
];
/** A worker without parsers: it records what structured-output requests forward. */
const RECORDER = 'replay-plain';
/** Workers whose cards turn structural tags on (stock has tags for hermes and qwen3_coder only). */
const STRUCTURAL_TAG_WORKERS: ParserWorker[] = [
  { model: 'replay-tags-hermes', args: ['--dyn-tool-call-parser', 'hermes', '--dyn-enable-structural-tag'] },
  {
    model: 'replay-tags-coder',
    args: [
      '--dyn-tool-call-parser',
      'qwen3_coder',
      '--dyn-enable-structural-tag',
      '--dyn-structural-tag-scope',
      'always',
      '--dyn-structural-tag-schema',
      'strict',
    ],
  },
  { model: 'replay-tags-mistral', args: ['--dyn-tool-call-parser', 'mistral', '--dyn-enable-structural-tag'] },
];
/** A worker registered with a custom chat template (`--custom-jinja-template`). */
const CUSTOM = 'replay-custom-template';
const CUSTOM_TEMPLATE = [
  "{%- if messages | length > 1 %}{{ raise_exception('this model takes one message, got ' ~ (messages | length)) }}{%- endif %}",
  '<|im_start|>custom\n{{ messages[0].content }}<|im_end|>\n',
  '{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}',
].join('');

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' }, unit: { type: 'string' } } },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' }, exact: { type: 'boolean' } } } } },
];

/** What a response says, in a form both frontends can be compared in (tool call ids are random). */
interface Said {
  content: string | null;
  reasoning: string | null;
  toolCalls: Array<{ name: string; arguments: unknown }>;
  finish: string | null;
  /** `usage.completion_tokens_details.reasoning_tokens`, when there is one. */
  reasoningTokens: number | null;
}

type UsageJson = { completion_tokens_details?: { reasoning_tokens?: number } } | undefined;

type ToolCallJson = { index?: number; id?: string; type?: string; function?: { name?: string; arguments?: string } };

/** Ids are random `call-<uuid>` (stock's pythonic parser numbers them `call-1`, `call-2`, ...). */
const CALL_ID = /^call-[0-9a-f-]+$/;
const orNull = (s: string | null | undefined): string | null => (s === undefined || s === null || s === '' ? null : s);
const args = (text: string | undefined): unknown => {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return { unparsable: text };
  }
};

async function whole(url: string, body: Record<string, unknown>): Promise<Said> {
  const res = await post(url, '/v1/chat/completions', body);
  expect(res.status, await res.clone().text()).toBe(200);
  const json = (await res.json()) as {
    choices: Array<{ message: { content: string | null; reasoning_content?: string; tool_calls?: ToolCallJson[] }; finish_reason: string }>;
    usage: UsageJson;
  };
  const { message, finish_reason } = json.choices[0]!;
  for (const call of message.tool_calls ?? []) expect(call).toMatchObject({ id: expect.stringMatching(CALL_ID), type: 'function' });
  return {
    content: orNull(message.content),
    reasoning: orNull(message.reasoning_content),
    toolCalls: (message.tool_calls ?? []).map((c) => ({ name: c.function!.name!, arguments: args(c.function!.arguments) })),
    finish: finish_reason,
    reasoningTokens: json.usage?.completion_tokens_details?.reasoning_tokens ?? null,
  };
}

async function streamed(url: string, body: Record<string, unknown>): Promise<Said> {
  const res = await post(url, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } });
  expect(res.status, await res.clone().text()).toBe(200);
  const events = await sseEvents(res);
  expect(events.at(-1)).toBe('[DONE]');
  let content = '';
  let reasoning = '';
  const finishes: string[] = [];
  const calls = new Map<number, { name: string; arguments: string }>();
  let usage: UsageJson;
  for (const event of events.slice(0, -1) as Array<{
    choices: Array<{ delta: { content?: string | null; reasoning_content?: string | null; tool_calls?: ToolCallJson[] }; finish_reason: string | null }>;
    usage?: UsageJson;
  }>) {
    usage = event.usage ?? usage;
    for (const choice of event.choices) {
      content += choice.delta.content ?? '';
      reasoning += choice.delta.reasoning_content ?? '';
      for (const call of choice.delta.tool_calls ?? []) {
        const entry = calls.get(call.index!) ?? { name: '', arguments: '' };
        if (call.id !== undefined) expect(call.id).toMatch(CALL_ID);
        entry.name += call.function?.name ?? '';
        entry.arguments += call.function?.arguments ?? '';
        calls.set(call.index!, entry);
      }
      if (choice.finish_reason) finishes.push(choice.finish_reason);
    }
  }
  expect(finishes.length, 'one finish_reason per stream').toBe(1);
  const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => ({ name: c.name, arguments: args(c.arguments) }));
  return {
    content: orNull(content),
    reasoning: orNull(reasoning),
    toolCalls,
    finish: finishes[0]!,
    reasoningTokens: usage?.completion_tokens_details?.reasoning_tokens ?? null,
  };
}

const casesFor = (worker: ParserWorker): Array<{ seed: number; c: ReplayCase }> =>
  REPLAY_CASES.map((c, seed) => ({ seed, c })).filter(({ c }) => c.format === 'any' || c.format === worker.format);

describe.skipIf('skip' in stock)('tool-call and reasoning parsers: ours vs the stock 1.6.1 frontend', () => {
  let stack: InteropStack;
  const frontends: Record<'stock' | 'our', Frontend> = {} as never;
  const workers = new Map<string, Child>();
  const templateDir = mkdtempSync(join(tmpdir(), 'custom-template-'));

  beforeAll(async () => {
    stack = await InteropStack.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, (stock as { python: string }).python);
    const template = join(templateDir, 'template.jinja');
    writeFileSync(template, CUSTOM_TEMPLATE);
    for (const w of [
      ...PARSER_WORKERS,
      ...STRUCTURAL_TAG_WORKERS,
      { model: RECORDER, args: [] },
      { model: CUSTOM, args: ['--custom-jinja-template', template] },
    ]) {
      workers.set(
        w.model,
        stack.deployment.nodeProcess(['--import', 'tsx', replayEngine, '--model-path', modelDir, '--model-name', w.model, '--component', w.model, ...w.args]),
      );
    }
    [frontends.stock, frontends.our] = await Promise.all([stack.stockFrontend(), stack.ourFrontend()]);
    for (const fe of Object.values(frontends)) for (const model of workers.keys()) await waitForModel(fe.url, model, model, 1, 120_000);
  }, 300_000);

  /** The request the worker of `model` got for `body`, through `url`'s frontend. */
  async function forwarded(url: string, model: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const worker = workers.get(model)!;
    const seen = worker.lines.length;
    const res = await post(url, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    await res.text();
    const line = await waitFor('the worker to print the request', async () => worker.lines.slice(seen).find((l) => l.startsWith('REQUEST ')), 10_000);
    return JSON.parse(line.slice('REQUEST '.length)) as Record<string, unknown>;
  }

  const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
  const closed = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
  const LOOSE_TOOLS = [
    TOOLS[0],
    { type: 'function', function: { name: 'get_time', strict: false, parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
  ];
  const STRICT_TOOLS = [{ type: 'function', function: { name: 'get_weather', strict: true, parameters: closed } }, TOOLS[1]];
  const BAD_STRICT_TOOLS = [
    { type: 'function', function: { name: 'get_weather', strict: true, parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  ];
  const TAGGED: Array<[string, string, Record<string, unknown>]> = STRUCTURAL_TAG_WORKERS.flatMap(({ model }) => [
    [model, 'tool_choice required, one tool strict: false', { tools: LOOSE_TOOLS, tool_choice: 'required' }],
    [model, 'tool_choice naming a function', { tools: LOOSE_TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } } }],
    [model, 'tool_choice auto', { tools: TOOLS, tool_choice: 'auto' }],
    [model, 'tool_choice auto, a strict tool', { tools: STRICT_TOOLS }],
    [model, 'tool_choice auto, parallel_tool_calls false', { tools: TOOLS, parallel_tool_calls: false }],
  ]);
  for (const [model, name, body] of TAGGED) {
    it(`structural tags, ${model}, ${name}: the engine gets the same guided_decoding`, async () => {
      const [theirs, ours] = await Promise.all([forwarded(frontends.stock.url, model, body), forwarded(frontends.our.url, model, body)]);
      const guided = (r: Record<string, unknown>) => (r.sampling_options as { guided_decoding: unknown }).guided_decoding;
      expect(guided(ours)).toEqual(guided(theirs));
    });
  }

  it.each([
    [{ additionalProperties: true }, 'In context=#, object schemas require additionalProperties: false'],
    [{ additionalProperties: false }, "In context=#/required, must include property 'city'"],
  ])('a strict tool whose schema breaks the strict rules (%j) is a 400 from both frontends, naming the function', async (extra, message) => {
    const tools = [
      { type: 'function', function: { name: 'get_weather', strict: true, parameters: { ...BAD_STRICT_TOOLS[0]!.function.parameters, ...extra } } },
    ];
    const body = { model: 'replay-tags-hermes', messages: [{ role: 'user', content: 'hi' }], tools };
    for (const fe of Object.values(frontends)) {
      const res = await post(fe.url, '/v1/chat/completions', body);
      const text = await res.text();
      expect(res.status, `${fe.name}: ${text}`).toBe(400);
      expect(text, fe.name).toContain(`Invalid schema for function 'get_weather': ${message}`);
    }
  });

  const STRUCTURED: Array<[string, Record<string, unknown>]> = [
    ['response_format json_object', { response_format: { type: 'json_object' } }],
    ['response_format json_schema', { response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } } }],
    ['response_format text', { response_format: { type: 'text' } }],
    ['guided_json with backend and whitespace pattern', { guided_json: schema, guided_decoding_backend: 'xgrammar', guided_whitespace_pattern: ' ' }],
    ['guided_regex', { guided_regex: '[a-z]+' }],
    ['guided_choice', { guided_choice: ['yes', 'no'] }],
    ['guided_grammar', { guided_grammar: 'root ::= "a"' }],
    ['tool_choice required', { tools: TOOLS, tool_choice: 'required' }],
    ['tool_choice naming a function', { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } } }],
  ];
  for (const [name, body] of STRUCTURED) {
    it(`structured outputs, ${name}: the engine gets the same guided_decoding`, async () => {
      const [theirs, ours] = await Promise.all([forwarded(frontends.stock.url, RECORDER, body), forwarded(frontends.our.url, RECORDER, body)]);
      const guided = (r: Record<string, unknown>) => (r.sampling_options as { guided_decoding: unknown }).guided_decoding;
      expect(guided(ours)).toEqual(guided(theirs));
      expect(ours.token_ids).toEqual(theirs.token_ids);
    });
  }

  it("enable_thinking reaches a reasoning model's engine in extra_args, as stock forwards it", async () => {
    for (const args of [{ chat_template_kwargs: { enable_thinking: false } }, { chat_template_args: { enable_thinking: true } }]) {
      const [theirs, ours] = await Promise.all([
        forwarded(frontends.stock.url, 'replay-think-r1', args),
        forwarded(frontends.our.url, 'replay-think-r1', args),
      ]);
      expect(ours.extra_args).toEqual(theirs.extra_args);
      expect(ours.token_ids).toEqual(theirs.token_ids);
    }
  });
  afterAll(async () => {
    await stack?.stop();
    rmSync(templateDir, { recursive: true, force: true });
  });

  it('a custom chat template registered by the worker renders the same prompt through both frontends', async () => {
    const body = { messages: [{ role: 'user', content: 'Bonjour' }] };
    const [theirs, ours] = await Promise.all([forwarded(frontends.stock.url, CUSTOM, body), forwarded(frontends.our.url, CUSTOM, body)]);
    expect(ours.token_ids).toEqual(theirs.token_ids);
    // `<|im_start|>custom\nBonjour<|im_end|>\n<|im_start|>assistant\n` is 7 tokens; the model's own template makes 10 of this message.
    expect((ours.token_ids as number[]).length).toBe(7);
  });

  it('a custom template that raises is a 400 from both frontends; ours names the template error', async () => {
    const body = {
      model: CUSTOM,
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
        { role: 'user', content: 'c' },
      ],
    };
    const [theirs, ours] = await Promise.all([post(frontends.stock.url, '/v1/chat/completions', body), post(frontends.our.url, '/v1/chat/completions', body)]);
    const [theirText, ourText] = await Promise.all([theirs.text(), ours.text()]);
    // Stock answers {"message":"Invalid request"} without the reason.
    expect(theirs.status, theirText).toBe(400);
    expect(ours.status, ourText).toBe(400);
    expect(ourText).toContain('this model takes one message, got 3');
    // The frontends stay up and keep serving the model.
    for (const fe of Object.values(frontends))
      expect((await post(fe.url, '/v1/chat/completions', { model: CUSTOM, messages: [{ role: 'user', content: 'a' }], max_tokens: 2 })).status).toBe(200);
  });

  const named = { type: 'function', function: { name: 'get_weather' } };
  const FORCED: Array<[string, string, unknown]> = [
    [RECORDER, 'forced: a JSON array of calls', 'required'],
    [RECORDER, 'forced: an arguments object', named],
    [RECORDER, 'forced: an arguments object', 'required'],
    [RECORDER, 'plain text', named],
    ['replay-hermes', 'forced: an arguments object', named],
    ['replay-hermes', 'hermes: one call', 'required'],
    ['replay-hermes', 'forced: a JSON array of calls', 'required'],
  ];
  for (const [model, name, choice] of FORCED) {
    it(`tool_choice ${JSON.stringify(choice).slice(0, 20)}, ${model}, ${name}: same output, whole and streamed`, async () => {
      const body = {
        model,
        messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
        seed: REPLAY_CASES.findIndex((c) => c.name === name),
        max_tokens: 400,
        tools: TOOLS,
        tool_choice: choice,
      };
      for (const read of [whole, streamed]) {
        const [theirs, ours] = await Promise.all([read(frontends.stock.url, body), read(frontends.our.url, body)]);
        expect(ours, read.name).toEqual(theirs);
      }
    });
  }

  for (const worker of PARSER_WORKERS) {
    describe(`${worker.model} (${worker.args.join(' ')})`, () => {
      const variants: Array<[string, Record<string, unknown>]> = worker.format
        ? [['with tools', { tools: TOOLS }]]
        : [
            ['', {}],
            ['enable_thinking false', { chat_template_args: { enable_thinking: false } }],
          ];
      for (const [variant, extra] of variants) {
        for (const { seed, c } of casesFor(worker)) {
          it(`${c.name}${variant ? `, ${variant}` : ''}: same output, whole and streamed`, async () => {
            const body = { model: worker.model, messages: [{ role: 'user', content: 'What is the weather in Paris?' }], seed, max_tokens: 400, ...extra };
            for (const read of [whole, streamed]) {
              const [theirs, ours] = await Promise.all([read(frontends.stock.url, body), read(frontends.our.url, body)]);
              if (c.stockDropsText && worker.format === c.format) {
                expect(theirs.content, 'stock drops malformed tool-call text').toBeNull();
                expect(ours, read.name).toEqual({ ...theirs, content: c.text });
              } else {
                expect(ours, read.name).toEqual(theirs);
              }
            }
          });
        }
      }
    });
  }
});
