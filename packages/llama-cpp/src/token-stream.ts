/** How a generation ended, in Dynamo's finish-reason names. */
export type FinishReason = 'eos' | 'length' | 'stop' | 'cancelled';

/** One of the most likely tokens at a position, as Dynamo's `top_logprobs` lists them. */
export type TopLogprob = {
  rank: number;
  token_id: number;
  token: string;
  logprob: number;
};

/** A token's log probability and the most likely alternatives, when the request asked for them. */
export interface TokenLogprobs {
  logprob: number;
  top: TopLogprob[];
}

/** What the consumer takes at once: every token produced since its last take. */
export interface TokenBatch {
  tokens: number[];
  /** Per token, when the request asked for log probabilities. */
  logprobs?: TokenLogprobs[];
  /** Set on the last batch. */
  finish?: FinishReason;
}

/**
 * Carries tokens from the loop that runs llama.cpp to the generator that yields chunks, so a slow
 * reader gets the tokens made meanwhile in one chunk instead of holding the sequence back.
 */
export class TokenStream {
  #tokens: number[] = [];
  #logprobs: TokenLogprobs[] = [];
  #finish: FinishReason | undefined;
  #error: unknown;
  #failed = false;
  #wake: (() => void) | undefined;
  /** Set when the reader went away: the producer stops at its next token. */
  abandoned = false;

  push(token: number, logprobs?: TokenLogprobs): void {
    this.#tokens.push(token);
    if (logprobs) this.#logprobs.push(logprobs);
    this.#notify();
  }

  /** Adds a batch taken from another stream (its tokens, log probabilities and finish). */
  pushBatch(batch: TokenBatch): void {
    this.#tokens.push(...batch.tokens);
    if (batch.logprobs) this.#logprobs.push(...batch.logprobs);
    if (batch.finish !== undefined) this.#finish = batch.finish;
    this.#notify();
  }

  end(finish: FinishReason): void {
    this.#finish = finish;
    this.#notify();
  }

  fail(error: unknown): void {
    this.#failed = true;
    this.#error = error;
    this.#notify();
  }

  /** The tokens made since the last take; waits while there are none and the stream goes on. */
  async take(): Promise<TokenBatch> {
    while (this.#tokens.length === 0 && this.#finish === undefined && !this.#failed) {
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
    if (this.#failed) throw this.#error;
    const batch: TokenBatch = { tokens: this.#tokens };
    if (this.#logprobs.length > 0) batch.logprobs = this.#logprobs;
    if (this.#finish !== undefined) batch.finish = this.#finish;
    this.#tokens = [];
    this.#logprobs = [];
    return batch;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
