// The prefix cache on SmolLM2: what a request reuses, that reuse changes no answer, and that the
// KV events the engine pushes leave a router holding exactly the blocks its sequences hold.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Context, type GenerateChunk, type GenerateRequest } from '@dynamo/backend';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type Token } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { smolLm2 } from '../../../scripts/test-model.mjs';
import { defaultThreads, LlamaCppEngine } from '../src/index.js';
import { fullBlocks, RouterView } from './router-view.js';

const modelPath = await smolLm2();
const tmp = mkdtempSync(join(tmpdir(), 'llama-cpp-prefix-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
process.env.XDG_CACHE_HOME = join(tmp, 'cache');

const BLOCK = 16;
const SYSTEM =
  'You are a careful assistant for a small bakery. You answer questions about bread, pastries, opening hours and prices in one or two short sentences, and you never invent facts you were not given.';
const QUESTIONS = [
  'What time do you open?',
  'Name a pastry you sell.',
  'Describe your sourdough.',
  'How much is a baguette?',
  'Why is rye bread dark?',
  'List two cakes.',
  'Give me a breakfast idea.',
  'Tell me about croissants.',
  'Which bread keeps longest?',
  'Who bakes the bread?',
  'Explain proofing briefly.',
  'Write a short slogan.',
  'Can I order online?',
  'Is there parking?',
  'Do you sell coffee?',
  'Where are you located?',
];

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}
const tokensOf = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids ?? []);
const cachedOf = (chunks: GenerateChunk[]) =>
  (chunks.at(-1)!.completion_usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details?.cached_tokens;
const greedy = (tokenIds: number[], maxTokens: number): GenerateRequest => ({
  token_ids: tokenIds,
  sampling_options: { temperature: 0 },
  stop_conditions: { max_tokens: maxTokens },
});

let pre: Preprocessor;
const encode = async (text: string) => [...(await pre.tokenizer.encodeBatch([text], false))[0]!];
/** The prompt ids of a chat of the system message and `question`, and where the question starts. */
async function chat(question: string): Promise<{ ids: number[]; shared: number }> {
  const { request } = await pre.preprocessChat({
    model: 'x',
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: question },
    ],
  });
  const { request: empty } = await pre.preprocessChat({
    model: 'x',
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: '' },
    ],
  });
  let shared = 0;
  while (request.token_ids[shared] === empty.token_ids[shared]) shared++;
  return { ids: request.token_ids, shared };
}

async function started(options: ConstructorParameters<typeof LlamaCppEngine>[0]) {
  const engine = new LlamaCppEngine(options);
  await engine.start(1n);
  const router = new RouterView();
  for (const source of await engine.kvEventSources()) if (source.kind === 'push') source.onReady(router);
  return { engine, router };
}

beforeAll(async () => {
  const model = await LocalModel.load(modelPath);
  pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
}, 120_000);

