// Every place this package reaches into node-llama-cpp's private fields, each where no public API
// does the job, with the reason. Each checks the field is as node-llama-cpp 3.21.1 has it and
// throws otherwise, so an upgrade that moves one cannot go unnoticed.
import type { Llama, LlamaContext, LlamaGrammarEvaluationState, LlamaModel, Token, TokenBias } from 'node-llama-cpp';

const pinned = 'this engine is written for node-llama-cpp 3.21.1';

/** The native handle's sampling call, as node-llama-cpp 3.21.1 calls it. */
type NativeContext = { sampleToken: (...args: unknown[]) => Promise<unknown> };

/**
 * Makes `context` sample one sequence at a time.
 *
 * After a decode, the llama.cpp that node-llama-cpp 3.21.1 bundles (v0.4.0) puts the batch's
 * outputs in order lazily, on the first read of the logits, and without a lock; node-llama-cpp
 * samples each sequence of the batch as its own task on the libuv thread pool. Two samples at
 * once can each reorder the same rows, so a sequence reads another's logits. Running them one at
 * a time keeps each on its own logits, and leaves the rest of the pool to everything else: with a
 * pool of one thread instead, a long prompt's evaluation held back the runtime's file-discovery
 * touches past the TTL, and the worker's registration expired mid-request.
 *
 * node-llama-cpp offers no option for it: this wraps the context's native handle (`_ctx`).
 */
export function gateSampling(context: LlamaContext): void {
  const native = (context as unknown as { _ctx?: NativeContext })._ctx;
  if (typeof native?.sampleToken !== 'function') {
    throw new Error(`node-llama-cpp's context has no native sampleToken: ${pinned}`);
  }
  const sample = native.sampleToken.bind(native);
  let last: Promise<unknown> = Promise.resolve();
  // The native method is read-only on the prototype; an own property of the instance takes its place.
  Object.defineProperty(native, 'sampleToken', {
    value: (...args: unknown[]) => {
      const run = last.then(() => sample(...args));
      last = run.catch(() => undefined);
      return run;
    },
  });
}

/**
 * Sets `tokens` to never be drawn under `bias`. `TokenBias.set()` skips end-of-generation tokens
 * on purpose, and `ignore_eos` / `min_tokens` must ban exactly those; the biases are read from this map.
 */
export function banTokens(bias: TokenBias, tokens: readonly Token[]): void {
  const biases = (bias as unknown as { _biases?: Map<Token, number> })._biases;
  if (!(biases instanceof Map)) throw new Error(`node-llama-cpp's TokenBias has no bias map: ${pinned}`);
  for (const token of tokens) biases.set(token, Number.NEGATIVE_INFINITY);
}

/**
 * Frees the weights of the LoRA adapter loaded from `file`. node-llama-cpp keeps an adapter's
 * weights until the model is disposed, and would give a later load of the same path those weights
 * even if the file changed; its cache is keyed by the resolved path.
 */
export async function freeLoraWeights(model: LlamaModel, file: string): Promise<void> {
  const cache = (model as unknown as { _loraAdapters?: Map<string, { dispose(): Promise<void> }> })._loraAdapters;
  if (!(cache instanceof Map)) throw new Error(`node-llama-cpp's model has no LoRA adapter cache: ${pinned}`);
  const weights = cache.get(file);
  cache.delete(file);
  await weights?.dispose();
}

/** The native grammar call, as node-llama-cpp 3.21.1 makes it when a sampled token is accepted. */
type NativeSampler = { acceptGrammarEvaluationStateToken: (state: unknown, token: Token) => void };

/**
 * Advances `state` over `tokens` as if it had sampled them. A decode worker continues an answer
 * whose first tokens the prefill worker sampled under the grammar; node-llama-cpp moves a grammar
 * state only over the tokens it samples itself, not over the tokens it is given to evaluate.
 */
export function acceptGrammarTokens(llama: Llama, state: LlamaGrammarEvaluationState, tokens: readonly Token[]): void {
  const sampler = (llama as unknown as { _bindings?: { AddonSampler?: Partial<NativeSampler> } })._bindings?.AddonSampler;
  const native = (state as unknown as { _state?: unknown })._state;
  if (typeof sampler?.acceptGrammarEvaluationStateToken !== 'function' || native === undefined) {
    throw new Error(`node-llama-cpp has no native grammar token acceptance: ${pinned}`);
  }
  for (const token of tokens) sampler.acceptGrammarEvaluationStateToken(native, token);
}
