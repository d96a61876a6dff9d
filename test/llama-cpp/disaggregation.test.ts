// SmolLM2 served disaggregated: dynamo-llama-cpp prefill and decode workers, the prompt's KV state
// pulled by the decode worker from the prefill worker over the request plane, behind our
// dynamo-frontend and the stock Dynamo 1.6.1 frontend at once, on file + tcp and on etcd + NATS. At
// temperature 0 both frontends answer with the text node-llama-cpp generates alone from the prompt
// ids our Preprocessor computes, which is what the aggregated worker answers (pipeline.test.ts).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { counter } from '@dynamo/testing/interop-stack';
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
  `Summarize in one line: ${'The river runs past the old mill and under the stone bridge. '.repeat(12)}`,
];
const MAX_TOKENS = 24;
type Chat = { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { completion_tokens: number } };
type Frontend = 'ours' | 'stock';

const reference = 'skip' in stock ? [] : await referenceAnswers(modelPath, PROMPTS, MAX_TOKENS);

for (const setup of SETUPS) {
  describe.skipIf('skip' in stock)(`SmolLM2 on prefill and decode workers behind both frontends, ${setup.name}`, () => {
    let deployment: Deployment;
    const urls: Record<Frontend, string> = { ours: '', stock: '' };
    let decodeMetrics: string;
    let ours: Child;
    let decodeChild: Child;
    const prefills: Child[] = [];
    const worker = ['--model-path', modelPath, '--model-name', 'smollm2', '--parallel', '2', '--context-size', '1024', '--threads', '1'];

    const startPrefill = () => prefills.push(deployment.nodeProcess([llamaCli, ...worker, '--disaggregation-mode', 'prefill', '--component', 'prefill']));

    beforeAll(async () => {
      deployment = await Deployment.start(setup);
      const systemPort = await freePort();
      decodeMetrics = `http://127.0.0.1:${systemPort}/metrics`;
      startPrefill();
      decodeChild = deployment.nodeProcess([llamaCli, ...worker, '--disaggregation-mode', 'decode', '--component', 'decode'], {
        DYN_SYSTEM_PORT: String(systemPort),
      });
      const frontend = await deployment.frontend(['--migration-limit', '2']);
      [ours, urls.ours] = [frontend.child, frontend.url];
      urls.stock = (await deployment.stockFrontend((stock as { python: string }).python)).url;
      await waitForModel(urls.ours, 'smollm2', 'decode', 1, 120_000);
      // The stock frontend serves a decode model only once its prefill workers are there (the card's `needs`).
      await waitFor(
        'the stock frontend to answer smollm2 through the prefill and decode workers',
        async () => {
          const res = await post(
            urls.stock,
            '/v1/chat/completions',
            { model: 'smollm2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 },
            { signal: AbortSignal.timeout(20_000) },
          ).catch(() => undefined);
          return res?.status === 200;
        },
        150_000,
      );
    }, 300_000);
    afterAll(() => deployment?.stop());

    it("answers at temperature 0 through both frontends with the aggregated text, each prompt's KV state pulled from the prefill worker", async () => {
      const before = await counter(decodeMetrics, 'dynamo_component_kv_transfer_bytes_count');
      for (const [i, content] of PROMPTS.entries()) {
        const body = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content }], temperature: 0, max_tokens: MAX_TOKENS };
        for (const frontend of ['ours', 'stock'] as const) {
          const res = await post(urls[frontend], '/v1/chat/completions', body);
          expect(res.status, `${frontend}: ${content}`).toBe(200);
          const answer = (await res.json()) as Chat;
          expect(answer.choices[0]!.message.content, `${frontend}: ${content}`).toBe(reference[i]);
        }
      }
      expect(reference[0]).toContain('Paris');
      // Every answer of a prompt the prefill did not end went through a transfer.
      expect(await counter(decodeMetrics, 'dynamo_component_kv_transfer_bytes_count')).toBe(before + 2 * PROMPTS.length);
      expect(await counter(decodeMetrics, 'llamacpp:kv_transfer_fallbacks_total')).toBe(0);
    }, 240_000);

    it.runIf(setup.plane === 'tcp')(
      'streams through our frontend the text it answers whole',
      async () => {
        const body = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content: PROMPTS[0] }], temperature: 0, max_tokens: MAX_TOKENS, stream: true };
        const text = (await (await post(urls.ours, '/v1/chat/completions', body)).text())
          .split('\n\n')
          .filter((block) => block.startsWith('data: {'))
          .map((block) => (JSON.parse(block.slice(6)) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
          .join('');
        expect(text).toBe(reference[0]);
      },
      60_000,
    );

    it.runIf(setup.plane === 'tcp')(
      'keeps answering exactly through our frontend when a prefill worker is killed: its requests are prefilled on the other',
      async () => {
        startPrefill();
        await waitFor(
          'two prefill workers in discovery',
          async () =>
            ((await (await fetch(`${urls.ours}/health`)).json()) as { instances: Array<{ component: string; endpoint: string }> }).instances.filter(
              (i) => i.component === 'prefill' && i.endpoint === 'generate',
            ).length === 2,
          120_000,
        );
        prefills[0]!.kill();
        await prefills[0]!.exited;
        const body = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content: PROMPTS[1] }], temperature: 0, max_tokens: MAX_TOKENS };
        for (let i = 0; i < 4; i++) {
          const res = await post(urls.ours, '/v1/chat/completions', body);
          expect(res.status).toBe(200);
          expect(((await res.json()) as Chat).choices[0]!.message.content).toBe(reference[1]);
        }
        // The killed worker stays in file discovery for its TTL (10 s): requests routed to it went on to the other.
        expect(ours.stderr()).toContain('prefill worker failed; the request goes on without it');
      },
      180_000,
    );

    it.runIf(setup.plane === 'tcp')(
      'finishes a request through our frontend when its decode worker is killed mid-answer: it migrates, prefilled again',
      async () => {
        const port = await freePort();
        const second = {
          child: deployment.nodeProcess([llamaCli, ...worker, '--disaggregation-mode', 'decode', '--component', 'decode'], { DYN_SYSTEM_PORT: String(port) }),
          metrics: `http://127.0.0.1:${port}/metrics`,
        };
        const first = { child: decodeChild, metrics: decodeMetrics };
        await waitForModel(urls.ours, 'smollm2', 'decode', 2, 120_000);
        const running = async (metrics: string) => counter(metrics, 'llamacpp:num_requests_running').catch(() => 0);
        const body = { model: 'smollm2', messages: [SYSTEM, { role: 'user', content: PROMPTS[2] }], temperature: 0, max_tokens: 160, min_tokens: 160 };
        const answer = post(urls.ours, '/v1/chat/completions', body);
        let victim: typeof first | undefined;
        await waitFor(
          'a decode worker to run the request',
          async () => {
            for (const decode of [first, second]) if ((await running(decode.metrics)) === 1) victim = decode;
            return victim !== undefined;
          },
          60_000,
        );
        victim!.child.kill();
        const res = await answer;
        expect(res.status).toBe(200);
        const whole = (await res.json()) as Chat;
        expect(whole.choices[0]!.finish_reason).toBe('length');
        expect(whole.usage.completion_tokens).toBe(160);
        expect(ours.stderr()).toContain('worker failed mid-request; migrating');
      },
      180_000,
    );
  });
}
