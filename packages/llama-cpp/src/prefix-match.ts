/** How many leading tokens `a` and `b` share. */
export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const end = Math.min(a.length, b.length);
  let i = 0;
  while (i < end && a[i] === b[i]) i++;
  return i;
}

/** A free sequence as the pick sees it: what its KV cache holds, and when a request last left it. */
export interface Candidate {
  tokens: ArrayLike<number>;
  /** Larger is more recent. */
  lastUsed: number;
}

/** How {@link pickSequence} weighs a match. */
export interface PickOptions {
  /** Tokens per KV block: a shorter match is not worth keeping a sequence for. */
  blockSize: number;
  /** The least share of the prompt a match must cover (llama-server's `--slot-prompt-similarity`). */
  similarity: number;
}

/**
 * The tokens of `held` a request for `prompt` can keep: their common prefix, less the prompt's
 * last token, which is always evaluated again so that the model has logits to sample from.
 */
export function reusableLength(held: ArrayLike<number>, prompt: ArrayLike<number>): number {
  return Math.min(commonPrefixLength(held, prompt), prompt.length - 1);
}

/**
 * Which of `free` a request for `prompt` takes (an index): the one that can keep the most of the
 * prompt, when that is at least a block and `similarity` of the prompt, as llama-server picks its
 * slots; otherwise an empty one, so that no cached conversation is cut for a small gain; otherwise
 * the least recently used. Equal matches go to the least recently used, which keeps the others'
 * caches for the sessions that come back to them.
 */
export function pickSequence(free: readonly Candidate[], prompt: ArrayLike<number>, options: PickOptions): number {
  if (free.length === 0) throw new RangeError('pickSequence needs at least one free sequence');
  let best = -1;
  let bestLength = -1;
  for (const [i, candidate] of free.entries()) {
    const length = reusableLength(candidate.tokens, prompt);
    if (length > bestLength || (length === bestLength && candidate.lastUsed < free[best]!.lastUsed)) {
      best = i;
      bestLength = length;
    }
  }
  if (bestLength >= options.blockSize && bestLength >= options.similarity * prompt.length) return best;
  const empty = free.findIndex((candidate) => candidate.tokens.length === 0);
  if (empty >= 0) return empty;
  let oldest = 0;
  for (const [i, candidate] of free.entries()) if (candidate.lastUsed < free[oldest]!.lastUsed) oldest = i;
  return oldest;
}
