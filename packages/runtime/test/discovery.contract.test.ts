/**
 * The behaviour every discovery backend owes its users, run against mem, file and a real etcd.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EtcdKvStore } from '../src/discovery/etcd.js';
import { FileKvStore } from '../src/discovery/file.js';
import { KeyExistsError, type KvEvent, type KvStore } from '../src/discovery/kv-store.js';
import { MemKvSpace, MemKvStore } from '../src/discovery/mem.js';
import { parseJson, stringifyJson } from '../src/json.js';
import { createLogging } from '../src/logger.js';
import { EtcdServer } from '@dynamo/testing/etcd';
import { waitFor } from '@dynamo/testing/free-port';

const log = createLogging({ filter: 'error' }).child('test.discovery');

/** A watch running in the background, collecting what it yields. */
function watchInto(store: KvStore, bucket: string, prefix: string) {
  const abort = new AbortController();
  const events: KvEvent[] = [];
  let ended = false;
  const done = (async () => {
    for await (const event of store.watch(bucket, prefix, abort.signal)) events.push(event);
    ended = true;
  })();
  return {
    events,
    get ended() {
      return ended;
    },
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

/** One isolated world per test: stores opened from it see each other and nothing else. */
interface World {
  bucket: string;
  open(): Promise<KvStore>;
  dispose(): Promise<void>;
}

let etcd: EtcdServer | undefined;
let etcdWorlds = 0;

const backends: Array<{ name: string; world: () => Promise<World> }> = [
  {
    name: 'mem',
    world: async () => {
      const space = new MemKvSpace();
      return { bucket: 'v1/instances', open: async () => new MemKvStore({ space }), dispose: async () => undefined };
    },
  },
  {
    name: 'file',
    world: async () => {
      const root = await mkdtemp(join(tmpdir(), 'dynamo-test-file-kv-'));
      return {
        bucket: 'v1/instances',
        open: async () => new FileKvStore({ root, log }),
        dispose: () => rm(root, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'etcd',
    world: async () => {
      etcd ??= await EtcdServer.start();
      const endpoint = etcd.endpoint;
      // One etcd for the file; a bucket per test keeps the tests apart.
      return {
        bucket: `test${++etcdWorlds}/v1/instances`,
        open: () => EtcdKvStore.connect({ endpoints: [endpoint], leaseTtlSecs: 5, log }),
        dispose: async () => undefined,
      };
    },
  },
];

afterAll(async () => {
  await etcd?.dispose();
});

describe.each(backends)('$name discovery store', ({ world: makeWorld }) => {
  let world: World;
  const stores: KvStore[] = [];
  const open = async () => {
    const store = await world.open();
    stores.push(store);
    return store;
  };

  beforeAll(async () => {
    // Starting etcd can take a few seconds on a loaded machine; do it outside any single test.
    const w = await makeWorld();
    await w.dispose();
  }, 30_000);

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await world.dispose();
  });

  const setup = async () => {
    world = await makeWorld();
  };

  it('creates a key, lists it, and refuses to create it again', async () => {
    await setup();
    const store = await open();
    await store.create(world.bucket, 'dynamo/backend/generate/1', '{"a":1}');
    expect(await store.list(world.bucket)).toEqual([{ key: 'dynamo/backend/generate/1', value: '{"a":1}' }]);
    await expect(store.create(world.bucket, 'dynamo/backend/generate/1', '{"a":2}')).rejects.toBeInstanceOf(KeyExistsError);
    expect(await store.list(world.bucket)).toEqual([{ key: 'dynamo/backend/generate/1', value: '{"a":1}' }]);
  });

  it('put creates or overwrites; delete removes and tolerates a missing key', async () => {
    await setup();
    const store = await open();
    await store.put(world.bucket, 'k', 'one');
    await store.put(world.bucket, 'k', 'two');
    expect(await store.list(world.bucket)).toEqual([{ key: 'k', value: 'two' }]);
    await store.delete(world.bucket, 'k');
    await store.delete(world.bucket, 'k');
    await store.delete(world.bucket, 'never-there');
    expect(await store.list(world.bucket)).toEqual([]);
    // A deleted key can be created again.
    await store.create(world.bucket, 'k', 'three');
    expect(await store.list(world.bucket)).toEqual([{ key: 'k', value: 'three' }]);
  });

  it('lists by prefix, and keeps buckets apart', async () => {
    await setup();
    const store = await open();
    await store.put(world.bucket, 'dynamo/backend/generate/a', '1');
    await store.put(world.bucket, 'dynamo/backend/generate/b', '2');
    await store.put(world.bucket, 'dynamo/prefill/generate/c', '3');
    await store.put(`${world.bucket}-other`, 'dynamo/backend/generate/z', '4');
    const keys = (await store.list(world.bucket, 'dynamo/backend/')).map((e) => e.key).sort();
    expect(keys).toEqual(['dynamo/backend/generate/a', 'dynamo/backend/generate/b']);
    expect(await store.list(world.bucket, 'nothing/')).toEqual([]);
    expect((await store.list(world.bucket)).length).toBe(3);
  });

  it('keeps a JSON value byte for byte, including u64 ids above 2^53', async () => {
    await setup();
    const store = await open();
    const value = stringifyJson({ type: 'Endpoint', instance_id: 7587890531256969735n, transport: { tcp: '10.0.0.5:41234/694d9a3c5e1f2a07/generate' } });
    await store.create(world.bucket, 'dynamo/backend/generate/694d9a3c5e1f2a07', value);
    const [entry] = await store.list(world.bucket);
    expect(entry?.value).toBe(value);
    expect((parseJson(entry!.value) as { instance_id: bigint }).instance_id).toBe(7587890531256969735n);
  });

  it('gives each store its own u64 instance id', async () => {
    await setup();
    const [a, b] = [await open(), await open()];
    for (const store of [a, b]) {
      expect(typeof store.instanceId).toBe('bigint');
      expect(store.instanceId).toBeGreaterThan(0n);
      expect(store.instanceId).toBeLessThan(1n << 64n);
    }
    expect(a.instanceId).not.toBe(b.instanceId);
  });

  it('watch yields the current entries first, then puts and deletes under the prefix', async () => {
    await setup();
    const store = await open();
    await store.put(world.bucket, 'ns/comp/ep/1', 'first');
    await store.put(world.bucket, 'elsewhere/1', 'ignored');
    const watch = watchInto(store, world.bucket, 'ns/comp/ep/');
    await waitFor('the snapshot', () => watch.events.length >= 1);
    expect(watch.events[0]).toEqual({ type: 'put', key: 'ns/comp/ep/1', value: 'first' });

    await store.put(world.bucket, 'ns/comp/ep/2', 'second');
    await waitFor('the new key', () => watch.events.length >= 2);
    await store.put(world.bucket, 'ns/comp/ep/2', 'second, changed');
    await waitFor('the change', () => watch.events.length >= 3);
    await store.delete(world.bucket, 'ns/comp/ep/1');
    await waitFor('the delete', () => watch.events.length >= 4);
    await store.put(world.bucket, 'elsewhere/2', 'ignored');
    await store.put(`${world.bucket}-other`, 'ns/comp/ep/9', 'ignored');
    await store.put(world.bucket, 'ns/comp/ep/3', 'third');
    await waitFor('the last key', () => watch.events.length >= 5);
    await watch.stop();

    expect(watch.events).toEqual([
      { type: 'put', key: 'ns/comp/ep/1', value: 'first' },
      { type: 'put', key: 'ns/comp/ep/2', value: 'second' },
      { type: 'put', key: 'ns/comp/ep/2', value: 'second, changed' },
      { type: 'delete', key: 'ns/comp/ep/1' },
      { type: 'put', key: 'ns/comp/ep/3', value: 'third' },
    ]);
  });

  it('watch ends when its signal aborts, and at once if it was already aborted', async () => {
    await setup();
    const store = await open();
    const watch = watchInto(store, world.bucket, '');
    await new Promise((r) => setTimeout(r, 50));
    await watch.stop();
    expect(watch.ended).toBe(true);
    const aborted = AbortSignal.abort();
    const seen: KvEvent[] = [];
    for await (const event of store.watch(world.bucket, '', aborted)) seen.push(event);
    expect(seen).toEqual([]);
  });

  it('another store sees what this one writes, and sees it go when this one closes', async () => {
    await setup();
    const [worker, frontend] = [await open(), await open()];
    const watch = watchInto(frontend, world.bucket, 'dynamo/');
    await worker.create(world.bucket, 'dynamo/backend/generate/w', 'record');
    await worker.put(world.bucket, 'dynamo/backend/generate/w2', 'record2');
    await frontend.put(world.bucket, 'dynamo/frontend/x', 'mine');
    await waitFor('the worker keys', () => watch.events.length >= 3);
    expect((await frontend.list(world.bucket)).length).toBe(3);

    await worker.close();
    await waitFor('the worker keys to go', async () => (await frontend.list(world.bucket)).length === 1);
    await waitFor('delete events', () => watch.events.filter((e) => e.type === 'delete').length >= 2);
    await watch.stop();
    expect(
      watch.events
        .filter((e) => e.type === 'delete')
        .map((e) => e.key)
        .sort(),
    ).toEqual(['dynamo/backend/generate/w', 'dynamo/backend/generate/w2']);
    expect(await frontend.list(world.bucket)).toEqual([{ key: 'dynamo/frontend/x', value: 'mine' }]);
  });

  it('ends its own watches and refuses calls once closed', async () => {
    await setup();
    const store = await open();
    const watch = watchInto(store, world.bucket, '');
    await new Promise((r) => setTimeout(r, 50));
    await store.close();
    await waitFor('the watch to end', () => watch.ended);
    await expect(store.put(world.bucket, 'k', 'v')).rejects.toThrow(/closed/);
    await store.close(); // twice is fine
  });
});
