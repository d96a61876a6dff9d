import { describe, expect, it } from 'vitest';
import { kernels } from '@dynamo/core';

type CodedError = Error & { code?: string };

function thrown(fn: () => unknown): CodedError {
  try {
    fn();
  } catch (e) {
    return e as CodedError;
  }
  throw new Error('expected the call to throw');
}

const spec: kernels.LayoutSpec = {
  layout: 'NHD',
  dtype: 'bf16',
  numLayers: 2,
  outerDim: 2,
  blockSize: 16,
  numHeads: 8,
  headDim: 128,
};
// One block: 2 layers × K/V chunk pointers and one universal buffer. Never dereferenced here.
const blocks = [0x10000n, 0x20000n, 0x30000n, 0x40000n];
const universal = [0x100000n];

const info = kernels.buildInfo();
const gpu = kernels.cudaAvailable();

describe('kernels on a machine without a usable GPU', () => {
  it('says whether it was built with CUDA, and a stub build never reports CUDA', () => {
    expect(typeof info.withCuda).toBe('boolean');
    if (info.withCuda) {
      expect(info.targets).toContain('sm_80');
    } else {
      expect(gpu).toBe(false);
      expect(info.stubReason).toMatch(/built without CUDA/);
    }
  });

  // The build this runs on: "built without CUDA" from a stub build, or the CUDA release and
  // targets from a CUDA build that finds no device.
  const names = info.withCuda ? /dynamo-kernels was built with CUDA [\d.]+ for sm_80/ : /dynamo-kernels was built without CUDA/;

  it.skipIf(gpu)('reports cudaAvailable() false', () => {
    expect(kernels.cudaAvailable()).toBe(false);
  });

  it.skipIf(gpu)('throws CUDA_UNAVAILABLE naming the build from the batched copy', () => {
    const err = thrown(() => kernels.batchedCopy([0x1000n], [0x2000n], [64n], 0n));
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('CUDA_UNAVAILABLE');
    expect(err.message).toMatch(/^batched_copy: /);
    expect(err.message).toMatch(names);
  });

  it.skipIf(gpu)('throws CUDA_UNAVAILABLE naming the build from both layout conversions', () => {
    const gather = thrown(() => kernels.blocksToUniversal(blocks, universal, spec));
    expect(gather.code).toBe('CUDA_UNAVAILABLE');
    expect(gather.message).toMatch(/^blocks_to_universal: /);
    expect(gather.message).toMatch(names);
    const scatter = thrown(() => kernels.universalToBlocks(universal, blocks, { ...spec, layout: 'HND', dtype: 'fp8' }, 0n));
    expect(scatter.code).toBe('CUDA_UNAVAILABLE');
    expect(scatter.message).toMatch(/^universal_to_blocks: /);
    expect(scatter.message).toMatch(names);
  });
});

describe('kernel arguments are rejected before CUDA is touched', () => {
  function invalid(fn: () => unknown, argument: string): CodedError {
    const err = thrown(fn);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toContain(`invalid argument ${argument}:`);
    return err;
  }

  it('names a negative pointer', () => {
    const err = invalid(() => kernels.batchedCopy([0x1000n, -8n], [0x2000n, 0x3000n], [8n, 8n]), 'srcs[1]');
    expect(err.message).toContain('non-negative');
  });

  it('names a pointer or size that does not fit in 64 bits', () => {
    invalid(() => kernels.batchedCopy([0x1000n], [2n ** 64n], [8n]), 'dsts[0]');
    invalid(() => kernels.batchedCopy([0x1000n], [0x2000n], [2n ** 70n]), 'sizes[0]');
    invalid(() => kernels.blocksToUniversal(blocks, [2n ** 64n + 1n], spec), 'universal[0]');
  });

  it('names a pointer passed as a number instead of a bigint', () => {
    const err = invalid(() => kernels.batchedCopy([0x1000 as unknown as bigint], [0x2000n], [8n]), 'srcs[0]');
    expect(err.message).toContain('must be a bigint, got a number');
  });

  it('names a bad stream handle', () => {
    invalid(() => kernels.batchedCopy([0x1000n], [0x2000n], [8n], -1n), 'stream');
    const err = invalid(() => kernels.batchedCopy([0x1000n], [0x2000n], [8n], 0 as unknown as bigint), 'stream');
    expect(err.message).toContain('0n for the default stream');
  });

  it('rejects arrays of mismatched lengths', () => {
    const err = invalid(() => kernels.batchedCopy([0x1000n, 0x1100n], [0x2000n], [8n, 8n]), 'dsts');
    expect(err.message).toContain('has 1 entry but srcs has 2 entries');
    invalid(() => kernels.batchedCopy([0x1000n], [0x2000n], []), 'sizes');
    const blocksErr = invalid(() => kernels.blocksToUniversal(blocks.slice(1), universal, spec), 'blocks');
    expect(blocksErr.message).toContain('universal.length (1) × numLayers (2) × outerDim (2) = 4');
  });

  it('rejects null pointers, overflowing and overlapping pairs', () => {
    invalid(() => kernels.batchedCopy([0n], [0x2000n], [8n]), 'srcs[0]');
    invalid(() => kernels.batchedCopy([2n ** 64n - 4n], [0x2000n], [8n]), 'sizes[0]');
    const err = invalid(() => kernels.batchedCopy([0x1000n], [0x1004n], [8n]), 'dsts[0]');
    expect(err.message).toContain('overlaps');
    invalid(() => kernels.universalToBlocks([0n], blocks, spec), 'universal[0]');
  });

  it('names a bad layout spec', () => {
    invalid(() => kernels.blocksToUniversal(blocks, universal, { ...spec, headDim: 0 }), 'spec.headDim');
    invalid(() => kernels.blocksToUniversal(blocks, universal, { ...spec, numHeads: -2 }), 'spec.numHeads');
    invalid(() => kernels.blocksToUniversal(blocks, universal, { ...spec, blockSize: 1.5 }), 'spec.blockSize');
    invalid(() => kernels.blocksToUniversal(blocks, universal, { ...spec, layout: 'NDH' as 'NHD' }), 'spec.layout');
    invalid(() => kernels.blocksToUniversal(blocks, universal, { ...spec, dtype: 'f64' as 'f32' }), 'spec.dtype');
    const huge = invalid(
      () => kernels.blocksToUniversal([0x1000n], [0x2000n], { ...spec, numLayers: 1, outerDim: 1, blockSize: 65536, numHeads: 256, headDim: 256 }),
      'spec',
    );
    expect(huge.message).toContain('4294967295');
  });
});
