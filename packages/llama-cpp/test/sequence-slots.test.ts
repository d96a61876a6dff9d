import { Context } from '@dynamo/backend';
import { describe, expect, it } from 'vitest';

import { BlockLedger } from '../src/block-ledger.js';
import { type KvSequence, SequenceSlots, type SlotsOptions } from '../src/sequence-slots.js';
import { fullBlocks, RouterView } from './router-view.js';

/** A sequence's token bookkeeping, as node-llama-cpp keeps it (what these checks need of one). */
class TokenList implements KvSequence {
  tokens: number[] = [];
  get contextTokens(): readonly number[] {
    return [...this.tokens];
  }
  async eraseContextTokenRanges(ranges: Array<{ start: number; end: number }>): Promise<void> {
    for (const { start, end } of [...ranges].reverse()) this.tokens.splice(start, end - start);
  }
  async clearHistory(): Promise<void> {
    this.tokens = [];
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

function slots(count: number, extra: Partial<SlotsOptions> = {}) {
  const ledger = new BlockLedger(4);
  const router = new RouterView();
  ledger.attach(router);
  const sequences = Array.from({ length: count }, () => new TokenList());
  const options: SlotsOptions = { maxQueued: 100, prefixCaching: true, blockSize: 4, similarity: 0.5, ledger, ...extra };
  return { pool: new SequenceSlots(sequences, options), sequences, router, ledger };
}

describe('SequenceSlots', () => {
  it('gives a prompt the sequence holding its prefix, trimmed to the prefix, and keeps the tokens after the request', async () => {
    const { pool, sequences, router } = slots(2);
    const first = (await pool.acquire(range(0, 10), new Context()))!;
    expect(first.reused).toBe(0);
    first.sequence.tokens.push(...range(0, 10), 100, 101);
    await pool.release(first, true);
    expect(router.blocks).toEqual(fullBlocks([{ tokens: [...range(0, 10), 100, 101] }], 4));

    const second = (await pool.acquire([...range(0, 10), 100, 7, 8], new Context()))!;
    expect(second.sequence).toBe(first.sequence);
    expect(second.reused).toBe(11);
    expect(second.sequence.tokens).toEqual([...range(0, 10), 100]);
    // The block the trim cut is gone from the router's view at once.
    expect(router.blocks).toEqual(fullBlocks([{ tokens: range(0, 11) }], 4));
    // The same prompt again keeps all but its last token.
    second.sequence.tokens.push(7, 8);
    await pool.release(second, true);
    const third = (await pool.acquire([...range(0, 10), 100, 7, 8], new Context()))!;
    expect(third.reused).toBe(12);
    await pool.release(third, false);
    expect(sequences.map((s) => s.tokens.length)).toEqual([0, 0]);
    expect(router.blocks.size).toBe(0);
    expect(router.problems).toEqual([]);
  });

  it('empties a sequence whose start no longer matches its prompt (a context shift), and every sequence without prefix caching', async () => {
    const { pool } = slots(1);
    const slot = (await pool.acquire(range(0, 8), new Context()))!;
    slot.sequence.tokens.push(...range(4, 12));
    await pool.release(slot, true);
    expect(pool.contents()).toEqual([[]]);

    const off = slots(1, { prefixCaching: false }).pool;
    const plain = (await off.acquire(range(0, 8), new Context()))!;
    plain.sequence.tokens.push(...range(0, 8));
    await off.release(plain, true);
    expect(off.contents()).toEqual([[]]);
  });

  it('counts the requests in progress and their blocks, and queues past the free sequences', async () => {
    const { pool } = slots(1);
    const slot = (await pool.acquire(range(0, 9), new Context()))!;
    expect([pool.active, pool.usedBlocks]).toEqual([1, 3]);
    const waiting = pool.acquire(range(0, 5), new Context());
    expect(pool.queued).toBe(1);
    await pool.release(slot, true);
    const next = (await waiting)!;
    expect(next.sequence).toBe(slot.sequence);
    await pool.release(next, true);
    expect([pool.active, pool.usedBlocks, pool.queued]).toEqual([0, 0, 0]);
  });

  it('after 300 random requests on 4 sequences, with cancels, failures and clears, the router holds exactly the full blocks the sequences hold', async () => {
    let seed = 11;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const { pool, router } = slots(4, { similarity: 0.2, maxQueued: 1000 });
    const system = range(0, 13);
    const running: Array<Promise<void>> = [];
    for (let i = 0; i < 300; i++) {
      const prompt = [...system.slice(0, random(14)), ...Array.from({ length: 1 + random(12) }, () => random(4))];
      const context = new Context();
      running.push(
        (async () => {
          const slot = await pool.acquire(prompt, context);
          if (!slot) return;
          const outcome = random(5);
          if (outcome === 0) {
            // Failed mid-prefill: part of the prompt went in before the error.
            slot.sequence.tokens.push(...prompt.slice(slot.reused, slot.reused + random(prompt.length - slot.reused)));
            await pool.release(slot, false);
            return;
          }
          slot.sequence.tokens.push(...prompt.slice(slot.reused));
          pool.evaluated(slot);
          await new Promise((resolve) => setImmediate(resolve));
          // Cancelled or finished after some tokens.
          slot.sequence.tokens.push(...Array.from({ length: random(9) }, () => 10 + random(3)));
          await pool.release(slot, true);
        })(),
      );
      if (random(10) === 0) context.stopGenerating();
      if (random(40) === 0) running.push(pool.clearFree().then(() => {}));
      if (random(3) === 0) await Promise.race(running);
    }
    await Promise.all(running);
    expect(router.problems).toEqual([]);
    expect(router.blocks).toEqual(
      fullBlocks(
        pool.contents().map((tokens) => ({ tokens })),
        4,
      ),
    );
    expect(router.blocks.size).toBeGreaterThan(0);
  });
});
