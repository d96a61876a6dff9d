import type { ChoiceDelta } from '@dynamo/llm';

import type { Usage } from './shapes.js';

/** What the usage needs of each worker request: its choices, and its prompt's length when known. */
export interface UsageShare {
  firstIndex: number;
  choices: number;
  countsPrompt: boolean;
  /** Undefined for a Text-input worker, which reports it. */
  promptTokens?: number | undefined;
}

type EngineUsage = NonNullable<ChoiceDelta['usage']> & { prompt_tokens_details?: { cached_tokens?: unknown } };

/**
 * A response's token counts over all its choices: each prompt counted once (however many
 * choices it has), every choice's generated tokens, the cached tokens the engines report, and
 * reasoning tokens when a reasoning parser counted them.
 */
export class UsageCounter {
  readonly #attempts: readonly UsageShare[];
  /** Choice index → the attempt that generates it. */
  readonly #attemptOf = new Map<number, number>();
  readonly #completion = new Map<number, number>();
  /** Attempt → the last usage its engine reported. */
  readonly #engine = new Map<number, EngineUsage>();

  constructor(attempts: readonly UsageShare[]) {
    this.#attempts = attempts;
    attempts.forEach((attempt, at) => {
      for (let i = 0; i < attempt.choices; i++) this.#attemptOf.set(attempt.firstIndex + i, at);
    });
  }

  /** Takes a delta's counts (they are running totals of its choice). */
  add(delta: ChoiceDelta): void {
    this.#completion.set(delta.index, delta.completionTokens);
    if (delta.usage) this.#engine.set(this.#attemptOf.get(delta.index) ?? 0, delta.usage as EngineUsage);
  }

  /** The counts so far. */
  usage(reasoningTokens?: number): Usage {
    let prompt = 0;
    let cached: number | undefined;
    this.#attempts.forEach((attempt, at) => {
      if (!attempt.countsPrompt) return;
      const engine = this.#engine.get(at);
      // A Text-input worker's prompt is counted by the worker.
      prompt += attempt.promptTokens ?? engine?.prompt_tokens ?? 0;
      const hits = engine?.prompt_tokens_details?.cached_tokens;
      if (typeof hits === 'number') cached = (cached ?? 0) + hits;
    });
    // A Text-input worker's report covers its choices; ours are counted per choice.
    let completion = 0;
    const reported = new Set<number>();
    this.#attempts.forEach((attempt, at) => {
      const engine = this.#engine.get(at);
      if (attempt.promptTokens !== undefined || engine === undefined) return;
      completion += engine.completion_tokens;
      reported.add(at);
    });
    for (const [index, count] of this.#completion) if (!reported.has(this.#attemptOf.get(index) ?? 0)) completion += count;
    const usage: Usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    if (cached !== undefined) usage.prompt_tokens_details = { cached_tokens: cached };
    if (reasoningTokens !== undefined) usage.completion_tokens_details = { reasoning_tokens: reasoningTokens };
    return usage;
  }
}
