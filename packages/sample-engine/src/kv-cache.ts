import { computeBlockHashes, computeSequenceHashes, type KvCacheEvents } from '@dynamo/backend';

/** How a prompt met the cache. */
export interface Admission {
  /** Leading prompt tokens whose blocks were already cached. */
  cachedTokens: number;
  /** The blocks the request holds until {@link PagedPrefixCache.release}. */
  blocks: bigint[];
}

/** A cache's counters, as an engine reports them. */
export interface CacheUsage {
  /** Blocks held by running requests. */
  activeBlocks: number;
  /** Blocks cached (held or reusable). */
  cachedBlocks: number;
  totalBlocks: number;
  /** Cached prompt tokens over all prompt tokens admitted so far (0 before any). */
  hitRate: number;
}

interface Block {
  /** Running requests holding it. */
  refs: number;
}

/**
 * A paged prefix cache like a real engine's: `totalBlocks` blocks of `blockSize` tokens, each
 * named by the chained hash of the prompt up to its end, so a block is reused only when the
 * whole prefix before it matches. Blocks running requests hold are pinned; the rest are evicted
 * least recently used first when space is needed. Every change is reported as a KV event.
 */
export class PagedPrefixCache {
  readonly blockSize: number;
  readonly totalBlocks: number;
  readonly #blocks = new Map<bigint, Block>();
  /** Unreferenced blocks, least recently used first. */
  readonly #lru = new Map<bigint, true>();
  #events: KvCacheEvents | undefined;
  #promptTokens = 0;
  #cachedTokens = 0;
  #active = 0;

  constructor(blockSize: number, totalBlocks: number) {
    this.blockSize = blockSize;
    this.totalBlocks = totalBlocks;
  }

  /** Where stored / removed events go (the worker's KV event publisher). */
  attach(events: KvCacheEvents): void {
    this.#events = events;
  }

  /**
   * Places a prompt: its leading cached blocks are reused, the rest of its full blocks are
   * allocated (evicting as needed; when every block is pinned, the tail is simply not cached).
   * A prompt run under LoRA adapter `loraName` has blocks of its own, as in a real engine, and
   * reports them under that name.
   */
  admit(tokenIds: readonly number[], loraName?: string): Admission {
    const tokens = Uint32Array.from(tokenIds);
    const hashes = computeSequenceHashes(computeBlockHashes(tokens, this.blockSize, { loraName }));
    let cached = 0;
    while (cached < hashes.length && this.#blocks.has(hashes[cached]!)) cached += 1;
    const held: bigint[] = [];
    for (const hash of hashes.subarray(0, cached)) this.#pin(hash, held);
    const fresh: bigint[] = [];
    const evicted: bigint[] = [];
    for (const hash of hashes.subarray(cached)) {
      if (this.#blocks.size >= this.totalBlocks) {
        const victim = this.#lru.keys().next();
        if (victim.done) break;
        this.#lru.delete(victim.value);
        this.#blocks.delete(victim.value);
        evicted.push(victim.value);
      }
      this.#blocks.set(hash, { refs: 0 });
      this.#pin(hash, held);
      fresh.push(hash);
    }
    if (evicted.length > 0) this.#events?.removed(evicted);
    if (fresh.length > 0) {
      const start = cached * this.blockSize;
      this.#events?.stored({
        tokenIds: tokens.subarray(start, start + fresh.length * this.blockSize),
        blockIds: fresh,
        parentId: cached > 0 ? hashes[cached - 1]! : null,
        ...(loraName === undefined ? {} : { loraName }),
      });
    }
    this.#promptTokens += tokens.length;
    this.#cachedTokens += cached * this.blockSize;
    return { cachedTokens: cached * this.blockSize, blocks: held };
  }

  #pin(hash: bigint, held: bigint[]): void {
    const block = this.#blocks.get(hash)!;
    if (block.refs === 0) {
      this.#lru.delete(hash);
      this.#active += 1;
    }
    block.refs += 1;
    held.push(hash);
  }

  /** A request ended: its blocks stay cached for reuse, now evictable. */
  release(blocks: readonly bigint[]): void {
    for (const hash of blocks) {
      const block = this.#blocks.get(hash);
      if (!block || block.refs === 0) continue;
      block.refs -= 1;
      if (block.refs === 0) {
        this.#active -= 1;
        this.#lru.set(hash, true);
      }
    }
  }

  /** Drops every block no request holds (`clear_kv_blocks`), telling routers; returns how many. */
  clearUnused(): number {
    const dropped = [...this.#lru.keys()];
    for (const hash of dropped) this.#blocks.delete(hash);
    this.#lru.clear();
    if (dropped.length > 0) this.#events?.removed(dropped);
    return dropped.length;
  }

  usage(): CacheUsage {
    return {
      activeBlocks: this.#active,
      cachedBlocks: this.#blocks.size,
      totalBlocks: this.totalBlocks,
      hitRate: this.#promptTokens === 0 ? 0 : this.#cachedTokens / this.#promptTokens,
    };
  }
}
