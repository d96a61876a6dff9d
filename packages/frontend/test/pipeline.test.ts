// The serving pipeline, all real processes: dynamo-frontend and two dynamo-sample-engine workers,
// on the embedded default (file discovery + TCP) and on etcd + NATS (real servers).
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { parseJson } from '@dynamo/runtime/internal';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { freePort } from '@dynamo/testing/free-port';
import { Deployment, modelDir, post, SETUPS, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'qwen3-sample';
const chatBody = { model: MODEL, messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 12 };

let preprocessor: Preprocessor;
beforeAll(async () => {
  const model = await LocalModel.load(modelDir);
  preprocessor = await Preprocessor.create(
    model,
    buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions, modelName: MODEL }),
  );
});

/** Requests a worker has received, from its own /metrics. */
async function workerRequests(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return [...text.matchAll(/^dynamo_component_requests_total\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

describe.each(SETUPS)('frontend + two sample workers, $name', (setup) => {
  let deployment: Deployment;
  let url = '';
  const systemPorts: number[] = [];
  const workers: Child[] = [];

  beforeAll(async () => {
    deployment = await Deployment.start(setup);
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      systemPorts.push(port);
      workers.push(deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '1'], { DYN_SYSTEM_PORT: String(port) }));
    }
    ({ url } = await deployment.frontend());
    await waitForModel(url, MODEL, 'sample', 2);
  }, 120_000);
  afterAll(() => deployment.stop());

  it('answers a chat completion with content, finish reason and exact usage', async () => {
    const res = await post(url, '/v1/chat/completions', chatBody);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const body = (await res.json()) as {
      id: string;
      object: string;
      model: string;
      choices: Array<{ message: { role: string; content: string }; finish_reason: string }>;
      usage: Record<string, number>;
    };
    const prompt = (await preprocessor.preprocessChat(chatBody)).request.token_ids.length;
    expect(body).toMatchObject({ object: 'chat.completion', model: MODEL, usage: { prompt_tokens: prompt, completion_tokens: 12, total_tokens: prompt + 12 } });
    expect(body.id).toMatch(/^chatcmpl-/);
    // The sample engine's tokens 1..12 decode to '"#$%&'()*+,-'.
    expect(body.choices[0]).toMatchObject({ message: { role: 'assistant', content: `"#$%&'()*+,-` }, finish_reason: 'length' });
  });

  it('streams the same chat completion as SSE, with the usage chunk and [DONE]', async () => {
    const res = await post(
      url,
      '/v1/chat/completions',
      { ...chatBody, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-request-id': 'my-request-1' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('x-request-id')).toBe('my-request-1');
    const events = await sseEvents(res);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1) as Array<{
      id: string;
      choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }>;
      usage?: Record<string, number>;
    }>;
    expect(chunks.every((c) => c.id === 'chatcmpl-my-request-1')).toBe(true);
    const content = chunks
      .flatMap((c) => c.choices)
      .map((c) => c.delta.content ?? '')
      .join('');
    expect(content).toBe(`"#$%&'()*+,-`);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const finishes = chunks.flatMap((c) => c.choices).map((c) => c.finish_reason);
    expect(finishes.filter((f) => f !== null)).toEqual(['length']);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ completion_tokens: 12 });
  });

  it('serves completions, streaming and not, and stops on a stop string', async () => {
    const whole = (await (await post(url, '/v1/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 5 })).json()) as {
      object: string;
      choices: Array<{ text: string; finish_reason: string }>;
      usage: Record<string, number>;
    };
    expect(whole.object).toBe('text_completion');
    expect(whole.choices[0]).toMatchObject({ text: '"#$%&', finish_reason: 'length' });
    expect(whole.usage).toEqual({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });

    const events = await sseEvents(await post(url, '/v1/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 10, stop: ['&'], stream: true }));
    const chunks = events.slice(0, -1) as Array<{ choices: Array<{ text: string; finish_reason: string | null }> }>;
    expect(chunks.map((c) => c.choices[0]!.text).join('')).toBe('"#$%');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
  });

  it('spreads requests round-robin over both workers', async () => {
    const before = await Promise.all(systemPorts.map(workerRequests));
    for (let i = 0; i < 10; i++) expect((await post(url, '/v1/chat/completions', { ...chatBody, max_tokens: 2 })).status).toBe(200);
    const after = await Promise.all(systemPorts.map(workerRequests));
    expect(after.map((n, i) => n - before[i]!)).toEqual([5, 5]);
  });

  it('sends a pinned request to the named worker: nvext.backend_instance_id (a bare u64) or the header', async () => {
    const health = parseJson(await (await fetch(`${url}/health`)).text()) as { instances: Array<{ instance_id: bigint | number }> };
    const ids = health.instances.map((i) => BigInt(i.instance_id));
    expect(ids).toHaveLength(2);
    for (const [n, id] of ids.entries()) {
      const before = await Promise.all(systemPorts.map(workerRequests));
      // The id goes in as a bare integer, as a Dynamo client writes it (most are beyond 2^53).
      const body = `{"model":"${MODEL}","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"nvext":{"backend_instance_id":${id}}}`;
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        expect(res.status, await res.text()).toBe(200);
      }
      const viaHeader = await post(url, '/v1/chat/completions', { ...chatBody, max_tokens: 2 }, { headers: { 'x-dynamo-worker-instance-id': String(id) } });
      expect(viaHeader.status).toBe(200);
      const after = await Promise.all(systemPorts.map(workerRequests));
      const served = after.map((count, i) => count - before[i]!);
      expect(served.sort(), `pin ${n}`).toEqual([0, 4]);
    }
  });

  it('works with the official openai client, streaming and not', async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
    expect(completion.choices[0]!.message.content).toBe('"#$%');
    expect(completion.choices[0]!.finish_reason).toBe('length');
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe('"#$%');
    expect(usage?.completion_tokens).toBe(4);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain(MODEL);
  });

  it('picks up workers joining and leaving, and models appearing and disappearing', async () => {
    const port = await freePort();
    const third = deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '1'], { DYN_SYSTEM_PORT: String(port) });
    await waitForModel(url, MODEL, 'sample', 3);
    for (let i = 0; i < 6; i++) expect((await post(url, '/v1/chat/completions', { ...chatBody, max_tokens: 2 })).status).toBe(200);
    expect(await workerRequests(port)).toBe(2);

    const other = deployment.sampleWorker(['--model-name', 'qwen3-other', '--component', 'other']);
    await waitForModel(url, 'qwen3-other', 'other', 1);
    expect((await post(url, '/v1/chat/completions', { ...chatBody, model: 'qwen3-other' })).status).toBe(200);

    third.child.kill('SIGTERM');
    other.child.kill('SIGTERM');
    await Promise.all([third.exited, other.exited]);
    await waitForModel(url, MODEL, 'sample', 2);
    await waitForModel(url, 'qwen3-other', 'other', 0);
    expect((await post(url, '/v1/chat/completions', { ...chatBody, model: 'qwen3-other' })).status).toBe(404);
    for (let i = 0; i < 4; i++) expect((await post(url, '/v1/chat/completions', chatBody)).status).toBe(200);
  }, 60_000);

  it('reports per-model metrics with stock names', async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const name of [
      'requests_total',
      'inflight_requests',
      'time_to_first_token_seconds',
      'inter_token_latency_seconds',
      'input_sequence_tokens',
      'output_sequence_tokens',
      'request_duration_seconds',
    ]) {
      expect(text).toContain(`dynamo_frontend_${name}`);
    }
    expect(text).toMatch(/dynamo_frontend_requests_total\{model="qwen3-sample",endpoint="chat_completions",request_type="unary",status="success"\} [1-9]/);
    expect(text).toMatch(/dynamo_frontend_inflight_requests\{model="qwen3-sample"\} 0/);
    // The process's own, under Prometheus' standard names, to watch for leaks.
    expect(Number(text.match(/^process_resident_memory_bytes (\d+)/m)?.[1])).toBeGreaterThan(10 * 2 ** 20);
    expect(Number(text.match(/^process_open_fds (\d+)/m)?.[1])).toBeGreaterThan(0);
    for (const name of ['nodejs_heap_size_used_bytes', 'nodejs_external_memory_bytes', 'nodejs_active_handles_total', 'nodejs_eventloop_lag_p99_seconds'])
      expect(text).toMatch(new RegExp(`^${name} [0-9.e+-]+$`, 'm'));
    expect(text.match(/^# TYPE process_resident_memory_bytes /gm)).toHaveLength(1);
  });
});
