import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Context, type GenerateChunk, type GenerateRequest, InvalidArgument } from '@dynamo/backend';
import { conformanceSuite } from '@dynamo/backend/vitest';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type Token } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { smolLm2 } from '../../../scripts/test-model.mjs';
import { defaultThreads, LlamaCppEngine } from '../src/index.js';

const modelPath = await smolLm2();
const tmp = mkdtempSync(join(tmpdir(), 'llama-cpp-engine-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
// The GGUF's Hugging Face files (what a frontend preprocesses with) go under the test's tmp.
process.env.XDG_CACHE_HOME = join(tmp, 'cache');

// A small model on a 2-core machine: every check finishes in seconds, a hung one fails in 2 minutes.
conformanceSuite('LlamaCppEngine on SmolLM2-135M', () => new LlamaCppEngine({ modelPath, parallel: 4, contextSize: 1024 }), { checkTimeoutMs: 120_000 });

describe('LlamaCppEngine.fromArgs', () => {
  it('refuses the encode role, naming the flag, and the prefill and decode roles for an embedding worker', async () => {
    const encode = LlamaCppEngine.fromArgs(['--model-path', modelPath, '--disaggregation-mode', 'encode'], {});
    await expect(encode).rejects.toBeInstanceOf(InvalidArgument);
    await expect(encode).rejects.toThrow('--disaggregation-mode encode: dynamo-llama-cpp has no multimodal encoder (agg, prefill or decode)');
    await expect(LlamaCppEngine.fromArgs(['--model-path', modelPath, '--embedding', '--disaggregation-mode', 'prefill'], {})).rejects.toThrow(
      '--embedding with --disaggregation-mode prefill: an embedding worker has no prefill or decode to split',
    );
  });
});

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const tokensOf = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids ?? []);

describe('LlamaCppEngine on SmolLM2-135M', () => {
  const engine = new LlamaCppEngine({ modelPath, parallel: 4, contextSize: 1024 });
  let pre: Preprocessor;
  let france: number[];

  beforeAll(async () => {
    await engine.start(1n);
    const model = await LocalModel.load(modelPath);
    pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
    const { request } = await pre.preprocessChat({
      model: 'x',
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'What is the capital of France?' },
      ],
    });
    france = request.token_ids;
  }, 120_000);
  afterAll(() => engine.cleanup());

  const greedy = (tokenIds: number[], extra: Partial<GenerateRequest> = {}): GenerateRequest => ({
    token_ids: tokenIds,
    sampling_options: { temperature: 0 },
    ...extra,
  });

  it('answers "What is the capital of France?" with Paris at temperature 0, ending at EOS, with the ids llama.cpp gives alone', async () => {
    const chunks = await collect(engine.generate(greedy(france), new Context()));
    const ids = tokensOf(chunks);
    expect(pre.tokenizer.decode(Uint32Array.from(ids), true)).toContain('Paris');
    const last = chunks.at(-1)!;
    expect(last.finish_reason).toBe('eos');
    expect(last.completion_usage).toMatchObject({ prompt_tokens: france.length, completion_tokens: ids.length });

    // node-llama-cpp on its own, same prompt ids, greedy.
    const llama = await getLlama({ gpu: false, build: 'never' });
    const model = await llama.loadModel({ modelPath });
    // Its default thread count oversubscribes small machines (seconds per token on 2 cores).
    const context = await model.createContext({ contextSize: 1024, threads: defaultThreads() });
    const alone: number[] = [];
    for await (const token of context.getSequence().evaluate(france as Token[], { temperature: 0 })) alone.push(token);
    await context.dispose();
    await model.dispose();
    await llama.dispose();
    expect(ids).toEqual(alone);
  }, 120_000);

  it("returns each token's log probability and the top 3 alternatives for a chat request's logprobs: true, top_logprobs: 3, from the model's distribution", async () => {
    // What a frontend sends the worker for the OpenAI fields.
    const { request } = await pre.preprocessChat({
      model: engine.modelName,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'What is the capital of France?' },
      ],
      logprobs: true,
      top_logprobs: 3,
      temperature: 0,
      max_tokens: 4,
    });
    expect(request.output_options).toMatchObject({ logprobs: 3 });
    const chunks = await collect(engine.generate(request, new Context()));
    const ids = tokensOf(chunks);
    const logProbs = chunks.flatMap((c) => (c.log_probs as number[] | undefined) ?? []);
    const top = chunks.flatMap((c) => (c.top_logprobs as Array<Array<{ rank: number; token_id: number; token: string; logprob: number }>> | undefined) ?? []);
    expect(logProbs).toHaveLength(ids.length);
    expect(top).toHaveLength(ids.length);
    ids.forEach((id, i) => {
      expect(top[i]!.map((t) => t.rank)).toEqual([1, 2, 3]);
      // Greedy: the chosen token is the most likely one, and the list is sorted.
      expect(top[i]![0]).toMatchObject({ token_id: id, logprob: logProbs[i], token: pre.tokenizer.decode(Uint32Array.of(id), false) });
      expect(top[i]![0]!.logprob).toBeGreaterThanOrEqual(top[i]![1]!.logprob);
      expect(logProbs[i]).toBeLessThanOrEqual(0);
    });
    // "The" is a close first (p ≈ 0.19) over "La" and "Le" for this prompt.
    expect(Math.exp(logProbs[0]!)).toBeGreaterThan(0.1);
    expect(Math.exp(logProbs[0]!)).toBeLessThan(0.3);
    // Without the option there are none.
    const plain = await collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: 2 } }), new Context()));
    expect(plain.some((c) => 'log_probs' in c || 'top_logprobs' in c)).toBe(false);
  }, 60_000);

  it('stops at max_tokens with length, and at a stop token id with stop', async () => {
    const capped = await collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: 3 } }), new Context()));
    expect(tokensOf(capped)).toHaveLength(3);
    expect(capped.at(-1)!.finish_reason).toBe('length');

    const second = tokensOf(capped)[1]!;
    const stopped = await collect(engine.generate(greedy(france, { stop_conditions: { stop_token_ids: [second] } }), new Context()));
    expect(tokensOf(stopped)).toEqual(tokensOf(capped).slice(0, 2));
    expect(stopped.at(-1)!.finish_reason).toBe('stop');
  }, 60_000);

  it('keeps generating past EOS with ignore_eos, and not below min_tokens', async () => {
    const answer = tokensOf(await collect(engine.generate(greedy(france), new Context())));
    const longer = await collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: answer.length + 5, ignore_eos: true } }), new Context()));
    expect(tokensOf(longer)).toHaveLength(answer.length + 5);
    expect(longer.at(-1)!.finish_reason).toBe('length');
    const atLeast = await collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: 64, min_tokens: answer.length + 2 } }), new Context()));
    expect(tokensOf(atLeast).length).toBeGreaterThanOrEqual(answer.length + 2);
  }, 60_000);

  it('ends a stopped request with cancelled and frees its sequence for the next one', async () => {
    const context = new Context();
    const chunks: GenerateChunk[] = [];
    for await (const chunk of engine.generate(greedy(france, { stop_conditions: { max_tokens: 500, ignore_eos: true } }), context)) {
      chunks.push(chunk);
      if (tokensOf(chunks).length >= 2) context.stopGenerating();
    }
    expect(chunks.at(-1)!.finish_reason).toBe('cancelled');
    expect(engine.load()).toEqual({ queued: 0, active: 0 });
  }, 60_000);

  it('runs 16 requests on 4 sequences: all complete, each with the answer it gets alone', async () => {
    const alone = tokensOf(await collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: 5 } }), new Context())));
    const runs = await Promise.all(
      Array.from({ length: 16 }, () => collect(engine.generate(greedy(france, { stop_conditions: { max_tokens: 5 } }), new Context()))),
    );
    for (const chunks of runs) {
      expect(tokensOf(chunks)).toEqual(alone);
      expect(chunks.at(-1)!.finish_reason).toBe('length');
    }
    expect(engine.load()).toEqual({ queued: 0, active: 0 });
  }, 120_000);

  it('runs different prompts at once, one still reading its prompt while others generate, each with the answer it gets alone', async () => {
    // The vitest process has the default libuv pool (4 threads): samples of parallel sequences
    // would race on llama.cpp's lazily reordered logits if they ran at once.
    const questions = ['What is the capital of France?', 'Name three colours.', 'Describe the sea in one sentence.', 'How many legs does a spider have?'];
    const prompts = await Promise.all(
      questions.map(
        async (content) =>
          (
            await pre.preprocessChat({
              model: 'x',
              messages: [
                { role: 'system', content: 'You are a helpful assistant.' },
                { role: 'user', content },
              ],
            })
          ).request.token_ids,
      ),
    );
    const ask = (ids: number[]) => greedy(ids, { stop_conditions: { max_tokens: 24, ignore_eos: true } });
    const alone: number[][] = [];
    for (const ids of prompts) alone.push(tokensOf(await collect(engine.generate(ask(ids), new Context()))));
    // Each request starts once the one before it has its first token.
    const runs: Array<Promise<GenerateChunk[]>> = [];
    for (const ids of prompts) {
      const chunks: GenerateChunk[] = [];
      let first!: () => void;
      const started = new Promise<void>((resolve) => (first = resolve));
      runs.push(
        (async () => {
          for await (const chunk of engine.generate(ask(ids), new Context())) {
            chunks.push(chunk);
            first();
          }
          return chunks;
        })(),
      );
      await started;
    }
    expect((await Promise.all(runs)).map(tokensOf)).toEqual(alone);
  }, 120_000);

  it('refuses a prompt longer than the context, naming both lengths, and an id outside the vocabulary', async () => {
    const long = new Array<number>(1024).fill(260);
    await expect(collect(engine.generate(greedy(long), new Context()))).rejects.toThrow(
      new InvalidArgument('the prompt has 1024 tokens; the context holds 1024 (prompt and answer together, --context-size)'),
    );
    await expect(collect(engine.generate(greedy([1, 49152]), new Context()))).rejects.toThrow(/token id 49152 is outside the model's vocabulary of 49152/);
  });
});

describe('LlamaCppEngine start()', () => {
  it('names a missing file, a file that is not GGUF and a truncated GGUF with llama.cpp reason', async () => {
    const missing = join(tmp, 'missing.gguf');
    await expect(new LlamaCppEngine({ modelPath: missing }).start(1n)).rejects.toThrow(`model file ${missing}: does not exist`);
    const text = join(tmp, 'notes.gguf');
    writeFileSync(text, 'just some text, not a model\n');
    await expect(new LlamaCppEngine({ modelPath: text }).start(1n)).rejects.toThrow(new RegExp(`llama.cpp could not load ${text}: .+`));
    const truncated = join(tmp, 'truncated.gguf');
    writeFileSync(truncated, (await readFile(modelPath)).subarray(0, 1 << 20));
    await expect(new LlamaCppEngine({ modelPath: truncated }).start(1n)).rejects.toThrow(new RegExp(`llama.cpp could not load ${truncated}: .+`));
  }, 60_000);
});
