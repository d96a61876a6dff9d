import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';

import { mergeStreams } from '../src/internal.js';

/** A stream of `items`, `ms` apart, that records whether it was closed before its end. */
function source(items: number[], ms: number, state = { closed: false, finished: false }, failAfter?: number) {
  const stream = (async function* () {
    try {
      for (const [i, item] of items.entries()) {
        await sleep(ms);
        if (i === failAfter) throw new Error(`source failed at ${item}`);
        yield item;
      }
      state.finished = true;
    } finally {
      state.closed = true;
    }
  })();
  return { stream, state };
}

describe('mergeStreams', () => {
  it('yields every item of every stream as it arrives', async () => {
    const out: number[] = [];
    for await (const item of mergeStreams([source([1, 2, 3], 10).stream, source([10, 20], 15).stream])) out.push(item);
    expect(out.sort((a, b) => a - b)).toEqual([1, 2, 3, 10, 20]);
    // Arrival order: the faster stream's first item first.
    expect(out[0]).toBe(1);
  });

  it('ends with the first error and closes the streams still running', async () => {
    const slow = source([1, 2, 3, 4, 5], 30);
    const failing = source([7, 8], 5, undefined, 1);
    await expect(async () => {
      for await (const _ of mergeStreams([slow.stream, failing.stream])) void _;
    }).rejects.toThrow('source failed at 8');
    await sleep(60);
    expect(slow.state.closed).toBe(true);
    expect(slow.state.finished).toBe(false);
  });

  it('closes every stream when the consumer leaves early', async () => {
    const a = source([1, 2, 3], 5);
    const b = source([4, 5, 6], 5);
    for await (const _ of mergeStreams([a.stream, b.stream])) break;
    await sleep(30);
    expect([a.state.closed, b.state.closed]).toEqual([true, true]);
    expect([a.state.finished, b.state.finished]).toEqual([false, false]);
  });
});
