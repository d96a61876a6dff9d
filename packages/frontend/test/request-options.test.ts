// Request options a client relies on, through a real dynamo-frontend: what the worker receives for
// stop token ids, reasoning_effort and media parts (the replaying test engine prints each request),
// parallel_tool_calls: false, continuous usage, SSE keep-alive while a slow engine is silent, and a
// client that hangs up while its long prompt is preprocessed.
import { request as httpRequest } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { REPLAY_CASES } from '@dynamo/testing/replay-cases';
import { Deployment, post, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';

const seed = (name: string): number => REPLAY_CASES.findIndex((c) => c.name === name);
const TOOLS: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
];
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
// A template that renders media parts as placeholders, as vision models' templates do.
const VISION_TEMPLATE =
  "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% else %}<{{ p.type }}>{% endif %}{% endfor %}{% endif %}{% endfor %}";

describe('request options through dynamo-frontend', () => {
  let deployment: Deployment;
  let url = '';
  let client: OpenAI;
  let systemPort = 0;
  const replay = (model: string, args: string[]) => deployment.replayWorker(model, args);
  const workerOf = (model: string): Child => deployment.children.find((c) => c.child.spawnargs.includes(model))!;
  /** Sends a request and returns it as the worker of `model` received it. */
  const received = async (model: string, body: Record<string, unknown>, path = '/v1/chat/completions') => {
    const worker = workerOf(model);
    const seen = worker.lines.length;
    const res = await post(url, path, { model, ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    await res.text();
    const line = await waitFor('the engine to print the request', () => worker.lines.slice(seen).find((l) => l.startsWith('REQUEST ')));
    // biome-ignore lint/suspicious/noExplicitAny: the assertions walk the request's JSON freely.
    return JSON.parse(line.slice('REQUEST '.length)) as Record<string, any>;
  };

  beforeAll(async () => {
    deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' });
    const template = join(mkdtempSync(join(tmpdir(), 'vision-template-')), 'template.jinja');
    writeFileSync(template, VISION_TEMPLATE);
    replay('tools', ['--dyn-tool-call-parser', 'hermes', '--dyn-reasoning-parser', 'qwen3']);
    replay('vision', ['--custom-jinja-template', template]);
    systemPort = await freePort();
    deployment.sampleWorker(['--model-name', 'slow', '--component', 'slow', '--delay-ms', '400', '--context-length', '40960'], {
      DYN_SYSTEM_PORT: String(systemPort),
    });
    ({ url } = await deployment.frontend(['--mm-max-data-url-mb', '0.001', '--enable-anthropic-api'], { DYN_HTTP_SSE_KEEP_ALIVE_INTERVAL_MS: '150' }));
    for (const model of ['tools', 'vision', 'slow']) await waitForModel(url, model, model, 1, 60_000);
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(() => deployment.stop());

  it('parallel_tool_calls: false returns only the first tool call, whole and streamed', async () => {
    const body = { model: 'tools', messages, tools: TOOLS, seed: seed('hermes: text then two calls'), parallel_tool_calls: false };
    const whole = await client.chat.completions.create(body);
    const calls = whole.choices[0]!.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => c.function.name)).toEqual(['get_weather']);
    expect(whole.choices[0]!.finish_reason).toBe('tool_calls');
    const streamed = await client.chat.completions.stream(body).finalChatCompletion();
    expect((streamed.choices[0]!.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[]).map((c) => c.function.name)).toEqual(['get_weather']);
    // With parallel calls allowed, both come back.
    const both = await client.chat.completions.create({ ...body, parallel_tool_calls: true });
    expect(both.choices[0]!.message.tool_calls).toHaveLength(2);
  });

  it('stop given as token ids reaches the worker as stop_token_ids', async () => {
    const request = await received('tools', { messages, stop: [11, 22] });
    expect(request.stop_conditions).toMatchObject({ stop: null, stop_token_ids: [11, 22] });
  });

  it('reasoning_effort goes into the template arguments as stock folds it: "none" closes the think block', async () => {
    const off = await received('tools', { messages, reasoning_effort: 'none' });
    expect(off.extra_args.reasoning_parser_kwargs.chat_template_kwargs).toEqual({
      thinking: false,
      enable_thinking: false,
      thinking_mode: 'disabled',
      reasoning_effort: 'none',
    });
    const on = await received('tools', { messages, reasoning_effort: 'high' });
    expect(on.extra_args.reasoning_parser_kwargs.chat_template_kwargs).toEqual({
      thinking: true,
      enable_thinking: true,
      thinking_mode: 'enabled',
      reasoning_effort: 'high',
    });
    // Qwen3's template ends an answer without thinking with an empty think block: four more tokens.
    expect(off.token_ids.length).toBe(on.token_ids.length + 4);
  });

  it('media parts go to the worker as multi_modal_data, in order, with the data: URL blanked in extra_args.messages', async () => {
    const data = 'data:image/png;base64,iVBORw0KGgo=';
    const content = [
      { type: 'text', text: 'Compare' },
      { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
      { type: 'image_url', image_url: { url: data } },
      { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } },
      { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } },
    ];
    const request = await received('vision', { messages: [{ role: 'user', content }] });
    expect(request.multi_modal_data).toEqual({
      image_url: [{ Url: 'https://example.com/a.png' }, { Url: data }],
      video_url: [{ Url: 'https://example.com/v.mp4' }],
    });
    expect(request.extra_args.messages[0].content[2].image_url.url).toBe('');
    expect(request.extra_args.formatted_prompt).toBe('Compare<image><image><video><audio>');
    // Past the data: URL limit (here 0.001 MiB), a 400 names the part.
    const big = `data:image/png;base64,${'A'.repeat(2000)}`;
    const res = await post(url, '/v1/chat/completions', {
      model: 'vision',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'x' },
            { type: 'image_url', image_url: { url: big } },
          ],
        },
      ],
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /^messages\[0\]\.content\[1\]: image_url data: URL is 2022 bytes, exceeds the 1049-byte limit/,
    );
  });

  it('stream_options.continuous_usage_stats puts the running usage on every chunk', async () => {
    const events = await sseEvents(
      await post(url, '/v1/chat/completions', {
        model: 'slow',
        messages,
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    );
    const chunks = events.slice(0, -1) as Array<{ choices: unknown[]; usage?: { completion_tokens: number } }>;
    expect(chunks.map((c) => c.usage?.completion_tokens)).toEqual([1, 2, 3, 3]);
    const plain = await sseEvents(
      await post(url, '/v1/chat/completions', { model: 'slow', messages, max_tokens: 2, stream: true, stream_options: { include_usage: true } }),
    );
    expect((plain.slice(0, -2) as Array<{ usage?: unknown }>).every((c) => c.usage === undefined)).toBe(true);
  }, 30_000);

  it('sends SSE keep-alive comments while the engine is silent', async () => {
    const res = await post(url, '/v1/chat/completions', { model: 'slow', messages, max_tokens: 3, stream: true });
    const body = await res.text();
    // 400 ms between tokens, a keep-alive after 150 ms of silence.
    expect(body).toMatch(/data: [^\n]+\n\n(:\n\n)+data: /);
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
  }, 30_000);

  it('a client that hangs up while its 30k-token prompt is preprocessed leaves no work running on the worker', async () => {
    const inflight = async () => {
      const text = await (await fetch(`http://127.0.0.1:${systemPort}/metrics`)).text();
      return [...text.matchAll(/^dynamo_component_inflight_requests\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    };
    const disconnects = async () =>
      Number((await (await fetch(`${url}/metrics`)).text()).match(/^dynamo_frontend_disconnected_clients\{[^}]*\} (\d+)/m)?.[1] ?? 0);
    const before = await disconnects();
    // Another request in flight: the frontend then preprocesses off its event loop, where it
    // sees the hang-up while the prompt is still being tokenized.
    const abort = new AbortController();
    const busy = await post(url, '/v1/chat/completions', { model: 'slow', messages, max_tokens: 30, stream: true }, { signal: abort.signal });
    const reader = busy.body!.getReader();
    await reader.read();
    const body = JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: ' hello'.repeat(30_000) }], max_tokens: 1000, stream: true });
    const { port } = new URL(url);
    await new Promise<void>((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' } });
      req.on('error', () => resolve());
      // Gone as soon as the whole body is out: the frontend is still reading or preprocessing it.
      req.end(body, () => {
        req.destroy();
        resolve();
      });
    });
    await waitFor('the frontend to count the disconnect', async () => (await disconnects()) > before, 10_000);
    await new Promise((r) => setTimeout(r, 1000));
    // Only the other request runs: 1000 tokens 400 ms apart would keep the worker busy for minutes.
    expect(await inflight()).toBe(1);
    abort.abort();
    await waitFor('the worker to finish the other request', async () => (await inflight()) === 0, 10_000);
  }, 30_000);

  it("answers /v1/models/{id}/ready with stock's readiness body: 200 while a worker serves the model, 404 for an unknown one", async () => {
    const res = await fetch(`${url}/v1/models/tools/ready`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      model: 'tools',
      ready: true,
      namespaces: { dynamo: { ready: true, worker_types: { aggregated: { workers: 1, needs: [] } }, present: ['aggregated'], missing_worker_types: [] } },
    });
    expect((await fetch(`${url}/v1/models/nope/ready`)).status).toBe(404);
  });

  it('serves /openapi.json: every route, with the request schemas the routes validate with', async () => {
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { $ref: string } }> } }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/chat/completions',
        '/v1/completions',
        '/v1/embeddings',
        '/v1/responses',
        '/v1/models',
        '/v1/models/{model}/ready',
        '/health',
        '/metrics',
      ]),
    );
    const chat = doc.components.schemas.CreateChatCompletionRequest!;
    expect(chat.required).toEqual(expect.arrayContaining(['model', 'messages']));
    expect(Object.keys(chat.properties!)).toEqual(expect.arrayContaining(['temperature', 'logprobs', 'top_logprobs', 'tools', 'reasoning_effort']));
    // Every request body names a schema the document has.
    for (const methods of Object.values(doc.paths)) {
      for (const op of Object.values(methods)) {
        const ref = op.requestBody?.content['application/json']?.schema.$ref;
        if (ref) expect(doc.components.schemas[ref.split('/').at(-1)!]).toBeDefined();
      }
    }
  });

  it('turns reasoning into a Responses reasoning item (with reasoning.summary) and an Anthropic thinking block, whole and streamed', async () => {
    const reasoning = '\nThe user asks for 2+2. That is 4.\n';
    const answer = '\n\nThe answer is 4.';
    const question = `What is 2+2? [case ${seed('think block then answer')}]`;
    type Item = { type: string; content: Array<{ text: string }> };
    const response = (await (await post(url, '/v1/responses', { model: 'tools', input: question, reasoning: { summary: 'auto' } })).json()) as {
      output: Item[];
    };
    expect(response.output.map((o) => [o.type, o.content[0]!.text])).toEqual([
      ['reasoning', reasoning],
      ['message', answer],
    ]);
    const events = (await (await post(url, '/v1/responses', { model: 'tools', input: question, reasoning: { summary: 'auto' }, stream: true })).text())
      .split('\n\n')
      .filter((e) => e.startsWith('event: '))
      .map((e) => JSON.parse(e.slice(e.indexOf('\ndata: ') + 7)) as { type: string; delta?: string });
    expect(
      events
        .filter((e) => e.type === 'response.reasoning_text.delta')
        .map((e) => e.delta)
        .join(''),
    ).toBe(reasoning);
    expect(
      events
        .filter((e) => e.type === 'response.output_text.delta')
        .map((e) => e.delta)
        .join(''),
    ).toBe(answer);
    // Without reasoning.summary, as in stock, no reasoning item.
    const plain = (await (await post(url, '/v1/responses', { model: 'tools', input: question })).json()) as { output: Item[] };
    expect(plain.output.map((o) => o.type)).toEqual(['message']);

    const message = (await (await post(url, '/v1/messages', { model: 'tools', max_tokens: 100, messages: [{ role: 'user', content: question }] })).json()) as {
      content: Array<{ type: string; thinking?: string; text?: string }>;
    };
    expect(message.content).toEqual([
      { type: 'thinking', thinking: reasoning, signature: '' },
      { type: 'text', text: answer },
    ]);
    const stream = (
      await (await post(url, '/v1/messages', { model: 'tools', max_tokens: 100, stream: true, messages: [{ role: 'user', content: question }] })).text()
    )
      .split('\n\n')
      .filter((e) => e.startsWith('event: content_block_delta'))
      .map((e) => (JSON.parse(e.slice(e.indexOf('\ndata: ') + 7)) as { delta: { type: string; thinking?: string; text?: string } }).delta);
    expect(
      stream
        .filter((d) => d.type === 'thinking_delta')
        .map((d) => d.thinking)
        .join(''),
    ).toBe(reasoning);
    expect(
      stream
        .filter((d) => d.type === 'text_delta')
        .map((d) => d.text)
        .join(''),
    ).toBe(answer);
  });
});
