import { describe, expect, it } from 'vitest';

import { BlockLedger } from '../src/block-ledger.js';
import { fullBlocks, RouterView } from './router-view.js';

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe('BlockLedger', () => {
  it("stores a sequence's full blocks once, in one chained event, and removes them when it lets them go", () => {
    const ledger = new BlockLedger(4);
    const router = new RouterView();
    const stored: Array<{ blocks: number; parent: bigint | null; tokens: number }> = [];
    ledger.attach({
      stored: (e) => {
        stored.push({ blocks: e.blockIds.length, parent: e.parentId ?? null, tokens: e.tokenIds.length });
        router.stored(e);
      },
      removed: (ids) => router.removed(ids),
      cleared: () => router.cleared(),
    });
    const a = {};
    ledger.hold(a, range(0, 10));
    expect(stored).toEqual([{ blocks: 2, parent: null, tokens: 8 }]);
    ledger.hold(a, range(0, 13));
    expect(stored[1]).toMatchObject({ blocks: 1, tokens: 4 });
    expect(stored[1]!.parent).not.toBeNull();
    expect(router.blocks).toEqual(fullBlocks([{ tokens: range(0, 13) }], 4));
    ledger.hold(a, []);
    expect(router.blocks.size).toBe(0);
    expect(ledger.size).toBe(0);
    expect(router.problems).toEqual([]);
  });

  it('counts sequences sharing a block: stored when the first holds it, removed when the last lets go', () => {
    const ledger = new BlockLedger(4);
    const router = new RouterView();
    ledger.attach(router);
    const [a, b] = [{}, {}];
    ledger.hold(a, range(0, 12));
    ledger.hold(b, [...range(0, 8), 50, 51, 52, 53]);
    expect(router.stores).toBe(2);
    expect(router.blocks.size).toBe(4);
    ledger.hold(a, []);
    expect(router.blocks).toEqual(fullBlocks([{ tokens: [...range(0, 8), 50, 51, 52, 53] }], 4));
    ledger.hold(b, range(0, 3));
    expect(router.blocks.size).toBe(0);
    expect(router.problems).toEqual([]);
  });

  it("names an adapter's blocks apart from the base model's", () => {
    const ledger = new BlockLedger(4);
    const router = new RouterView();
    ledger.attach(router);
    ledger.hold({}, range(0, 8));
    ledger.hold({}, range(0, 8), 'sql');
    expect(router.blocks.size).toBe(4);
    expect(router.blocks).toEqual(fullBlocks([{ tokens: range(0, 8) }, { tokens: range(0, 8), loraName: 'sql' }], 4));
  });

  it('after 2,000 random changes to 6 sequences sharing prefixes, the router holds exactly their full blocks', () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const ledger = new BlockLedger(4);
    const router = new RouterView();
    ledger.attach(router);
    const owners = Array.from({ length: 6 }, () => ({ tokens: [] as number[], lora: undefined as string | undefined }));
    for (let step = 0; step < 2000; step++) {
      const owner = owners[random(owners.length)]!;
      const action = random(4);
      if (action === 0) owner.tokens = [];
      // Cut back to a prefix, then grow with tokens from a small alphabet, so prefixes are shared.
      else owner.tokens = [...owner.tokens.slice(0, random(owner.tokens.length + 1)), ...Array.from({ length: random(20) }, () => random(3))];
      if (action === 3 && owner.tokens.length === 0) owner.lora = random(2) === 0 ? 'sql' : undefined;
      ledger.hold(owner, owner.tokens, owner.lora);
    }
    expect(router.problems).toEqual([]);
    expect(router.blocks).toEqual(
      fullBlocks(
        owners.map((o) => ({ tokens: o.tokens, ...(o.lora && { loraName: o.lora }) })),
        4,
      ),
    );
    expect(ledger.blocks()).toEqual(router.blocks);
  });
});
