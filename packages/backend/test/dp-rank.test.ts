import { Writable } from 'node:stream';
import { createLogging } from '@dynamo/runtime';
import { describe, expect, it } from 'vitest';

import { InvalidArgument } from '../src/index.js';
import { forcedDpRank, validateGlobalDpRank } from '../src/internal.js';

/** A logger whose JSON lines land in `lines`. */
function capturingLog() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { lines, log: createLogging({ filter: 'warn', jsonl: true, destination }).child('engine.test') };
}

describe('forcedDpRank', () => {
  it("reads the router's routing.dp_rank, as a number or a decimal string", () => {
    expect(forcedDpRank({ routing: { dp_rank: 3 } })).toBe(3);
    expect(forcedDpRank({ routing: { dp_rank: '2' } })).toBe(2);
    expect(forcedDpRank({ routing: { dp_rank: 0 } })).toBe(0);
  });

  it('is undefined when the router chose no rank', () => {
    expect(forcedDpRank({})).toBeUndefined();
    expect(forcedDpRank({ routing: null })).toBeUndefined();
    expect(forcedDpRank({ routing: {} })).toBeUndefined();
    expect(forcedDpRank({ routing: { dp_rank: null } })).toBeUndefined();
  });

  it.each([-1, 1.5, 'two', true, [1]])('rejects routing.dp_rank %j, naming the field', (bad) => {
    expect(() => forcedDpRank({ routing: { dp_rank: bad } })).toThrow(InvalidArgument);
    expect(() => forcedDpRank({ routing: { dp_rank: bad } })).toThrow(/request\.routing\.dp_rank: must be a non-negative integer/);
  });
});

describe('validateGlobalDpRank', () => {
  it('keeps a rank inside [start, start + size)', () => {
    const { lines, log } = capturingLog();
    expect(validateGlobalDpRank(4, 4, 2, 'vllm', log)).toBe(4);
    expect(validateGlobalDpRank(5, 4, 2, 'vllm', log)).toBe(5);
    expect(lines).toEqual([]);
  });

  it('leaves the choice to the engine with no rank or a single rank', () => {
    const { lines, log } = capturingLog();
    expect(validateGlobalDpRank(undefined, 0, 4, 'vllm', log)).toBeUndefined();
    expect(validateGlobalDpRank(0, 0, 1, 'vllm', log)).toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('warns and falls back to internal selection for a rank outside its range', async () => {
    const { lines, log } = capturingLog();
    expect(validateGlobalDpRank(6, 4, 2, 'my-engine', log)).toBeUndefined();
    expect(validateGlobalDpRank(3, 4, 2, 'my-engine', log)).toBeUndefined();
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => l.msg)).toEqual([
      "dp_rank 6 is outside this engine's ranks [4, 6); falling back to my-engine internal DP selection",
      "dp_rank 3 is outside this engine's ranks [4, 6); falling back to my-engine internal DP selection",
    ]);
    expect(lines[0]).toMatchObject({ level: 40, dp_rank: 6, dp_start: 4, dp_size: 2 });
  });
});
