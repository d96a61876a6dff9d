/**
 * The mem backend: stores in one process that share a space behave like processes sharing etcd.
 */
import { describe, expect, it } from 'vitest';
import type { KvEvent } from '../src/discovery/kv-store.js';
import { defaultMemKvSpace, MemKvSpace, MemKvStore } from '../src/discovery/mem.js';
import { waitFor } from '@dynamo/testing/free-port';

describe('mem discovery store', () => {
  it('stores sharing a space see each other; other spaces see nothing', async () => {
    const space = new MemKvSpace();
    const worker = new MemKvStore({ space });
    const frontend = new MemKvStore({ space });
    const stranger = new MemKvStore({ space: new MemKvSpace() });
    await worker.create('v1/instances', 'dynamo/backend/generate/1', '{}');
    expect(await frontend.list('v1/instances')).toEqual([{ key: 'dynamo/backend/generate/1', value: '{}' }]);
    expect(await stranger.list('v1/instances')).toEqual([]);
    await Promise.all([worker.close(), frontend.close(), stranger.close()]);
  });

  it('stores built without a space share the process-wide default one', async () => {
    const a = new MemKvStore();
    const b = new MemKvStore({ space: defaultMemKvSpace });
    await a.put('test-default-space', 'k', 'v');
    expect(await b.list('test-default-space')).toEqual([{ key: 'k', value: 'v' }]);
    await a.close();
    expect(await b.list('test-default-space')).toEqual([]);
    await b.close();
  });

  it('closing a store removes only the keys it wrote last, and watchers hear it', async () => {
    const space = new MemKvSpace();
    const a = new MemKvStore({ space });
    const b = new MemKvStore({ space });
    await a.put('bucket', 'a-only', '1');
    await a.put('bucket', 'shared', 'from a');
    await b.put('bucket', 'shared', 'from b'); // b now owns it, as with an etcd put under b's lease
    const abort = new AbortController();
    const events: KvEvent[] = [];
    const done = (async () => {
      for await (const e of b.watch('bucket', '', abort.signal)) events.push(e);
    })();
    await waitFor('the snapshot', () => events.length >= 2);
    await a.close();
    await waitFor('the delete', () => events.length >= 3);
    abort.abort();
    await done;
    expect(events.at(-1)).toEqual({ type: 'delete', key: 'a-only' });
    expect(await b.list('bucket')).toEqual([{ key: 'shared', value: 'from b' }]);
    await b.close();
  });

  it('takes a fixed instance id when given one', () => {
    expect(new MemKvStore({ space: new MemKvSpace(), instanceId: 0x694d9a3c5e1f2a07n }).instanceId).toBe(0x694d9a3c5e1f2a07n);
  });
});
