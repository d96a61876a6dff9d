// The shared per-millisecond waits between tokens, on fake timers and a fake clock, so each
// millisecond boundary is exact.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { TokenPacer } from '../src/token-pacer.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Whether `promise` has settled, after the microtasks queued so far. */
async function settled(promise: Promise<void>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await Promise.resolve();
  await Promise.resolve();
  return done;
}

describe('TokenPacer', () => {
  it('gives the streams due in the same millisecond one wait, resolved when the delay has passed', async () => {
    const pacer = new TokenPacer();
    const waits = Array.from({ length: 64 }, () => pacer.wait(10));
    expect(new Set(waits).size).toBe(1);
    await vi.advanceTimersByTimeAsync(9);
    expect(await settled(waits[0]!)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(waits[0]!)).toBe(true);
  });

  it('gives a stream due a millisecond later a wait of its own, which ends a millisecond later', async () => {
    const pacer = new TokenPacer();
    const first = pacer.wait(10);
    await vi.advanceTimersByTimeAsync(1);
    const later = pacer.wait(10);
    expect(later).not.toBe(first);
    await vi.advanceTimersByTimeAsync(9);
    expect([await settled(first), await settled(later)]).toEqual([true, false]);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(later)).toBe(true);
  });

  it('keeps separate waits for separate delays, and a new wait after the last one ended', async () => {
    const pacer = new TokenPacer();
    const short = pacer.wait(5);
    const long = pacer.wait(20);
    await vi.advanceTimersByTimeAsync(5);
    expect([await settled(short), await settled(long)]).toEqual([true, false]);
    await vi.advanceTimersByTimeAsync(15);
    expect(await settled(long)).toBe(true);
    const next = pacer.wait(5);
    expect(next).not.toBe(short);
    await vi.advanceTimersByTimeAsync(5);
    expect(await settled(next)).toBe(true);
  });
});
