import { KvRouter } from '@dynamo/core';
import { DistributedRuntime, loadRuntimeConfig, MemKvSpace } from '@dynamo/runtime';
import { EVENT_SOURCES_BUCKET, EventSourceRecordSchema, parseJson } from '@dynamo/runtime/internal';
import { Publisher as ZmqPublisher } from 'zeromq';
import { afterEach, describe, expect, it } from 'vitest';

import { waitFor } from '@dynamo/testing/free-port';
import { KV_EVENTS_TOPIC, KV_METRICS_TOPIC, KvEventPublisher, LoadPublisher } from '../src/internal.js';

const scope = { namespace: 'dyn', component: 'backend', endpoint: 'generate' };
const runtimes: DistributedRuntime[] = [];

async function pair() {
  const space = new MemKvSpace();
  const make = async () => {
    const rt = await DistributedRuntime.create({
      config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error', DYN_EVENT_PLANE_HOST: '127.0.0.1' }),
      memSpace: space,
    });
    runtimes.push(rt);
    return rt;
  };
  return { worker: await make(), frontend: await make() };
}

afterEach(async () => {
  for (const rt of runtimes.splice(0)) await rt.shutdown();
});

/** A router fed from the event plane, as the frontend feeds it. */
async function routerOn(frontend: DistributedRuntime, blockSize: number) {
  const router = new KvRouter({ blockSize });
  const loads: bigint[] = [];
  await frontend.eventSubscriber(scope, KV_EVENTS_TOPIC, (e) => router.applyEventEnvelope(e));
  await frontend.eventSubscriber(scope, KV_METRICS_TOPIC, (e) => loads.push(router.applyLoadEnvelope(e)));
  return { router, loads };
}

const overlap = (router: KvRouter, worker: bigint, tokens: number[], loraName?: string) =>
  router.route(`r${Math.random()}`, Uint32Array.from(tokens), [{ workerId: worker }], 0, Date.now(), loraName)!.overlapBlocks;

