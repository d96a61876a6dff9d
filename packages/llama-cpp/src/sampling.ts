import type { GenerateRequest } from '@dynamo/backend';
import { type LlamaModel, type Token, TokenBias } from 'node-llama-cpp';

import { banTokens } from './internals.js';
import type { TopLogprob } from './token-stream.js';

/** A request's `sampling_options` value by key, when it is a number. */
export type NumberOption = (key: string) => number | undefined;

/** The request's numeric sampling options. */
export function numberOptions(request: GenerateRequest): NumberOption {
  const sampling = request.sampling_options ?? {};
  return (key) => (typeof sampling[key] === 'number' ? (sampling[key] as number) : undefined);
}

/**
 * node-llama-cpp's sampler settings for a request's `sampling_options`, with OpenAI's defaults
 * where the request is silent (temperature 1, top_p 1, no top_k or min_p; node-llama-cpp's own are
 * greedy, 0.95 and 40). llama.cpp's greedy path ignores token biases, so a greedy request that
 * must not end early (`ignore_eos`, `min_tokens`) samples with top_k 1 instead: the same argmax,
 * over the biased logits.
 */
export function samplerOptions(num: NumberOption, biased: boolean) {
  const temperature = num('temperature') ?? 1;
  const seed = num('seed');
  if (temperature === 0) return biased ? { temperature: 1, topK: 1 } : { temperature: 0 };
  const topK = num('top_k');
  return {
    temperature,
    topP: num('top_p') ?? 1,
    // Dynamo's "no top_k" is -1 (or 0); node-llama-cpp disables it with 0.
    topK: topK !== undefined && topK > 0 ? topK : 0,
    minP: num('min_p') ?? 0,
    ...(seed !== undefined && { seed }),
  };
}

/** node-llama-cpp's repeat penalty for the request's penalties over `generated` tokens, if it sets any. */
export function repeatPenalty(num: NumberOption, generated: () => Token[]) {
  const [penalty, frequencyPenalty, presencePenalty] = [num('repetition_penalty'), num('frequency_penalty'), num('presence_penalty')];
  if (penalty === undefined && frequencyPenalty === undefined && presencePenalty === undefined) return {};
  return {
    repeatPenalty: {
      punishTokens: generated,
      ...(penalty !== undefined && { penalty }),
      ...(frequencyPenalty !== undefined && { frequencyPenalty }),
      ...(presencePenalty !== undefined && { presencePenalty }),
    },
  };
}

/** A bias that bans the model's end-of-generation tokens (for `ignore_eos` and `min_tokens`). */
export function eogBan(model: LlamaModel): TokenBias {
  const ban = new TokenBias(model.tokenizer);
  banTokens(
    ban,
    [model.tokens.eos, model.tokens.eot].filter((token): token is Token => token !== null),
  );
  return ban;
}

/** How many alternatives per token the request wants log probabilities for (`output_options.logprobs`), if any. */
export function logprobsWanted(request: GenerateRequest): number | undefined {
  const wanted = request.output_options?.logprobs;
  return typeof wanted === 'number' && Number.isInteger(wanted) && wanted >= 0 ? wanted : undefined;
}

/** The chosen token's log probability and the `top` most likely tokens', from the step's distribution (sorted, most likely first). */
export function tokenLogprobs(model: LlamaModel, token: Token, probabilities: Map<Token, number>, top: number) {
  const best: TopLogprob[] = [];
  for (const [id, probability] of probabilities) {
    if (best.length >= top) break;
    best.push({ rank: best.length + 1, token_id: id, token: model.detokenize([id], true), logprob: Math.log(probability) });
  }
  return { logprob: Math.log(probabilities.get(token) ?? 0), top: best };
}
