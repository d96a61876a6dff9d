// A worker keeps serving across restarts of the servers it depends on.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Client, DistributedRuntime, loadRuntimeConfig } from '../src/index.js';
import { EtcdServer } from '@dynamo/testing/etcd';
import { waitFor } from '@dynamo/testing/free-port';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';
import { startWorker, type WorkerProcess } from '@dynamo/testing/worker-process';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/** Sends until a request succeeds (servers may take a moment to come back). */
async function eventuallyServes(client: Client, expected: bigint): Promise<void> {
  await waitFor(
    'a successful request after the restart',
    async () => {
      const items: Array<{ instance: string }> = [];
      for await (const item of client.generate({ count: 2 })) items.push(item as { instance: string });
      return items.length === 2 && items[0]!.instance === expected.toString(16);
    },
    30_000,
  );
}

describe('restarts', () => {
  it('a worker re-registers with the same instance id after etcd restarts without its data, and serves again', async () => {
    const etcd = await EtcdServer.start();
    cleanups.push(() => etcd.dispose());
    const env = { DYN_DISCOVERY_BACKEND: 'etcd', ETCD_ENDPOINTS: etcd.endpoint, ETCD_LEASE_TTL: '3' };
    const worker: WorkerProcess = await startWorker(env, ['restart', 'etcd']);
    cleanups.push(() => worker.stop());
    const caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
    cleanups.push(() => caller.shutdown());
    const client = await caller.endpoint('restart.etcd.generate').client();
    await client.waitForInstances({ timeoutMs: 10_000 });
    await eventuallyServes(client, worker.instanceId);

    await etcd.restartFresh();
    // The worker's record comes back (same id); the caller's watch resyncs.
    await waitFor(
      'the worker to re-register',
      async () => (await caller.discovery.listInstances('restart', 'etcd', 'generate')).some((r) => r.instance_id === worker.instanceId),
      30_000,
    );
    await eventuallyServes(client, worker.instanceId);
    expect(client.instanceIds()).toEqual([worker.instanceId]);
  }, 90_000);

  it('a worker and a caller on the NATS request plane serve again after NATS restarts', async () => {
    const nats: NatsTestServer = await startNatsServer();
    cleanups.push(() => nats.stop());
    const root = mkdtempSync(join(tmpdir(), 'dynamo-nats-restart-'));
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    // A short ack timeout so requests sent while NATS is down fail fast and get retried.
    const fileEnv = { DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: root, DYN_REQUEST_PLANE: 'nats', NATS_SERVER: nats.url, DYN_NATS_REQUEST_TIMEOUT_SECS: '1' };
    const worker = await startWorker(fileEnv, ['restart', 'nats']);
    cleanups.push(() => worker.stop());
    const caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...fileEnv, DYN_LOG: 'error' }) });
    cleanups.push(() => caller.shutdown());
    const client = await caller.endpoint('restart.nats.generate').client();
    await client.waitForInstances({ timeoutMs: 10_000 });
    await eventuallyServes(client, worker.instanceId);

    await nats.restart();
    await eventuallyServes(client, worker.instanceId);
  }, 90_000);
});
