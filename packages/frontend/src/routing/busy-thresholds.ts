import { InvalidArgument } from '@dynamo/runtime';

/**
 * When a worker counts as busy, with stock 1.6.1's names (each unset = that check off):
 * `--active-decode-blocks-threshold` (fraction of its KV blocks in use),
 * `--active-prefill-tokens-threshold` (prompt tokens waiting for prefill) and
 * `--active-prefill-tokens-threshold-frac` (the same, as a fraction of its `max_num_batched_tokens`).
 */
export interface BusyThresholdValues {
  active_decode_blocks_threshold: number | null;
  active_prefill_tokens_threshold: number | null;
  active_prefill_tokens_threshold_frac: number | null;
}

/** The thresholds a router applies to one worker: the two prefill ones folded into one token count. */
export interface EffectiveThresholds {
  activeDecodeBlocksThreshold: number | null;
  activePrefillTokensThreshold: number | null;
}

/** Stock's `max_num_batched_tokens` when a card has none. */
export const DEFAULT_MAX_BATCHED_TOKENS = 10_000_000;

/** Checks one update's values; throws `InvalidArgument` with stock's wording for an out-of-range one. */
export function checkThresholds(values: Partial<BusyThresholdValues>): void {
  const decode = values.active_decode_blocks_threshold;
  if (decode != null && !(Number.isFinite(decode) && decode >= 0 && decode <= 1)) {
    throw new InvalidArgument(`active_decode_blocks_threshold must be between 0.0 and 1.0, got ${decode}`);
  }
  const frac = values.active_prefill_tokens_threshold_frac;
  if (frac != null && !(Number.isFinite(frac) && frac >= 0)) {
    throw new InvalidArgument(`active_prefill_tokens_threshold_frac must be a finite value greater than or equal to 0.0, got ${frac}`);
  }
  const tokens = values.active_prefill_tokens_threshold;
  if (tokens != null && !(Number.isSafeInteger(tokens) && tokens >= 0)) {
    throw new InvalidArgument(`active_prefill_tokens_threshold must be a whole number of tokens, got ${tokens}`);
  }
}

/**
 * One model's busy thresholds, changeable while it is served (`POST /busy_threshold`). They are
 * read at each routing decision, so a change applies to the next request (stock applies it at
 * the workers' next load report). As in stock, a change sets the values it gives and keeps the
 * others; a threshold cannot be unset again at run time.
 */
export class BusyThresholds {
  #values: BusyThresholdValues;
  readonly #listeners = new Set<() => void>();

  constructor(initial: Partial<BusyThresholdValues> = {}) {
    checkThresholds(initial);
    this.#values = {
      active_decode_blocks_threshold: initial.active_decode_blocks_threshold ?? null,
      active_prefill_tokens_threshold: initial.active_prefill_tokens_threshold ?? null,
      active_prefill_tokens_threshold_frac: initial.active_prefill_tokens_threshold_frac ?? null,
    };
  }

  /** The current values (null: unset). */
  get values(): Readonly<BusyThresholdValues> {
    return this.#values;
  }

  /** Whether any check is on. */
  get enabled(): boolean {
    const v = this.#values;
    return v.active_decode_blocks_threshold !== null || v.active_prefill_tokens_threshold !== null || v.active_prefill_tokens_threshold_frac !== null;
  }

  /** Sets the given (non-null) values; throws `InvalidArgument` before changing any if one is out of range. */
  update(values: Partial<BusyThresholdValues>): void {
    checkThresholds(values);
    const next = { ...this.#values };
    for (const key of Object.keys(next) as (keyof BusyThresholdValues)[]) {
      const value = values[key];
      if (value != null) next[key] = value;
    }
    this.#values = next;
    for (const listener of this.#listeners) listener();
  }

  /** Calls `listener` after each update; returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * The thresholds for a worker of `maxBatchedTokens`: the prefill one is the lower of the
   * absolute count and the fraction of its batch (busy past either one).
   */
  effective(maxBatchedTokens: number | null | undefined): EffectiveThresholds {
    const v = this.#values;
    const fromFrac =
      v.active_prefill_tokens_threshold_frac === null
        ? null
        : Math.floor(v.active_prefill_tokens_threshold_frac * (maxBatchedTokens ?? DEFAULT_MAX_BATCHED_TOKENS));
    const tokens =
      v.active_prefill_tokens_threshold === null
        ? fromFrac
        : fromFrac === null
          ? v.active_prefill_tokens_threshold
          : Math.min(fromFrac, v.active_prefill_tokens_threshold);
    return { activeDecodeBlocksThreshold: v.active_decode_blocks_threshold, activePrefillTokensThreshold: tokens };
  }
}