describe('KvEventPublisher', () => {
  it("registers the event source stock routers require and its engine's pushed events reach a router's index", async () => {
    const { worker, frontend } = await pair();
    const { router } = await routerOn(frontend, 4);
    const publisher = await KvEventPublisher.create(worker, { scope, dpRank: 0, blockSize: 4 });
    const [entry] = await worker.discovery.store.list(EVENT_SOURCES_BUCKET);
    const record = EventSourceRecordSchema.parse(parseJson(entry!.value));
    expect(record).toMatchObject({
      type: 'EventSource',
      topic: 'kv-events',
      publisher_id: publisher.publisherId,
      metadata: { worker: { worker_id: worker.instanceId, dp_rank: 0 }, kv_state_endpoint: { namespace: 'dyn', component: 'backend', name: 'generate' } },
    });

    // A ZMQ subscriber joins late: publish until the router has the blocks.
    await waitFor('the stored blocks in the index', () => {
      publisher.events.stored({ tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], blockIds: [11n, 12n] });
      return router.workerBlocks(worker.instanceId) === 2;
    });
    expect(overlap(router, worker.instanceId, [1, 2, 3, 4, 5, 6, 7, 8, 9])).toBe(2);
    publisher.events.removed([12n]);
    await waitFor('the removal', () => router.workerBlocks(worker.instanceId) === 1);
    expect(() => publisher.events.stored({ tokenIds: [1, 2, 3], blockIds: [13n] })).toThrow(/3 token ids do not fill 1 blocks of 4/);
    publisher.events.cleared();
    await waitFor('the clear', () => router.workerBlocks(worker.instanceId) === 0);

    await publisher.close();
    expect(await worker.discovery.store.list(EVENT_SOURCES_BUCKET)).toEqual([]);
  });

  it("scopes a LoRA adapter's blocks by its name: only requests for that adapter match them", async () => {
    const { worker, frontend } = await pair();
    const { router } = await routerOn(frontend, 4);
    const publisher = await KvEventPublisher.create(worker, { scope, dpRank: 0, blockSize: 4 });
    await waitFor('the adapter blocks in the index', () => {
      publisher.events.stored({ tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], blockIds: [21n, 22n], loraName: 'pirate' });
      return router.workerBlocks(worker.instanceId) === 2;
    });
    const prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    expect(overlap(router, worker.instanceId, prompt, 'pirate')).toBe(2);
    expect(overlap(router, worker.instanceId, prompt)).toBe(0);
    expect(overlap(router, worker.instanceId, prompt, 'other')).toBe(0);
    await publisher.close();
  });

  it('answers recovery queries on worker_kv_query_source_{publisher id:x} and names it in the event source', async () => {
    const { worker, frontend } = await pair();
    const publisher = await KvEventPublisher.create(worker, { scope, dpRank: 0, blockSize: 4, recovery: { namespace: 'dyn', component: 'backend' } });
    const name = `worker_kv_query_source_${publisher.publisherId.toString(16)}`;
    const [entry] = await worker.discovery.store.list(EVENT_SOURCES_BUCKET);
    expect(EventSourceRecordSchema.parse(parseJson(entry!.value)).metadata.recovery_target).toMatchObject({
      type: 'Endpoint',
      namespace: 'dyn',
      component: 'backend',
      endpoint: name,
    });
    publisher.events.stored({ tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], blockIds: [11n, 12n] });
    publisher.events.removed([12n]);

    const client = await frontend.namespace('dyn').component('backend').endpoint(name).client();
    await client.waitForInstances();
    const ask = async (request: Record<string, unknown>) => {
      const replies: unknown[] = [];
      for await (const reply of client.random({ worker_id: worker.instanceId, dp_rank: 0, ...request }, { plainItems: true })) replies.push(reply);
      return replies;
    };
    const [events] = (await ask({ start_event_id: 2, end_event_id: null })) as Array<{
      Events: { events: Array<{ event: { event_id: number; data: unknown } }>; last_event_id: number };
    }>;
    expect(events!.Events.last_event_id).toBe(2);
    expect(events!.Events.events.map((e) => [e.event.event_id, e.event.data])).toEqual([[2, { removed: { block_hashes: [12] } }]]);
    const [dump] = (await ask({ start_event_id: null, end_event_id: null })) as Array<{ TreeDump: { events: unknown[] } }>;
    expect(dump!.TreeDump.events).toHaveLength(1);
    expect(await ask({ start_event_id: 9, end_event_id: null })).toEqual([{ TooNew: { requested_start: 9, requested_end: null, newest_available: 2 } }]);
    client.close();
    await publisher.close();
  });

  it("relays a vLLM engine's raw ZMQ batches, skipping one that does not decode", async () => {
    const { worker, frontend } = await pair();
    const { router } = await routerOn(frontend, 4);
    const engine = new ZmqPublisher({ linger: 0 });
    await engine.bind('tcp://127.0.0.1:0');
    try {
      const publisher = await KvEventPublisher.create(worker, { scope, dpRank: 0, blockSize: 4 });
      publisher.relayFrom(engine.lastEndpoint!);
      // [ts, [["BlockStored", [111, 222], nil, [1..8], 4, nil, "GPU"]], 0], as vLLM's msgspec writes it.
      const stored = Buffer.from([
        0x93,
        0x00,
        0x91,
        0x97,
        0xab,
        ...Buffer.from('BlockStored'),
        0x92,
        0x6f,
        0xcc,
        0xde,
        0xc0,
        0x98,
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        0x04,
        0xc0,
        0xa3,
        ...Buffer.from('GPU'),
        0x00,
      ]);
      const seq = Buffer.alloc(8);
      await waitFor('the relayed blocks in the index', async () => {
        await engine.send(['', seq, Buffer.from([0xc1])]);
        await engine.send(['', seq, stored]);
        return router.workerBlocks(worker.instanceId) === 2;
      });
      expect(overlap(router, worker.instanceId, [1, 2, 3, 4, 5, 6, 7, 8])).toBe(2);
    } finally {
      engine.close();
    }
  });
});

describe('LoadPublisher', () => {
  it('sends a rank’s load when it changes, not when it repeats', async () => {
    const { worker, frontend } = await pair();
    const { loads } = await routerOn(frontend, 4);
    const load = await LoadPublisher.create(worker, scope);
    let probe = 0;
    // The ZMQ subscription takes a moment: change the value until one report lands.
    await waitFor('a load report', async () => {
      load.update(0, { kvUsedBlocks: ++probe });
      await new Promise((r) => setTimeout(r, 20));
      return loads.length > 0;
    });
    const seen = loads.length;
    expect(loads.every((id) => id === worker.instanceId)).toBe(true);
    for (let i = 0; i < 5; i++) load.update(0, { kvUsedBlocks: 1000 });
    await waitFor('the change', () => loads.length === seen + 1);
    load.update(0, { kvUsedBlocks: 1000 });
    await new Promise((r) => setTimeout(r, 50));
    expect(loads.length).toBe(seen + 1);
    await load.close();
  });
});
