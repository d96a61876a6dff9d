import type { KvCacheEvents } from '@dynamo/backend';
import { Context } from '@dynamo/backend';
import { describe, expect, it } from 'vitest';

import { SampleEngine } from '../src/index.js';
import { PagedPrefixCache } from '../src/kv-cache.js';

/** Records the events a cache reports. */
function recorder() {
  const events: Array<{ kind: string; tokens?: number; blocks: number; parent?: bigint | null; lora?: string }> = [];
  const sink: KvCacheEvents = {
    stored: ({ tokenIds, blockIds, parentId, loraName }) =>
      events.push({
        kind: 'stored',
        tokens: tokenIds.length,
        blocks: blockIds.length,
        parent: parentId ?? null,
        ...(loraName === undefined ? {} : { lora: loraName }),
      }),
    removed: (ids) => events.push({ kind: 'removed', blocks: ids.length }),
    cleared: () => events.push({ kind: 'cleared', blocks: 0 }),
  };
  return { events, sink };
}

const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('PagedPrefixCache', () => {
  it('reuses the longest cached prefix of full blocks and stores the rest under it', () => {
    const cache = new PagedPrefixCache(4, 100);
    const { events, sink } = recorder();
    cache.attach(sink);
    const first = cache.admit(tokens(1, 10));
    expect(first.cachedTokens).toBe(0);
    expect(events).toEqual([{ kind: 'stored', tokens: 8, blocks: 2, parent: null }]);
    cache.release(first.blocks);
    // Same first block, different second: only the first is reused.
    const second = cache.admit([...tokens(1, 4), 99, 98, 97, 96, 95]);
    expect(second.cachedTokens).toBe(4);
    expect(events[1]).toEqual({ kind: 'stored', tokens: 4, blocks: 1, parent: first.blocks[0] });
    expect(cache.usage()).toMatchObject({ activeBlocks: 2, cachedBlocks: 3, totalBlocks: 100 });
    cache.release(second.blocks);
    expect(cache.usage().activeBlocks).toBe(0);
    expect(cache.usage().hitRate).toBeCloseTo(4 / 19);
  });

  it("keeps a LoRA adapter's blocks apart from the base model's and reports them under its name", () => {
    const cache = new PagedPrefixCache(4, 100);
    const { events, sink } = recorder();
    cache.attach(sink);
    const base = cache.admit(tokens(1, 8));
    const adapted = cache.admit(tokens(1, 8), 'pirate');
    expect(adapted.cachedTokens).toBe(0);
    expect(adapted.blocks).not.toEqual(base.blocks);
    expect(events).toEqual([
      { kind: 'stored', tokens: 8, blocks: 2, parent: null },
      { kind: 'stored', tokens: 8, blocks: 2, parent: null, lora: 'pirate' },
    ]);
    expect(cache.admit(tokens(1, 8), 'pirate').cachedTokens).toBe(8);
  });

  it('evicts the least recently used unpinned blocks, never the pinned ones', () => {
    const cache = new PagedPrefixCache(2, 3);
    const { events, sink } = recorder();
    cache.attach(sink);
    const a = cache.admit(tokens(1, 4)); // 2 blocks, pinned
    const b = cache.admit(tokens(100, 4)); // 1 fits, then every block is pinned: the tail is not cached
    expect(b.blocks).toHaveLength(1);
    expect(cache.usage().cachedBlocks).toBe(3);
    cache.release(b.blocks);
    const c = cache.admit(tokens(200, 2)); // evicts b's block, the only unpinned one
    expect(events.at(-2)).toEqual({ kind: 'removed', blocks: 1 });
    expect(events.at(-1)).toMatchObject({ kind: 'stored', blocks: 1 });
    expect(cache.admit(tokens(1, 4)).cachedTokens).toBe(4);
    cache.release(a.blocks);
    cache.release(c.blocks);
  });
});

describe('SampleEngine with a simulated KV cache', () => {
  it('charges prefill only for uncached tokens and reports cached_tokens', async () => {
    const engine = new SampleEngine({ delayMs: 0, maxTokens: 2, kvCache: { blockSize: 16, totalBlocks: 64, prefillMsPerToken: 0.5 } });
    expect(await engine.start(0n)).toMatchObject({ llm: { kvCacheBlockSize: 16, totalKvBlocks: 64 } });
    expect(engine.componentMetricsDpRanks()).toEqual([0]);
    expect(await engine.kvEventSources()).toEqual([{ kind: 'push', onReady: expect.any(Function) }]);
    const run = async () => {
      const started = performance.now();
      let last: Record<string, unknown> | undefined;
      for await (const chunk of engine.generate({ token_ids: tokens(1, 128) }, new Context())) last = chunk;
      return { ms: performance.now() - started, usage: last?.completion_usage as { prompt_tokens_details: { cached_tokens: number } } };
    };
    const cold = await run();
    const warm = await run();
    expect(cold.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(warm.usage.prompt_tokens_details.cached_tokens).toBe(128);
    // 128 uncached tokens at 0.5 ms each: at least 64 ms cold; the warm one sleeps not at all.
    expect(cold.ms).toBeGreaterThanOrEqual(60);
    expect(warm.ms).toBeLessThan(cold.ms / 2);
    await engine.cleanup();
  });
});
