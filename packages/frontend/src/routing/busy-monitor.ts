import { decodeActiveLoad } from '@dynamo/core';
import type { ModelDeploymentCard } from '@dynamo/llm';
import type { DistributedRuntime, EventScope, EventSubscriber, Log } from '@dynamo/runtime';

import type { BusyThresholds } from './busy-thresholds.js';

/** How long a worker that answered "overloaded" is left out, unless it reports its load sooner (stock's 1 s). */
export const OVERLOAD_COOLDOWN_MS = 1_000;

/** One worker rank's last report of each signal (`kv_metrics`). */
interface RankLoad {
  kvUsedBlocks?: number;
  activeDecodeBlocks?: number;
  activePrefillTokens?: number;
}

/**
 * Which workers of one model are busy, as stock 1.6.1's worker monitor decides in every router
 * mode: each worker rank's last load report (`kv_metrics`) against the model's busy thresholds.
 * A rank is busy when its KV blocks in use (either report of them) pass the decode fraction of
 * the card's `total_kv_blocks`, or its prompt tokens waiting for prefill pass the prefill
 * threshold; a worker is busy when every rank the card declares is (a rank that never reported
 * is free). A worker whose answer was "overloaded" is busy for {@link OVERLOAD_COOLDOWN_MS}.
 * Thresholds are read at each check, so a change applies to the next request.
 */
export class BusyMonitor {
  readonly #model: string;
  readonly #thresholds: BusyThresholds;
  readonly #totalBlocks: number | null;
  readonly #maxBatched: number | null;
  readonly #ranks: readonly number[];
  readonly #runtime: DistributedRuntime;
  readonly #log: Log;
  readonly #loads = new Map<bigint, Map<number, RankLoad>>();
  readonly #overloadedUntil = new Map<bigint, number>();
  readonly #subscriptions = new Map<string, Promise<EventSubscriber | undefined>>();
  #closed = false;

  constructor(model: string, card: ModelDeploymentCard, thresholds: BusyThresholds, runtime: DistributedRuntime, log: Log) {
    this.#model = model;
    this.#thresholds = thresholds;
    const config = card.runtime_config;
    this.#totalBlocks = config.total_kv_blocks == null ? null : Number(config.total_kv_blocks);
    this.#maxBatched = config.max_num_batched_tokens == null ? null : Number(config.max_num_batched_tokens);
    this.#ranks = Array.from({ length: config.data_parallel_size }, (_, i) => config.data_parallel_start_rank + i);
    this.#runtime = runtime;
    this.#log = log;
  }

  /**
   * Follows the load reports of the workers on `scope` (once per endpoint), thresholds set or
   * not: one set later (`/busy_threshold`) applies to the loads already reported.
   */
  addEndpoint(scope: EventScope): void {
    const key = `${scope.namespace}/${scope.component}/${scope.endpoint}`;
    if (this.#subscriptions.has(key) || this.#closed) return;
    const subscribed = this.#runtime
      .eventSubscriber(scope, 'kv_metrics', (envelope) => this.#onLoad(envelope))
      .catch((err: unknown) => {
        this.#log.error(
          { model: this.#model, endpoint: key, err: (err as Error).message },
          "cannot follow the workers' load reports; none of them counts as busy",
        );
        return undefined;
      });
    this.#subscriptions.set(key, subscribed);
  }

  #onLoad(envelope: Uint8Array): void {
    let load: ReturnType<typeof decodeActiveLoad>;
    try {
      load = decodeActiveLoad(envelope);
    } catch (err) {
      this.#log.warn({ model: this.#model, err: (err as Error).message }, 'a load report (kv_metrics) did not decode; ignored');
      return;
    }
    let ranks = this.#loads.get(load.workerId);
    if (!ranks) this.#loads.set(load.workerId, (ranks = new Map()));
    ranks.set(load.dpRank, {
      ...(load.kvUsedBlocks === undefined ? {} : { kvUsedBlocks: load.kvUsedBlocks }),
      ...(load.activeDecodeBlocks === undefined ? {} : { activeDecodeBlocks: load.activeDecodeBlocks }),
      ...(load.activePrefillTokens === undefined ? {} : { activePrefillTokens: load.activePrefillTokens }),
    });
    // A fresh report supersedes an "overloaded" answer, as in stock.
    this.#overloadedUntil.delete(load.workerId);
  }

  /** The worker answered that it has no room: leave it out for a while. */
  overloaded(instanceId: bigint): void {
    this.#overloadedUntil.set(instanceId, Date.now() + OVERLOAD_COOLDOWN_MS);
  }

  /** Whether `instanceId` is busy now. */
  isBusy(instanceId: bigint): boolean {
    const until = this.#overloadedUntil.get(instanceId);
    if (until !== undefined) {
      if (until > Date.now()) return true;
      this.#overloadedUntil.delete(instanceId);
    }
    if (!this.#thresholds.enabled) return false;
    const ranks = this.#loads.get(instanceId);
    if (!ranks) return false;
    const { activeDecodeBlocksThreshold: decode, activePrefillTokensThreshold: prefill } = this.#thresholds.effective(this.#maxBatched);
    const total = this.#totalBlocks;
    const over = (blocks: number | undefined) => blocks !== undefined && decode !== null && total !== null && total > 0 && blocks > decode * total;
    return this.#ranks.every((rank) => {
      const load = ranks.get(rank);
      if (!load) return false;
      return (
        over(load.kvUsedBlocks) ||
        over(load.activeDecodeBlocks) ||
        (prefill !== null && load.activePrefillTokens !== undefined && load.activePrefillTokens > prefill)
      );
    });
  }

  /** A worker left: its reports are forgotten. */
  removeInstance(instanceId: bigint): void {
    this.#loads.delete(instanceId);
    this.#overloadedUntil.delete(instanceId);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const sub of this.#subscriptions.values()) await (await sub)?.close();
  }
}
