/** How a generation ended, in Dynamo's finish-reason names. */
export type FinishReason = 'eos' | 'length' | 'stop' | 'cancelled';

/** What the consumer takes at once: every token produced since its last take. */
export interface TokenBatch {
  tokens: number[];
  /** Set on the last batch. */
  finish?: FinishReason;
}

/**
 * Carries tokens from the loop that runs llama.cpp to the generator that yields chunks, so a slow
 * reader gets the tokens made meanwhile in one chunk instead of holding the sequence back.
 */
export class TokenStream {
  #tokens: number[] = [];
  #finish: FinishReason | undefined;
  #error: unknown;
  #failed = false;
  #wake: (() => void) | undefined;
  /** Set when the reader went away: the producer stops at its next token. */
  abandoned = false;

  push(token: number): void {
    this.#tokens.push(token);
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
    const tokens = this.#tokens;
    this.#tokens = [];
    return this.#finish === undefined ? { tokens } : { tokens, finish: this.#finish };
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
