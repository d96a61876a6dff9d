import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { computeBlockHashes, computeSequenceHashes } from '../src/index.js';

// Observed from stock Dynamo 1.6.1: dynamo.llm.compute_block_hash_for_seq, and the sequence
// hashes in a stock mocker's KV events (test/interop/python/block_hashes.py).
const fixture = JSON.parse(
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../../test/interop/fixtures/llm-1.6.1/block-hashes.json'), 'utf8'),
) as {
  cases: Array<{ name: string; block_size: number; token_ids: number[]; args: Record<string, unknown>; block_hashes: string[]; sequence_hashes?: string[] }>;
};
// EAGLE windows and multimodal hashes are router features not exposed by this API yet.
const cases = fixture.cases.filter((c) => Object.keys(c.args).every((k) => k === 'lora_name' || k === 'cache_namespace'));

describe('KV block hashes equal stock Dynamo 1.6.1', () => {
  it('covers plain, partial, large-id, LoRA and cache-namespace sequences', () => {
    expect(cases.length).toBeGreaterThanOrEqual(12);
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const lora = c.args.lora_name as string | undefined;
    const salt = c.args.cache_namespace as string | undefined;
    const blocks = computeBlockHashes(Uint32Array.from(c.token_ids), c.block_size, {
      ...(lora !== undefined && { loraName: lora }),
      ...(salt !== undefined && { salt }),
    });
    expect(Array.from(blocks, String)).toEqual(c.block_hashes);
    if (c.sequence_hashes) expect(Array.from(computeSequenceHashes(blocks), String)).toEqual(c.sequence_hashes);
  });

  it('refuses a block size of 0', () => {
    expect(() => computeBlockHashes(Uint32Array.of(1, 2), 0)).toThrow('blockSize must be at least 1, got 0');
  });
});
