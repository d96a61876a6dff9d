// A Text-input model (ModelInput.Text) behind the frontend: the OpenAI body goes to the worker
// as the client sent it (no template, no tokenization), and the worker's OpenAI chunks come back
// as the client's response, whole or streamed, with the worker's usage.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { Deployment, post, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';

const MODEL = 'qwen3-text';
type Choice = { message?: { content: string }; delta?: { content?: string }; text?: string; finish_reason: string | null };

describe('a Text-input worker behind the frontend', () => {
  let deployment: Deployment;
  let worker: Child;
  let url = '';

  beforeAll(async () => {
    deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' });
    worker = deployment.textWorker(MODEL);
    ({ url } = await deployment.frontend());
    await waitForModel(url, MODEL, 'text', 1);
  }, 120_000);
  afterAll(() => deployment.stop());

  /** The body the worker received for the request with this `user` field. */
  async function forwarded(user: string): Promise<Record<string, unknown>> {
    const line = await worker.waitForLine(new RegExp(`^BODY .*"user":"${user}"`), 5_000);
    return JSON.parse(line.slice('BODY '.length)) as Record<string, unknown>;
  }

  it('forwards a chat body as sent and answers with the worker text, finish reason and usage', async () => {
    const messages = [
      { role: 'system', content: 'You echo.' },
      { role: 'user', content: 'one two three' },
    ];
    const res = await post(url, '/v1/chat/completions', { model: MODEL, messages, max_tokens: 20, temperature: 0.5, user: 'chat-whole' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; model: string; choices: Choice[]; usage: Record<string, number> };
    expect(body).toMatchObject({ object: 'chat.completion', model: MODEL, usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } });
    expect(body.choices[0]).toMatchObject({ message: { content: 'one two three' }, finish_reason: 'stop' });
    expect(await forwarded('chat-whole')).toMatchObject({ model: MODEL, messages, max_tokens: 20, temperature: 0.5 });
  });

  it('streams a chat completion from the worker chunks, with the usage chunk and [DONE]', async () => {
    const res = await post(url, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'a b c d' }],
      stream: true,
      stream_options: { include_usage: true },
      user: 'chat-stream',
    });
    expect(res.status).toBe(200);
    const events = await sseEvents(res);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1) as Array<{ choices: Choice[]; usage?: Record<string, number> | null }>;
    const text = chunks.flatMap((c) => c.choices.map((choice) => choice.delta?.content ?? '')).join('');
    expect(text).toBe('a b c d');
    expect(chunks.flatMap((c) => c.choices).at(-1)?.finish_reason).toBe('stop');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 } });
    expect(await forwarded('chat-stream')).toMatchObject({ stream: true, messages: [{ role: 'user', content: 'a b c d' }] });
  });

  it('serves completions, whole and streamed', async () => {
    const whole = await post(url, '/v1/completions', { model: MODEL, prompt: 'red green blue', user: 'cmpl-whole' });
    expect(whole.status).toBe(200);
    const body = (await whole.json()) as { object: string; choices: Choice[] };
    expect(body).toMatchObject({ object: 'text_completion', choices: [{ text: 'red green blue', finish_reason: 'stop' }] });
    expect(await forwarded('cmpl-whole')).toMatchObject({ prompt: 'red green blue' });

    const streamed = await post(url, '/v1/completions', { model: MODEL, prompt: 'x y', stream: true, user: 'cmpl-stream' });
    const events = (await sseEvents(streamed)).slice(0, -1) as Array<{ choices: Choice[] }>;
    expect(events.flatMap((c) => c.choices.map((choice) => choice.text ?? '')).join('')).toBe('x y');
  });
});
