import { describe, expect, it } from 'vitest';

import { commonPrefixLength, pickSequence, reusableLength } from '../src/prefix-match.js';

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
const options = { blockSize: 4, similarity: 0.5 };

describe('prefix matching', () => {
  it("measures the common prefix, and keeps the prompt's last token out of what a request reuses", () => {
    expect(commonPrefixLength([1, 2, 3], [1, 2, 4])).toBe(2);
    expect(commonPrefixLength([], [1])).toBe(0);
    expect(reusableLength([1, 2, 3, 4, 5], [1, 2, 3])).toBe(2);
    expect(reusableLength([1, 2], [1, 2, 3])).toBe(2);
  });

  it('takes the sequence holding most of the prompt, the least recently used among equals', () => {
    const prompt = range(0, 20);
    const free = [
      { tokens: range(0, 8), lastUsed: 1 },
      { tokens: [...range(0, 15), 99], lastUsed: 2 },
      { tokens: [...range(0, 15), 98], lastUsed: 0 },
      { tokens: [], lastUsed: 3 },
    ];
    expect(pickSequence(free, prompt, options)).toBe(2);
  });

  it('takes an empty sequence over a match under a block or under the similarity, else the least recently used', () => {
    const prompt = range(0, 20);
    expect(
      pickSequence(
        [
          { tokens: range(0, 3), lastUsed: 0 },
          { tokens: [], lastUsed: 5 },
        ],
        prompt,
        options,
      ),
    ).toBe(1);
    // 8 of 20 tokens is under half the prompt.
    expect(
      pickSequence(
        [
          { tokens: range(0, 8), lastUsed: 0 },
          { tokens: [], lastUsed: 5 },
        ],
        prompt,
        options,
      ),
    ).toBe(1);
    expect(
      pickSequence(
        [
          { tokens: range(0, 8), lastUsed: 1 },
          { tokens: [7], lastUsed: 0 },
        ],
        prompt,
        options,
      ),
    ).toBe(1);
    expect(
      pickSequence(
        [
          { tokens: range(0, 8), lastUsed: 1 },
          { tokens: [7], lastUsed: 0 },
        ],
        prompt,
        { blockSize: 4, similarity: 0.1 },
      ),
    ).toBe(0);
    expect(() => pickSequence([], prompt, options)).toThrow(RangeError);
  });
});
