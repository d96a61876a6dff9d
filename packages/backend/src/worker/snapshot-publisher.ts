import { Gauge } from 'prom-client';
import { type DistributedRuntime, parseOrThrow } from '@dynamo/runtime';
import { z } from 'zod';

import type { LifecycleLabels } from './lifecycle-metrics.js';

/** One data-parallel rank's KV cache state, as the engine sees it (Dynamo's `ComponentSnapshot`). */
export const ComponentSnapshotSchema = z.strictObject({
  /** KV blocks in use. */
  kvUsedBlocks: z.number().int().nonnegative(),
  /** KV blocks the rank has. */
  kvTotalBlocks: z.number().int().nonnegative(),
  /** Fraction of the KV cache in use, 0 to 1. */
  gpuCacheUsage: z.number().min(0).max(1),
  /** Prefix-cache hit rate, 0 to 1; left unset (and the gauge unwritten) when unknown. */
  kvCacheHitRate: z.number().min(0).max(1).nullish(),
});
export type ComponentSnapshot = z.input<typeof ComponentSnapshotSchema>;

/**
 * What an engine reports its per-rank KV cache state through (see
 * `LLMEngine.attachSnapshotPublisher`): each `publish` sets the worker's
 * `dynamo_component_total_blocks`, `_gpu_cache_usage_percent` and `_kv_cache_hit_rate` gauges
 * for the rank, labelled `dp_rank`, and keeps its used-block count for KV-aware routing.
 */
export class SnapshotPublisher {
  readonly #labels: LifecycleLabels;
  readonly #ranks: ReadonlySet<number>;
  readonly #used = new Map<number, number>();
  readonly #total: Gauge;
  readonly #usage: Gauge;
  readonly #hitRate: Gauge;
  readonly #onUsed: ((dpRank: number, usedBlocks: number) => void) | undefined;

  /**
   * Seeds `total_blocks` and `gpu_cache_usage_percent` at 0 for each rank, as stock does.
   * `onUsed` hears each snapshot's used blocks (the worker's load report to routers).
   */
  constructor(runtime: DistributedRuntime, labels: LifecycleLabels, ranks: readonly number[], onUsed?: (dpRank: number, usedBlocks: number) => void) {
    this.#onUsed = onUsed;
    this.#labels = labels;
    this.#ranks = new Set(ranks);
    const registers = [runtime.metrics.registry];
    const labelNames = [...Object.keys(labels), 'dp_rank'];
    this.#total = new Gauge({ name: 'dynamo_component_total_blocks', help: 'KV cache blocks of each data-parallel rank', labelNames, registers });
    this.#usage = new Gauge({
      name: 'dynamo_component_gpu_cache_usage_percent',
      help: 'Fraction of the KV cache in use, by data-parallel rank',
      labelNames,
      registers,
    });
    this.#hitRate = new Gauge({ name: 'dynamo_component_kv_cache_hit_rate', help: 'Prefix-cache hit rate, by data-parallel rank', labelNames, registers });
    for (const rank of ranks) {
      this.#total.set(this.#rank(rank), 0);
      this.#usage.set(this.#rank(rank), 0);
    }
  }

  /** Records `snapshot` for `dpRank`. Throws `InvalidArgument` naming a bad field or a rank the engine did not declare. */
  publish(dpRank: number, snapshot: ComponentSnapshot): void {
    const rank = parseOrThrow(
      z
        .number()
        .int()
        .refine((r) => this.#ranks.has(r), `must be one of the ranks componentMetricsDpRanks() returned (${[...this.#ranks].join(', ')})`),
      dpRank,
      'dpRank',
    );
    const s = parseOrThrow(ComponentSnapshotSchema, snapshot, 'ComponentSnapshot');
    this.#used.set(rank, s.kvUsedBlocks);
    this.#total.set(this.#rank(rank), s.kvTotalBlocks);
    this.#usage.set(this.#rank(rank), s.gpuCacheUsage);
    if (s.kvCacheHitRate != null) this.#hitRate.set(this.#rank(rank), s.kvCacheHitRate);
    this.#onUsed?.(rank, s.kvUsedBlocks);
  }

  /** The KV blocks `dpRank` last reported in use (0 before its first snapshot). */
  usedBlocks(dpRank: number): number {
    return this.#used.get(dpRank) ?? 0;
  }

  #rank(rank: number): LifecycleLabels & { dp_rank: string } {
    return { ...this.#labels, dp_rank: String(rank) };
  }
}
