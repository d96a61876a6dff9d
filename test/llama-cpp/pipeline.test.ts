// SmolLM2 through the whole pipeline: dynamo-llama-cpp behind our dynamo-frontend and the stock
// Dynamo 1.6.1 frontend at once, on file + tcp and on etcd + NATS. At temperature 0 both frontends
// answer each prompt with the text of the ids node-llama-cpp generates alone from the prompt ids our
// Preprocessor computes (the worker-level test compares the ids themselves).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { defaultThreads } from '@dynamo/llama-cpp';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type Token } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Deployment, post, SETUPS, waitForModel } from '../../packages/frontend/test/support/stack.js';
import { freePort, waitFor } from '../../packages/runtime/test/harness/free-port.js';
import { stockPython } from '../../packages/runtime/test/harness/stock-dynamo.js';
import { smolLm2 } from '../../scripts/test-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const llamaCli = join(here, '..', 'node_modules', '@dynamo', 'llama-cpp', 'dist', 'cli.cjs');
const modelPath = await smolLm2();
const stock = stockPython();
const system = { role: 'system', content: 'You are a helpful assistant.' };
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

/** What node-llama-cpp alone generates greedily from the same prompt ids, as text. */
async function referenceAnswers(pre: Preprocessor): Promise<string[]> {
  const llama = await getLlama({ gpu: false, build: 'never' });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ contextSize: 1024, threads: defaultThreads() });
  const sequence = context.getSequence();
  const answers: string[] = [];
  for (const content of PROMPTS) {
    const { request } = await pre.preprocessChat({ model: 'smollm2', messages: [system, { role: 'user', content }] });
    const ids: number[] = [];
    for await (const token of sequence.evaluate(request.token_ids as Token[], { temperature: 0 })) {
      ids.push(token);
      if (ids.length >= MAX_TOKENS) break;
    }
    await sequence.clearHistory();
    answers.push(pre.tokenizer.decode(Uint32Array.from(ids), true));
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return answers;
}

let pre: Preprocessor;
let reference: string[];
beforeAll(async () => {
  const model = await LocalModel.load(modelPath);
  pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
  reference = await referenceAnswers(pre);
}, 120_000);

for (const setup of SETUPS) {
  describe.skipIf('skip' in stock)(`SmolLM2 behind both frontends, ${setup.name}`, () => {
    let deployment: Deployment;
    const urls: Record<'ours' | 'stock', string> = { ours: '', stock: '' };

    beforeAll(async () => {
      deployment = await Deployment.start(setup);
      deployment.nodeProcess([llamaCli, '--model-path', modelPath, '--model-name', 'smollm2', '--parallel', '2', '--context-size', '1024']);
      urls.ours = (await deployment.frontend()).url;
      const port = await freePort();
      urls.stock = `http://127.0.0.1:${port}`;
      const discovery = setup.discovery === 'etcd' ? ['--discovery-backend', 'etcd'] : ['--discovery-backend', 'file'];
      deployment.stockProcess((stock as { python: string }).python, ['-m', 'dynamo.frontend', '--http-host', '127.0.0.1', '--http-port', String(port), ...discovery, '--request-plane', setup.plane]);
      await waitForModel(urls.ours, 'smollm2', 'llama', 1, 120_000);
      await waitFor('the stock frontend to list smollm2', async () => {
        const models = (await (await fetch(`${urls.stock}/v1/models`, { signal: AbortSignal.timeout(5000) })).json()) as { data: Array<{ id: string }> };
        return models.data.some((m) => m.id === 'smollm2');
      }, 150_000);
    }, 300_000);
    afterAll(() => deployment?.stop());

    it('answers ten prompts at temperature 0 with the same text through both frontends, the text llama.cpp generates alone', async () => {
      for (const [i, content] of PROMPTS.entries()) {
        const body = { model: 'smollm2', messages: [system, { role: 'user', content }], temperature: 0, max_tokens: MAX_TOKENS };
        for (const frontend of ['ours', 'stock'] as const) {
          const res = await post(urls[frontend], '/v1/chat/completions', body);
          expect(res.status, `${frontend}: ${content}`).toBe(200);
          const answer = ((await res.json()) as Chat).choices[0]!.message.content;
          expect(answer, `${frontend}: ${content}`).toBe(reference[i]);
        }
      }
      expect(reference[0]).toContain('Paris');
    }, 240_000);
  });
}
