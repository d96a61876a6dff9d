import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { TokenHistogram } from '../src/token-histogram.js';

const BOUNDS = [0, 0.001, 0.005, 0.01, 0.025, 0.1, 1];

describe('TokenHistogram', () => {
  it('prints what a prom-client histogram prints for the same observations, once each request flushed', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const tokens = new TokenHistogram('itl_seconds', 'ITL', BOUNDS, ours);
    const reference = new Histogram({ name: 'itl_seconds', help: 'ITL', labelNames: ['model'], buckets: BOUNDS, registers: [theirs] });
    const requests = [
      {
        model: 'a',
        steps: [
          [0.0004, 1],
          [0.002, 3],
          [0.02, 1],
          [5, 2],
        ],
      },
      {
        model: 'b',
        steps: [
          [0, 1],
          [0.001, 70],
          [0.5, 1],
        ],
      },
      { model: 'a', steps: [[0.01, 200]] },
    ] as const;
    for (const { model, steps } of requests) {
      const local = tokens.local(model);
      for (const [value, n] of steps) {
        local.observe(value, n);
        for (let i = 0; i < n; i++) reference.observe({ model }, value);
      }
      local.flush();
    }
    // The same text, but for the sums' last digits (prom-client adds a token at a time).
    const [mine, referenceLines] = [(await ours.metrics()).split('\n'), (await theirs.metrics()).split('\n')];
    expect(mine.map((line) => line.replace(/_sum(\{.*\}) .*/, '_sum$1'))).toEqual(referenceLines.map((line) => line.replace(/_sum(\{.*\}) .*/, '_sum$1')));
    mine.forEach((line, i) => {
      if (line.includes('_sum{')) expect(Number(line.split(' ')[1])).toBeCloseTo(Number(referenceLines[i]!.split(' ')[1]), 9);
    });
    expect(mine.filter((line) => line.includes('_sum{'))).toHaveLength(2);
  });

  it('adds a long request to the shared series every 64 tokens, before it ends', async () => {
    const registry = new Registry();
    const local = new TokenHistogram('itl_seconds', 'ITL', BOUNDS, registry).local('m');
    for (let i = 0; i < 63; i++) local.observe(0.002);
    expect(await registry.metrics()).not.toContain('itl_seconds_count');
    local.observe(0.002);
    expect(await registry.metrics()).toContain('itl_seconds_count{model="m"} 64');
  });
});
