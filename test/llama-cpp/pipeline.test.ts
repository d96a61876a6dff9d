// SmolLM2 through the whole pipeline: dynamo-llama-cpp behind our dynamo-frontend and the stock
// Dynamo 1.6.1 frontend at once, on file + tcp and on etcd + NATS. At temperature 0 both frontends
// answer each prompt with the text of the ids node-llama-cpp generates alone from the prompt ids our
// Preprocessor computes (the worker-level test compares the ids themselves). On file + tcp, both
// frontends also show what a client relies on with a real model: streaming, finish reasons,
// disconnects freeing the sequence, the queue limit, and structured output.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { smolLm2 } from '../../scripts/test-model.mjs';
import { referenceAnswers, SYSTEM } from './reference.js';

const here = dirname(fileURLToPath(import.meta.url));
const llamaCli = join(here, '..', 'node_modules', '@dynamo', 'llama-cpp', 'dist', 'cli.cjs');
const modelPath = await smolLm2();
const stock = stockPython();
const PROMPTS = [
  'What is the capital of France?',
  'Name three primary colors.',
  'Write one sentence about the sea.',
  'What is 2 + 2?',
  'Translate "good morning" into Spanish.',
  'Give me a synonym for "happy".',
  'What do bees make?',
  'List two planets of the solar system.',
  'Why is the sky blue? Answer briefly.',
  'Say hello in French.',
];
const MAX_TOKENS = 24;
type Chat = { choices: Array<{ message: { content: string }; finish_reason: string }> };
type Frontend = 'ours' | 'stock';
const FRONTENDS: Frontend[] = ['ours', 'stock'];

/** A streamed chat answer: its text, finish reasons and whether it ended with [DONE]. */
async function chatStream(res: Response): Promise<{ text: string; finishes: string[]; done: boolean }> {
  let text = '';
  let done = false;
  const finishes: string[] = [];
  for (const block of (await res.text()).split('\n\n')) {
    if (block === 'data: [DONE]') done = true;
    else if (block.startsWith('data: ')) {
      const choice = (JSON.parse(block.slice(6)) as { choices: Array<{ delta: { content?: string | null }; finish_reason: string | null }> }).choices[0];
      text += choice?.delta.content ?? '';
      if (choice?.finish_reason) finishes.push(choice.finish_reason);
    }
  }
  return { text, finishes, done };
}

/** Runs `tasks` with at most `limit` at once. */
async function pooled<T>(tasks: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const at = next++;
        results[at] = await tasks[at]!();
      }
    }),
  );
  return results;
}

const reference = 'skip' in stock ? [] : await referenceAnswers(modelPath, PROMPTS, MAX_TOKENS);

