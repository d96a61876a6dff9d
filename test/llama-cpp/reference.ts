// The answers a SmolLM2 worker behind any frontend must give at temperature 0: what node-llama-cpp
// alone generates greedily from the prompt ids our Preprocessor computes.
import { defaultThreads } from '@dynamo/llama-cpp';
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
