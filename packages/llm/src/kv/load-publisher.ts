import { encodeActiveLoad } from '@dynamo/core';
import type { DistributedRuntime, EventPublisher, EventScope } from '@dynamo/runtime';

/** The topic stock routers read worker load from. */
export const KV_METRICS_TOPIC = 'kv_metrics';

/** A rank's load: KV blocks its running requests hold, and / or KV blocks in use in all. */
export interface WorkerLoad {
  activeDecodeBlocks?: number;
  kvUsedBlocks?: number;
}

/** Stock's timing: a change goes out 1 ms after it settles; every rank is re-sent every 10 s. */
export const LOAD_DEBOUNCE_MS = 1;
export const LOAD_HEARTBEAT_MS = 10_000;

/**
 * Publishes a worker's per-rank load (`ActiveLoad` on `kv_metrics`) as stock workers do: only
 * when a value changes, debounced, with a heartbeat that re-sends the latest value of every rank
 * so a router that started later, or lost a message, catches up.
 */
export class LoadPublisher {
  readonly #publisher: EventPublisher;
  readonly #workerId: bigint;
  readonly #latest = new Map<number, WorkerLoad>();
  readonly #dirty = new Set<number>();
  #debounce: NodeJS.Timeout | undefined;
  readonly #heartbeat: NodeJS.Timeout;

  private constructor(publisher: EventPublisher, workerId: bigint) {
    this.#publisher = publisher;
    this.#workerId = workerId;
    this.#heartbeat = setInterval(() => {
      for (const rank of this.#latest.keys()) this.#dirty.add(rank);
      this.#send();
    }, LOAD_HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  static async create(runtime: DistributedRuntime, scope: EventScope): Promise<LoadPublisher> {
    return new LoadPublisher(await runtime.eventPublisher(scope, KV_METRICS_TOPIC), runtime.instanceId);
  }

  /** Records `dpRank`'s load; it goes out after the debounce if it changed. */
  update(dpRank: number, load: WorkerLoad): void {
    const last = this.#latest.get(dpRank);
    if (last && last.activeDecodeBlocks === load.activeDecodeBlocks && last.kvUsedBlocks === load.kvUsedBlocks) return;
    this.#latest.set(dpRank, { ...load });
    this.#dirty.add(dpRank);
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => this.#send(), LOAD_DEBOUNCE_MS);
  }

  #send(): void {
    for (const rank of this.#dirty) {
      const load = this.#latest.get(rank)!;
      this.#publisher.publish((publisherId, sequence) =>
        encodeActiveLoad(publisherId, sequence, Date.now(), {
          workerId: this.#workerId,
          dpRank: rank,
          ...(load.activeDecodeBlocks === undefined ? {} : { activeDecodeBlocks: load.activeDecodeBlocks }),
          ...(load.kvUsedBlocks === undefined ? {} : { kvUsedBlocks: load.kvUsedBlocks }),
        }),
      );
    }
    this.#dirty.clear();
  }

  async close(): Promise<void> {
    clearTimeout(this.#debounce);
    clearInterval(this.#heartbeat);
    this.#send();
    await this.#publisher.close();
  }
}