for (const setup of SETUPS) {
  describe.skipIf('skip' in stock)(`SmolLM2 behind both frontends, ${setup.name}`, () => {
    let deployment: Deployment;
    const urls: Record<Frontend, string> = { ours: '', stock: '' };
    let metricsUrl: string;

    beforeAll(async () => {
      deployment = await Deployment.start(setup);
      const systemPort = await freePort();
      metricsUrl = `http://127.0.0.1:${systemPort}/metrics`;
      deployment.nodeProcess(
        [llamaCli, '--model-path', modelPath, '--model-name', 'smollm2', '--parallel', '4', '--max-queued', '12', '--context-size', '1024'],
        { DYN_SYSTEM_PORT: String(systemPort) },
      );
      urls.ours = (await deployment.frontend()).url;
      urls.stock = (await deployment.stockFrontend((stock as { python: string }).python)).url;
      await waitForModel(urls.ours, 'smollm2', 'llama', 1, 120_000);
      await waitFor(
        'the stock frontend to list smollm2',
        async () => {
          const models = (await (await fetch(`${urls.stock}/v1/models`, { signal: AbortSignal.timeout(5000) })).json()) as { data: Array<{ id: string }> };
          return models.data.some((m) => m.id === 'smollm2');
        },
        150_000,
      );
    }, 300_000);
    afterAll(() => deployment?.stop());

    it('answers ten prompts at temperature 0 with the same text through both frontends, the text llama.cpp generates alone', async () => {
      for (const [i, content] of PROMPTS.entries()) {
        const body = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content }], temperature: 0, max_tokens: MAX_TOKENS };
        for (const frontend of ['ours', 'stock'] as const) {
          const res = await post(urls[frontend], '/v1/chat/completions', body);
          expect(res.status, `${frontend}: ${content}`).toBe(200);
          const answer = ((await res.json()) as Chat).choices[0]!.message.content;
          expect(answer, `${frontend}: ${content}`).toBe(reference[i]);
        }
      }
      expect(reference[0]).toContain('Paris');
    }, 240_000);

    const france = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content: PROMPTS[0] }], temperature: 0, max_tokens: MAX_TOKENS };
    /** A worker gauge from its /metrics (with the worker's dynamo_* labels). */
    const gauge = async (name: string) => {
      const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes('dynamo_component="llama"'));
      return line === undefined ? undefined : Number(line.split(' ').at(-1));
    };

    it.runIf(setup.plane === 'tcp')(
      'streams and answers whole alike, ending at EOS with stop, at max_tokens with length, at a stop string with stop',
      async () => {
        for (const frontend of FRONTENDS) {
          const whole = ((await (await post(urls[frontend], '/v1/chat/completions', france)).json()) as Chat).choices[0]!;
          expect(whole.finish_reason, frontend).toBe('stop');
          const streamed = await chatStream(await post(urls[frontend], '/v1/chat/completions', { ...france, stream: true }));
          expect(streamed, frontend).toEqual({ text: whole.message.content, finishes: ['stop'], done: true });
          const capped = ((await (await post(urls[frontend], '/v1/chat/completions', { ...france, max_tokens: 3 })).json()) as Chat).choices[0]!;
          expect(capped.finish_reason, frontend).toBe('length');
          expect(whole.message.content.startsWith(capped.message.content), frontend).toBe(true);
          const stopped = await chatStream(await post(urls[frontend], '/v1/chat/completions', { ...france, stream: true, stop: ['Paris'] }));
          expect(stopped.finishes, frontend).toEqual(['stop']);
          expect(stopped.text, frontend).toBe(whole.message.content.slice(0, whole.message.content.indexOf('Paris')));
        }
      },
      120_000,
    );

    it.runIf(setup.plane === 'tcp')(
      'frees the sequence of a client that disconnects: the active-sequences gauge returns to 0',
      async () => {
        for (const frontend of FRONTENDS) {
          const abort = new AbortController();
          const res = await post(
            urls[frontend],
            '/v1/chat/completions',
            { ...france, stream: true, max_tokens: 900, min_tokens: 900 },
            { signal: abort.signal },
          );
          const reader = res.body!.getReader();
          await reader.read();
          await waitFor(`${frontend}: the worker to report the request running`, async () => (await gauge('llamacpp:num_requests_running')) === 1, 30_000);
          abort.abort();
          await waitFor(
            `${frontend}: the active-sequences gauge to return to 0 after the disconnect`,
            async () => (await gauge('llamacpp:num_requests_running')) === 0,
            30_000,
          );
        }
        expect(await gauge('llamacpp:num_requests_waiting')).toBe(0);
        expect(await gauge('llamacpp:generation_tokens_total')).toBeGreaterThan(0);
      },
      120_000,
    );

    it.runIf(setup.plane === 'tcp')(
      'runs 16 requests at once on --parallel 4 (12 queued) and answers the 4 beyond the queue with 529',
      async () => {
        for (const frontend of FRONTENDS) {
          const body = { ...france, max_tokens: 24, min_tokens: 24 };
          const responses = await Promise.all(Array.from({ length: 20 }, () => post(urls[frontend], '/v1/chat/completions', body)));
          const statuses = responses.map((r) => r.status);
          const refused = responses.filter((r) => r.status === 529);
          expect(
            statuses.filter((s) => s === 200),
            `${frontend}: ${statuses.join(',')}`,
          ).toHaveLength(16);
          expect(refused, `${frontend}: ${statuses.join(',')}`).toHaveLength(4);
          for (const res of responses.filter((r) => r.status === 200)) expect(((await res.json()) as Chat).choices[0]!.finish_reason).toBe('length');
          for (const res of refused) expect(await res.text(), frontend).toContain('overloaded');
        }
      },
      240_000,
    );

    it.runIf(setup.plane === 'tcp')(
      'holds response_format json_schema at temperature 0.7: 20 of 20 answers parse and validate through ours, 4 of 4 through stock',
      async () => {
        const schema = {
          type: 'object',
          properties: {
            city: { type: 'string', maxLength: 40 },
            country: { type: 'string', maxLength: 40 },
            population: { type: 'integer' },
            capital: { type: 'boolean' },
            languages: { type: 'array', items: { type: 'string', maxLength: 20 }, maxItems: 3 },
          },
          required: ['city', 'country', 'population', 'capital', 'languages'],
          additionalProperties: false,
        };
        const validate = new Ajv().compile(schema);
        const body = {
          model: 'smollm2',
          messages: [SYSTEM, { role: 'user', content: 'Describe a city of your choice.' }],
          temperature: 0.7,
          max_tokens: 200,
          response_format: { type: 'json_schema', json_schema: { name: 'city', schema } },
        };
        const through = (frontend: Frontend, count: number) =>
          Array.from({ length: count }, () => async () => ({
            frontend,
            answer: (await (await post(urls[frontend], '/v1/chat/completions', body)).json()) as Chat,
          }));
        const answers = await pooled([...through('ours', 20), ...through('stock', 4)], 8);
        for (const { frontend, answer } of answers) {
          const content = answer.choices[0]!.message.content;
          expect(answer.choices[0]!.finish_reason, `${frontend}: ${content}`).toBe('stop');
          expect(validate(JSON.parse(content)), `${frontend}: ${content} ${JSON.stringify(validate.errors)}`).toBe(true);
        }
        expect(answers.filter((a) => a.frontend === 'ours')).toHaveLength(20);
      },
      240_000,
    );
  });
}