describe('LlamaCppEngine prefix cache on SmolLM2-135M', () => {
  it("evaluates only a second turn's new tokens, reports them as cached, and answers as a fresh run split at the same place", async () => {
    const { engine, router } = await started({ modelPath, parallel: 2, contextSize: 1024 });
    try {
      const turn1 = (await chat(QUESTIONS[2]!)).ids;
      const first = await collect(engine.generate(greedy(turn1, 12), new Context()));
      expect(cachedOf(first)).toBe(0);
      // The sequence keeps the prompt and every answer token but the last (sampled, never evaluated).
      const held = engine.kvContents().find((c) => c.tokens.length > 0)!.tokens;
      expect(held).toEqual([...turn1, ...tokensOf(first).slice(0, -1)]);
      expect(router.blocks).toEqual(fullBlocks([{ tokens: held }], BLOCK));

      const next = await encode('<|im_end|>\n<|im_start|>user\nAnd the rye?<|im_end|>\n<|im_start|>assistant\n');
      const turn2 = [...turn1, ...tokensOf(first), ...next];
      const second = await collect(engine.generate(greedy(turn2, 12), new Context()));
      expect(cachedOf(second)).toBe(held.length);

      // node-llama-cpp alone, fed the same tokens in the same pieces: the first prompt in one
      // batch, each evaluated answer token on its own, then the rest of the second prompt.
      const llama = await getLlama({ gpu: false, build: 'never' });
      const model = await llama.loadModel({ modelPath });
      const context = await model.createContext({ contextSize: 1024, threads: defaultThreads() });
      const sequence = context.getSequence();
      await sequence.evaluateWithoutGeneratingNewTokens(turn1 as Token[]);
      for (const token of held.slice(turn1.length)) await sequence.evaluateWithoutGeneratingNewTokens([token as Token]);
      const alone: number[] = [];
      for await (const token of sequence.evaluate(turn2.slice(held.length) as Token[], { temperature: 0, yieldEogToken: true })) {
        if (model.isEogToken(token)) break;
        alone.push(token);
        if (alone.length >= 12) break;
      }
      await context.dispose();
      await model.dispose();
      await llama.dispose();
      expect(tokensOf(second)).toEqual(alone);
      expect(router.problems).toEqual([]);
    } finally {
      await engine.cleanup();
    }
  }, 120_000);

  it('runs 16 requests sharing a prefix at once on 4 sequences, each answered as it is alone', async () => {
    const chats = await Promise.all(QUESTIONS.map(chat));
    // Each question starts with its own token, so a request reuses exactly the shared prefix.
    expect(new Set(chats.map((c) => c.ids[c.shared])).size).toBe(QUESTIONS.length);
    const shared = chats[0]!.shared;
    const warmup = [...chats[0]!.ids.slice(0, shared), ...(await encode('Hello<|im_end|>\n<|im_start|>assistant\n'))];

    const alone = await started({ modelPath, parallel: 4, contextSize: 1024 });
    const answers: number[][] = [];
    try {
      await collect(alone.engine.generate(greedy(warmup, 1), new Context()));
      for (const { ids } of chats) {
        const chunks = await collect(alone.engine.generate(greedy(ids, 10), new Context()));
        expect(cachedOf(chunks)).toBe(shared);
        answers.push(tokensOf(chunks));
      }
    } finally {
      await alone.engine.cleanup();
    }

    const { engine, router } = await started({ modelPath, parallel: 4, contextSize: 1024 });
    try {
      await Promise.all(Array.from({ length: 4 }, () => collect(engine.generate(greedy(warmup, 1), new Context()))));
      const runs = await Promise.all(chats.map(({ ids }) => collect(engine.generate(greedy(ids, 10), new Context()))));
      expect(runs.map(cachedOf)).toEqual(chats.map(() => shared));
      expect(runs.map(tokensOf)).toEqual(answers);
      expect(router.problems).toEqual([]);
      expect(router.blocks).toEqual(fullBlocks(engine.kvContents(), BLOCK));
    } finally {
      await engine.cleanup();
    }
  }, 180_000);

  it('after 200 random requests with cancels and evictions, a router fed its KV events holds exactly the full blocks of its sequences', async () => {
    let seed = 5;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const { engine, router } = await started({ modelPath, parallel: 3, contextSize: 512, maxQueued: 1000 });
    const base = (await chat(QUESTIONS[0]!)).ids;
    try {
      const running: Array<Promise<unknown>> = [];
      let cancelled = 0;
      for (let i = 0; i < 200; i++) {
        // Prompts share a prefix of varying length, then differ, so sequences are cut and reused.
        const prompt = [...base.slice(0, 8 + random(base.length - 8)), ...Array.from({ length: 1 + random(40) }, () => 300 + random(5))];
        const context = new Context();
        const stopAt = random(4) === 0 ? random(3) : -1;
        running.push(
          (async () => {
            let tokens = 0;
            for await (const chunk of engine.generate(greedy(prompt, 1 + random(6)), context)) {
              tokens += chunk.token_ids?.length ?? 0;
              if (stopAt >= 0 && tokens >= stopAt) {
                cancelled++;
                if (random(2) === 0) context.kill();
                else context.stopGenerating();
              }
            }
          })(),
        );
        // Some are stopped before they get a sequence (queued, or not yet evaluated).
        if (stopAt === 0 && random(2) === 0) context.stopGenerating();
        if (random(4) === 0) await Promise.race(running);
      }
      await Promise.all(running);
      expect(cancelled).toBeGreaterThan(10);
      expect(engine.load()).toEqual({ queued: 0, active: 0 });
      expect(router.problems).toEqual([]);
      expect(router.blocks).toEqual(fullBlocks(engine.kvContents(), BLOCK));
      expect(router.removals).toBeGreaterThan(10);

      // clear_kv_blocks empties the sequences, and the router hears of it.
      expect(await engine.engineControl('clear_kv_blocks', {})).toMatchObject({ status: 'success' });
      expect(engine.kvContents().every((c) => c.tokens.length === 0)).toBe(true);
      expect(router.blocks.size).toBe(0);
    } finally {
      await engine.cleanup();
    }
  }, 300_000);

  it('with prefix caching off, evaluates every prompt whole, reports no cached tokens and publishes no KV events', async () => {
    const engine = new LlamaCppEngine({ modelPath, parallel: 1, contextSize: 1024, prefixCaching: false });
    await engine.start(1n);
    try {
      expect(await engine.kvEventSources()).toEqual([]);
      const { ids } = await chat(QUESTIONS[0]!);
      for (let i = 0; i < 2; i++) {
        const chunks = await collect(engine.generate(greedy(ids, 3), new Context()));
        expect(chunks.at(-1)!.completion_usage).toEqual({ prompt_tokens: ids.length, completion_tokens: 3, total_tokens: ids.length + 3 });
      }
      expect(engine.kvContents()).toEqual([{ tokens: [] }]);
    } finally {
      await engine.cleanup();
    }
  }, 60_000);
});
