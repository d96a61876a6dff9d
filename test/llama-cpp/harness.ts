// What the SmolLM2 pipeline tests share: the answers a worker behind any frontend must give at
// temperature 0 (what node-llama-cpp alone generates greedily from the prompt ids our Preprocessor
// computes), and the stock frontend beside ours.
import { defaultThreads } from '@dynamo/llama-cpp';
import type { Deployment, Setup } from '@dynamo/testing/frontend-stack';
import { freePort } from '@dynamo/testing/free-port';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type Token } from 'node-llama-cpp';

/** The system message every reference chat starts with. */
export const SYSTEM = { role: 'system', content: 'You are a helpful assistant.' };

/** The text of the first `maxTokens` tokens node-llama-cpp draws greedily for each user message (after {@link SYSTEM}). */
export async function referenceAnswers(modelPath: string, prompts: readonly string[], maxTokens: number): Promise<string[]> {
  const local = await LocalModel.load(modelPath);
  const pre = await Preprocessor.create(local, buildCard(local, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
  const llama = await getLlama({ gpu: false, build: 'never' });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ contextSize: 1024, threads: defaultThreads() });
  const sequence = context.getSequence();
  const answers: string[] = [];
  for (const content of prompts) {
    const { request } = await pre.preprocessChat({ model: 'smollm2', messages: [SYSTEM, { role: 'user', content }] });
    const ids: number[] = [];
    for await (const token of sequence.evaluate(request.token_ids as Token[], { temperature: 0 })) {
      ids.push(token);
      if (ids.length >= maxTokens) break;
    }
    await sequence.clearHistory();
    answers.push(pre.tokenizer.decode(Uint32Array.from(ids), true));
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return answers;
}

/** Starts the stock 1.6.1 frontend in `deployment` (its discovery and request plane); returns its URL. */
export async function startStockFrontend(deployment: Deployment, setup: Setup, python: string): Promise<string> {
  const port = await freePort();
  deployment.stockProcess(python, [
    '-m',
    'dynamo.frontend',
    '--http-host',
    '127.0.0.1',
    '--http-port',
    String(port),
    '--discovery-backend',
    setup.discovery,
    '--request-plane',
    setup.plane,
  ]);
  return `http://127.0.0.1:${port}`;
}
