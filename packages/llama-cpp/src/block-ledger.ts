import { computeBlockHashes, computeSequenceHashes, type KvCacheEvents } from '@dynamo/backend';

const NONE = new BigUint64Array(0);

/**
 * The full KV blocks a worker's sequences hold, told to routers as KV events. A block is named by
 * the chained hash of the tokens up to its end (and the LoRA adapter it was computed under), as
 * routers name a prompt's blocks. Routers keep a set of holders per block, not a count, so the
 * ledger counts the sequences holding each block itself: `stored` when the first comes to hold it,
 * `removed` when the last lets it go. Blocks are stored parents first and removed children first,
 * so a router never sees a block whose parent it does not hold.
 */
export class BlockLedger {
  readonly blockSize: number;
  readonly #refs = new Map<bigint, number>();
  readonly #held = new Map<object, BigUint64Array>();
  #events: KvCacheEvents | undefined;

  constructor(blockSize: number) {
    this.blockSize = blockSize;
  }

  /** Where the events go from now on (the worker's KV event publisher). */
  attach(events: KvCacheEvents): void {
    this.#events = events;
  }

  /** Distinct blocks held by any sequence. */
  get size(): number {
    return this.#refs.size;
  }

  /** The names of the blocks held (what a router that saw every event holds for this worker). */
  blocks(): Set<bigint> {
    return new Set(this.#refs.keys());
  }

  /**
   * Sequence `owner` now holds exactly `tokens`, computed under LoRA adapter `loraName` (none for
   * the base model); its full blocks are counted and the changes reported.
   */
  hold(owner: object, tokens: readonly number[], loraName?: string): void {
    const size = this.blockSize;
    const full = tokens.length - (tokens.length % size);
    const hashes = full === 0 ? NONE : computeSequenceHashes(computeBlockHashes(Uint32Array.from(tokens.slice(0, full)), size, { loraName }));
    const before = this.#held.get(owner) ?? NONE;
    let same = 0;
    while (same < before.length && same < hashes.length && before[same] === hashes[same]) same++;
    const removed: bigint[] = [];
    for (let i = before.length - 1; i >= same; i--) {
      const hash = before[i]!;
      const refs = this.#refs.get(hash)! - 1;
      if (refs > 0) this.#refs.set(hash, refs);
      else {
        this.#refs.delete(hash);
        removed.push(hash);
      }
    }
    if (removed.length > 0) this.#events?.removed(removed);
    // Runs of blocks no other sequence held go out as one `stored` each, chained to the block before.
    let run = -1;
    const flush = (end: number) => {
      if (run < 0) return;
      this.#events?.stored({
        tokenIds: tokens.slice(run * size, end * size),
        blockIds: hashes.subarray(run, end),
        parentId: run > 0 ? hashes[run - 1]! : null,
        ...(loraName === undefined ? {} : { loraName }),
      });
      run = -1;
    };
    for (let i = same; i < hashes.length; i++) {
      const refs = this.#refs.get(hashes[i]!) ?? 0;
      this.#refs.set(hashes[i]!, refs + 1);
      if (refs === 0 && run < 0) run = i;
      else if (refs > 0) flush(i);
    }
    flush(hashes.length);
    if (hashes.length === 0) this.#held.delete(owner);
    else this.#held.set(owner, hashes);
  }
}
