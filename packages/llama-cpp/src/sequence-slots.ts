import type { Context } from '@dynamo/backend';

import type { BlockLedger } from './block-ledger.js';
import { commonPrefixLength, pickSequence, reusableLength } from './prefix-match.js';
import { SequencePool } from './sequence-pool.js';

/** What {@link SequenceSlots} needs of a llama.cpp sequence (node-llama-cpp's `LlamaContextSequence`). */
export interface KvSequence {
  /** The tokens its KV cache holds, in order. */
  readonly contextTokens: readonly number[];
  eraseContextTokenRanges(ranges: Array<{ start: number; end: number }>): Promise<void>;
  clearHistory(): Promise<void>;
}

/** How a lane's sequences are shared. */
export interface SlotsOptions {
  /** Requests that may wait for a sequence before new ones are refused. */
  maxQueued: number;
  /** Keep each sequence's tokens after its request for the next prompt that starts alike. */
  prefixCaching: boolean;
  /** Tokens per KV block (the card's `kv_cache_block_size`). */
  blockSize: number;
  /** See {@link PickOptions.similarity}. */
  similarity: number;
  /** Where the sequences' full blocks are counted and reported (with prefix caching). */
  ledger?: BlockLedger;
  /** The LoRA adapter the lane's context applies, which names its blocks apart from the base model's. */
  loraName?: string;
}

/** A request's hold on a sequence. */
export interface Slot<S extends KvSequence> {
  sequence: S;
  prompt: readonly number[];
  /** Leading prompt tokens already in the sequence's KV cache: evaluate only the rest. */
  reused: number;
}

/**
 * One llama.cpp context's sequences, one request each at a time. With prefix caching, a sequence
 * keeps its tokens when its request ends; the next request takes the free sequence that shares the
 * longest prefix with its prompt, the rest of the sequence is erased (its tail only: erasing from
 * the middle would shift the positions after it), and only the prompt's remainder is evaluated.
 */
export class SequenceSlots<S extends KvSequence> {
  readonly #options: SlotsOptions;
  readonly #pool: SequencePool<S>;
  readonly #lastUsed = new Map<S, number>();
  /** Sequences in use, and the prompt length each was taken for. */
  readonly #busy = new Map<S, number>();
  #clock = 0;

  constructor(sequences: readonly S[], options: SlotsOptions) {
    this.#options = options;
    this.#pool = new SequencePool([...sequences], options.maxQueued);
    for (const sequence of sequences) this.#lastUsed.set(sequence, 0);
  }

  /** The LoRA adapter of the lane, if it has one. */
  get loraName(): string | undefined {
    return this.#options.loraName;
  }

  /** Requests waiting for a sequence. */
  get queued(): number {
    return this.#pool.queued;
  }

  /** Sequences in use. */
  get active(): number {
    return this.#busy.size;
  }

  /** KV blocks the requests in use fill with their prompts. */
  get usedBlocks(): number {
    let blocks = 0;
    for (const length of this.#busy.values()) blocks += Math.ceil(length / this.#options.blockSize);
    return blocks;
  }

  /**
   * A sequence for `prompt`, trimmed to the prefix it shares with it; `undefined` when the request
   * was stopped while it waited. Throws when too many requests already wait.
   */
  async acquire(prompt: readonly number[], context: Context): Promise<Slot<S> | undefined> {
    const { prefixCaching, blockSize, similarity } = this.#options;
    const pick = prefixCaching
      ? (free: readonly S[]) =>
          pickSequence(
            free.map((sequence) => ({ tokens: sequence.contextTokens, lastUsed: this.#lastUsed.get(sequence)! })),
            prompt,
            { blockSize, similarity },
          )
      : undefined;
    const sequence = await this.#pool.acquire(context, pick);
    if (sequence === undefined) return undefined;
    this.#busy.set(sequence, prompt.length);
    try {
      const held = sequence.contextTokens;
      let reused = reusableLength(held, prompt);
      if (reused === 0 && held.length > 0) await sequence.clearHistory();
      else if (reused < held.length) await sequence.eraseContextTokenRanges([{ start: reused, end: held.length }]);
      // node-llama-cpp evaluates the sequence again from its start when it cannot cut it (a
      // model that keeps no per-position cache): whatever it holds now is what counts.
      if (sequence.contextTokens.length !== reused) {
        await sequence.clearHistory();
        reused = 0;
      }
      this.#record(sequence);
      return { sequence, prompt, reused };
    } catch (err) {
      await this.release({ sequence, prompt, reused: 0 }, false);
      throw err;
    }
  }

  /**
   * Replaces what the slot's sequence holds with a saved state (`load` restores it), which must
   * hold exactly the slot's prompt: the prompt is then evaluated and nothing of it is left to do.
   * Throws, leaving the sequence empty, when the state holds anything else.
   */
  async loadState(slot: Slot<S>, load: (sequence: S) => Promise<void>): Promise<void> {
    const { sequence, prompt } = slot;
    slot.reused = 0;
    if (sequence.contextTokens.length > 0) await sequence.clearHistory();
    await load(sequence);
    const held = sequence.contextTokens;
    if (held.length !== prompt.length || commonPrefixLength(held, prompt) !== prompt.length) {
      await sequence.clearHistory();
      this.#record(sequence);
      throw new Error(`the loaded KV state holds ${held.length} tokens that are not this request's prompt of ${prompt.length}`);
    }
    slot.reused = prompt.length;
    this.#record(sequence);
  }

  /** The slot's prompt is evaluated: its blocks are reported now, for requests routed meanwhile. */
  evaluated(slot: Slot<S>): void {
    this.#record(slot.sequence);
  }

  /**
   * Gives the slot's sequence back. It keeps its tokens for the next request when prefix caching
   * is on, the request ended well (`keep`) and the sequence still starts with the prompt (a
   * context shift would have cut its beginning); otherwise it is emptied.
   */
  async release(slot: Slot<S>, keep: boolean): Promise<void> {
    const { sequence, prompt } = slot;
    try {
      const held = sequence.contextTokens;
      const intact = commonPrefixLength(held, prompt) === Math.min(held.length, prompt.length);
      if (!(this.#options.prefixCaching && keep && intact) && held.length > 0) await sequence.clearHistory();
    } finally {
      this.#record(sequence);
      this.#busy.delete(sequence);
      this.#lastUsed.set(sequence, ++this.#clock);
      this.#pool.release(sequence);
    }
  }

  /** Empties every free sequence (`clear_kv_blocks`); returns how many held tokens. */
  async clearFree(): Promise<number> {
    let cleared = 0;
    for (const sequence of this.#lastUsed.keys()) {
      if (this.#busy.has(sequence) || sequence.contextTokens.length === 0) continue;
      await sequence.clearHistory();
      this.#record(sequence);
      cleared++;
    }
    return cleared;
  }

  /** What each sequence's KV cache holds now. */
  contents(): number[][] {
    return [...this.#lastUsed.keys()].map((sequence) => [...sequence.contextTokens]);
  }

  #record(sequence: S): void {
    this.#options.ledger?.hold(sequence, sequence.contextTokens, this.#options.loraName);
  }
}
