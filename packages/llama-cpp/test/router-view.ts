import { computeBlockHashes, computeSequenceHashes, type KvCacheEvents } from '@dynamo/backend';

/**
 * What a KV router holds for one worker after each event it was sent, kept as a router keeps it (a
 * set of blocks), and checking each event as a router relies on it: a stored block is new and its
 * parent is held, a removed block is held.
 */
export class RouterView implements KvCacheEvents {
  readonly blocks = new Set<bigint>();
  readonly problems: string[] = [];
  stores = 0;
  removals = 0;

  stored(event: Parameters<KvCacheEvents['stored']>[0]): void {
    this.stores++;
    const parent = event.parentId ?? null;
    if (parent !== null && !this.blocks.has(parent)) this.problems.push(`stored after a parent the router does not hold: ${parent}`);
    for (const id of event.blockIds) {
      if (this.blocks.has(id)) this.problems.push(`stored twice: ${id}`);
      this.blocks.add(id);
    }
  }

  removed(blockIds: readonly bigint[] | BigUint64Array): void {
    this.removals++;
    for (const id of blockIds) {
      if (!this.blocks.delete(id)) this.problems.push(`removed a block the router does not hold: ${id}`);
    }
  }

  cleared(): void {
    this.blocks.clear();
  }
}

/** The names of the full blocks of each token list (as routers and the engine name them). */
export function fullBlocks(contents: Array<{ tokens: readonly number[]; loraName?: string }>, blockSize: number): Set<bigint> {
  const blocks = new Set<bigint>();
  for (const { tokens, loraName } of contents) {
    const full = tokens.length - (tokens.length % blockSize);
    if (full === 0) continue;
    for (const hash of computeSequenceHashes(computeBlockHashes(Uint32Array.from(tokens.slice(0, full)), blockSize, { loraName }))) blocks.add(hash);
  }
  return blocks;
}
