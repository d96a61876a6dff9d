import { DistributedRuntime, InvalidArgument, loadRuntimeConfig } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SnapshotPublisher } from '../src/internal.js';

const labels = { dynamo_namespace: 'dynamo', dynamo_component: 'backend', dynamo_endpoint: 'generate', model: 'm', model_name: 'm' };

describe('SnapshotPublisher', () => {
  let runtime: DistributedRuntime;
  let publisher: SnapshotPublisher;
  beforeAll(async () => {
    runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' }) });
    publisher = new SnapshotPublisher(runtime, labels, [2, 3]);
  });
  afterAll(() => runtime.shutdown());

  it('keeps the used blocks of each rank for routing', () => {
    expect(publisher.usedBlocks(2)).toBe(0);
    publisher.publish(2, { kvUsedBlocks: 7, kvTotalBlocks: 10, gpuCacheUsage: 0.7 });
    expect(publisher.usedBlocks(2)).toBe(7);
    expect(publisher.usedBlocks(3)).toBe(0);
  });

  it.each([
    [0, { kvUsedBlocks: 1, kvTotalBlocks: 1, gpuCacheUsage: 0 }, /dpRank: must be one of the ranks componentMetricsDpRanks\(\) returned \(2, 3\)/],
    [2, { kvUsedBlocks: -1, kvTotalBlocks: 1, gpuCacheUsage: 0 }, /ComponentSnapshot\.kvUsedBlocks/],
    [2, { kvUsedBlocks: 1, kvTotalBlocks: 1, gpuCacheUsage: 1.5 }, /ComponentSnapshot\.gpuCacheUsage/],
    [2, { kvUsedBlocks: 1, kvTotalBlocks: 1, gpuCacheUsage: 0, usage: 1 }, /ComponentSnapshot/],
  ])('refuses rank %j with %j, naming what is wrong', (rank, snapshot, message) => {
    const attempt = () => publisher.publish(rank, snapshot as never);
    expect(attempt).toThrow(InvalidArgument);
    expect(attempt).toThrow(message);
  });
});
