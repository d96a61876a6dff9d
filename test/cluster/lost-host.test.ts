// A worker's host lost mid-stream (its link down: no FIN, no RST), on default host settings:
// etcd + NATS on one host, two frontends on another (one migrating, one not), a follow-prompt
// worker on each of two more. Every stream on the lost host migrates and ends exactly as an
// unbroken one would, within the bound docs/compatibility.md states (TCP keep-alive: ~11 s after
// the worker's last packet); without migration the client gets the API's error event within the
// same bound; healed, the worker serves again without a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Cluster } from '@dynamo/testing/cluster';
import type { Deployment } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { counter } from '@dynamo/testing/interop-stack';
import { followWorker, instances, skipReason, startCluster, Streams } from './support.js';

/** From the partition to the last affected stream's end: keep-alive's ~11 s, a resend, and slack for a busy machine. */
const BOUND_MS = 20_000;
const TOKENS = 150;

describe.skipIf(skipReason !== undefined)('a worker host lost mid-stream (ours + ours, etcd + tcp, defaults)', () => {
  let cluster: Cluster;
  let deployment: Deployment;
  let migrating: string;
  let failing: string;
  const workerMetrics = (host: string) => `http://${cluster.host(host).address}:9090/metrics`;

  beforeAll(async () => {
    ({ cluster, deployment } = await startCluster(['fe', 'w1', 'w2'], { name: 'etcd + tcp', discovery: 'etcd', plane: 'tcp' }));
    for (const host of ['w1', 'w2']) deployment.sampleWorker(followWorker(20), { DYN_SYSTEM_PORT: '9090' }, cluster.host(host));
    [{ url: migrating }, { url: failing }] = await Promise.all([
      deployment.frontend(['--migration-limit', '3'], {}, cluster.host('fe')),
      deployment.frontend(['--migration-limit', '0'], {}, cluster.host('fe')),
    ]);
    await waitFor('both workers behind both frontends', async () => (await instances(migrating)) === 2 && (await instances(failing)) === 2, 60_000);
  });

  afterAll(async () => {
    await deployment?.stop();
    await cluster?.destroy();
  });

  it('answers every request across hosts', async () => {
    const streams = new Streams(migrating, 6, 16);
    expect((await streams.check()).exact).toBe(6);
  });

  it('migrates every stream of the lost host, each exact, within the bound; the healed worker serves again', async () => {
    const before = await counter(`${migrating}/metrics`, 'dynamo_frontend_model_migration_total');
    const streams = new Streams(migrating, 8, TOKENS);
    await streams.reach(40);
    const partitioned = performance.now();
    await cluster.host('w1').partition();
    const { exact, wrong, results } = await streams.check();
    const afterMs = performance.now() - partitioned;
    const migrated = (await counter(`${migrating}/metrics`, 'dynamo_frontend_model_migration_total')) - before;
    console.info(
      `partition row, ours + ours: ${exact} of ${results.length} streams exact, ${migrated} migrated, last stream ended ${(afterMs / 1000).toFixed(1)} s after the partition`,
    );
    expect(wrong).toEqual([]);
    expect(exact).toBe(8);
    expect(await counter(`${migrating}/metrics`, 'dynamo_frontend_model_migration_total')).toBeGreaterThan(before);
    expect(afterMs).toBeLessThan(BOUND_MS);

    await cluster.host('w1').heal();
    await waitFor('w1 back behind the frontend', async () => (await instances(migrating)) === 2, 60_000);
    const served = await counter(workerMetrics('w1'), 'dynamo_component_requests_total');
    expect((await new Streams(migrating, 6, 16).check()).exact).toBe(6);
    expect(await counter(workerMetrics('w1'), 'dynamo_component_requests_total')).toBeGreaterThan(served);
  });

  it('without migration, fails the lost host’s streams with an error event within the bound, never a hang', async () => {
    await waitFor('both workers behind the frontend', async () => (await instances(failing)) === 2, 60_000);
    const streams = new Streams(failing, 8, TOKENS);
    await streams.reach(40);
    const partitioned = performance.now();
    await cluster.host('w2').partition();
    const { exact, wrong } = await streams.check();
    expect(performance.now() - partitioned).toBeLessThan(BOUND_MS);
    // Round-robin put half of them on each worker.
    expect(exact).toBe(4);
    expect(wrong).toHaveLength(4);
    for (const message of wrong) expect(message).toMatch(/stream|connection|disconnect|incomplete/i);
    await cluster.host('w2').heal();
  });
});
