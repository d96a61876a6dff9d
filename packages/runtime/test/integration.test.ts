// Worker processes and a caller over real discovery backends and request planes: the behaviour a
// user relies on, for every discovery backend x request plane that crosses processes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Context, DistributedRuntime, loadRuntimeConfig, type Client } from '../src/index.js';
import { EtcdServer } from '@dynamo/testing/etcd';
import { waitFor } from '@dynamo/testing/free-port';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';
import { startWorker, type WorkerProcess } from '@dynamo/testing/worker-process';

interface Setup {
  name: string;
  env(): Record<string, string>;
  /** Seconds after which a crashed worker's record is gone. */
  ttlSecs: number;
}

let etcd: EtcdServer | undefined;
let nats: NatsTestServer | undefined;
const fileRoot = mkdtempSync(join(tmpdir(), 'dynamo-itest-'));

const setups: Setup[] = [
  {
    name: 'file + tcp',
    ttlSecs: 2,
    env: () => ({ DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: fileRoot, DYN_FILE_KV_TTL_SECS: '2', DYN_REQUEST_PLANE: 'tcp' }),
  },
  {
    name: 'file + nats',
    ttlSecs: 2,
    env: () => ({ DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: fileRoot, DYN_FILE_KV_TTL_SECS: '2', DYN_REQUEST_PLANE: 'nats', NATS_SERVER: nats!.url }),
  },
  {
    name: 'etcd + tcp',
    ttlSecs: 3,
    env: () => ({ DYN_DISCOVERY_BACKEND: 'etcd', ETCD_ENDPOINTS: etcd!.endpoint, ETCD_LEASE_TTL: '3', DYN_REQUEST_PLANE: 'tcp' }),
  },
  {
    name: 'etcd + nats',
    ttlSecs: 3,
    env: () => ({ DYN_DISCOVERY_BACKEND: 'etcd', ETCD_ENDPOINTS: etcd!.endpoint, ETCD_LEASE_TTL: '3', DYN_REQUEST_PLANE: 'nats', NATS_SERVER: nats!.url }),
  },
];

beforeAll(async () => {
  [etcd, nats] = await Promise.all([EtcdServer.start(), startNatsServer()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([etcd?.dispose(), nats?.stop()]);
  rmSync(fileRoot, { recursive: true, force: true });
});

async function collect(stream: AsyncIterable<unknown>): Promise<Array<{ i: number; instance: string }>> {
  const items: Array<{ i: number; instance: string }> = [];
  for await (const item of stream) items.push(item as { i: number; instance: string });
  return items;
}

describe.each(setups)('$name', (setup) => {
  let caller: DistributedRuntime;
  let client: Client;
  const workers: WorkerProcess[] = [];
  let component: string;

  beforeAll(async () => {
    component = `w${setup.name.replace(/\W+/g, '')}`;
    caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...setup.env(), DYN_LOG: 'error' }) });
    workers.push(...(await Promise.all([startWorker(setup.env(), ['itest', component]), startWorker(setup.env(), ['itest', component])])));
    client = await caller.endpoint(`itest.${component}.generate`).client();
    await waitFor('both instances', () => client.instanceIds().length === 2);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await caller?.shutdown();
  });

  it('streams a response', async () => {
    const items = await collect(client.generate({ count: 5 }));
    expect(items.map((x) => x.i)).toEqual([0, 1, 2, 3, 4]);
  });

  it('shares round-robin load between two instances', async () => {
    const served = new Map<string, number>();
    for (let n = 0; n < 6; n++) {
      const [first] = await collect(client.roundRobin({ count: 1 }));
      served.set(first!.instance, (served.get(first!.instance) ?? 0) + 1);
    }
    expect([...served.values()]).toEqual([3, 3]);
  });

  it('sends direct to a chosen instance', async () => {
    for (const worker of workers) {
      const items = await collect(client.direct({ count: 2 }, worker.instanceId));
      expect(items.every((x) => x.instance === worker.instanceId.toString(16))).toBe(true);
    }
  });

  it('reads a direct response in batches that add up to the whole stream, in order', async () => {
    const batches: Array<Array<{ i: number }>> = [];
    for await (const batch of client.directBatches<{ i: number }>({ count: 500 }, workers[0]!.instanceId)) batches.push(batch);
    expect(batches.flat().map((x) => x.i)).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(batches.every((b) => b.length > 0)).toBe(true);
  });

  it('sends the first item at once, even when the handler keeps the event loop busy after it', async () => {
    // Writes are batched per tick; the first item (the time to first token) must not wait for
    // the end of a tick that a fast engine fills with the rest of its output.
    const arrivals: number[] = [];
    for await (const _ of client.direct({ count: 2, spinMs: 600 }, workers[0]!.instanceId)) arrivals.push(performance.now());
    expect(arrivals).toHaveLength(2);
    expect(arrivals[1]! - arrivals[0]!).toBeGreaterThan(300);
  });

  it('delivers a stop to the worker, which sees isStopped()', async () => {
    const context = new Context();
    let n = 0;
    for await (const _ of client.direct({ mode: 'forever', delayMs: 5 }, workers[0]!.instanceId, { context })) {
      if (++n === 3) context.stopGenerating();
    }
    await workers[0]!.waitForLine(new RegExp(`^STOPPED ${context.id()}$`), 5000);
  });

  it('surfaces a handler StreamIncomplete as an incomplete stream at the caller', async () => {
    const items: unknown[] = [];
    const error = await (async () => {
      try {
        for await (const item of client.generate({ mode: 'incomplete' })) items.push(item);
      } catch (err) {
        return err as Error;
      }
      return undefined;
    })();
    expect(items).toHaveLength(1);
    expect(error?.name).toBe('Disconnected');
  });

  it('forgets an instance that was SIGKILLed within its TTL and routes only to the survivor', async () => {
    const [survivor, victim] = workers as [WorkerProcess, WorkerProcess];
    await victim.kill();
    await waitFor('the killed instance to leave discovery', () => !client.instanceIds().includes(victim.instanceId), (setup.ttlSecs + 6) * 1000);
    for (let n = 0; n < 4; n++) {
      const items = await collect(client.generate({ count: 1 }));
      expect(items[0]!.instance).toBe(survivor.instanceId.toString(16));
    }
  }, 30_000);
});
