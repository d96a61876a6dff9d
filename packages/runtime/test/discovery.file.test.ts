/**
 * The file backend in Dynamo's on-disk layout: names, atomic writes, mtime liveness and crash
 * cleanup, seen through real files.
 */
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileKvStore, fileNameOfKey, keyOfFileName } from '../src/discovery/file.js';
import { hexId, parseJson, stringifyJson } from '../src/json.js';
import { createLogging } from '../src/logger.js';
import { waitFor } from '@dynamo/testing/free-port';
import { watchInto } from './watch-into.js';

const log = createLogging({ filter: 'error' }).child('test.discovery.file');
const BUCKET = 'v1/instances';

describe('file discovery store', () => {
  let root: string;
  const stores: FileKvStore[] = [];
  const open = (options: { ttlSecs?: number } = {}) => {
    const store = new FileKvStore({ root, log, ...options });
    stores.push(store);
    return store;
  };
  const bucketDir = () => join(root, 'v1', 'instances');

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'dynamo-test-file-kv-'));
  });

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await rm(root, { recursive: true, force: true });
  });

  it("names files as Dynamo does: the key with every non-alphanumeric byte as %XX, under the bucket's directory", async () => {
    const store = open();
    const id = hexId(store.instanceId);
    const value = stringifyJson({ type: 'Endpoint', namespace: 'dynamo', instance_id: store.instanceId });
    await store.create(BUCKET, `dynamo/backend/generate/${id}`, value);
    await store.put(BUCKET, 'my-ns/comp_1/gen.v2/é', '{}');

    const names = (await readdir(bucketDir())).sort();
    expect(names).toEqual([`dynamo%2Fbackend%2Fgenerate%2F${id}`, 'my%2Dns%2Fcomp%5F1%2Fgen%2Ev2%2F%C3%A9'].sort());
    // The content is the JSON text itself, so a stock Dynamo process reads the same record.
    expect(await readFile(join(bucketDir(), `dynamo%2Fbackend%2Fgenerate%2F${id}`), 'utf8')).toBe(value);
    expect(fileNameOfKey('dynamo/backend/generate/17216e63492ef21f')).toBe('dynamo%2Fbackend%2Fgenerate%2F17216e63492ef21f');
    expect(keyOfFileName('my%2Dns%2Fcomp%5F1%2Fgen%2Ev2%2F%C3%A9')).toBe('my-ns/comp_1/gen.v2/é');
  });

  it('reads records another process wrote in the same layout', async () => {
    const record =
      '{"type":"Endpoint","namespace":"dynamo","component":"backend","endpoint":"generate","instance_id":1666379683541627423,"transport":{"tcp":"127.0.0.1:5000/17216e63492ef21f/generate"}}';
    await mkdir(bucketDir(), { recursive: true });
    await writeFile(join(bucketDir(), 'dynamo%2Fbackend%2Fgenerate%2F17216e63492ef21f'), record);
    const store = open();
    const entries = await store.list(BUCKET, 'dynamo/backend/');
    expect(entries).toEqual([{ key: 'dynamo/backend/generate/17216e63492ef21f', value: record }]);
    expect((parseJson(entries[0]!.value) as { instance_id: bigint }).instance_id).toBe(1666379683541627423n);
  });

  it('ignores temp files and leaves no temp files behind after writes', async () => {
    const store = open();
    await mkdir(bucketDir(), { recursive: true });
    await writeFile(join(bucketDir(), '.tmp_0123456789abcdef'), 'half-written');
    const watch = watchInto(store, BUCKET, '');
    await store.create(BUCKET, 'a', '1');
    await store.put(BUCKET, 'a', '2');
    await store.put(BUCKET, 'b', '3');
    await expect(store.create(BUCKET, 'b', '4')).rejects.toThrow(/already exists/);
    await waitFor('the watch to catch up', () => watch.events.some((e) => e.type === 'put' && e.key === 'b'));
    await watch.stop();
    expect(await store.list(BUCKET)).toEqual(
      expect.arrayContaining([
        { key: 'a', value: '2' },
        { key: 'b', value: '3' },
      ]),
    );
    expect((await store.list(BUCKET)).length).toBe(2);
    expect(watch.events.every((e) => !e.key.startsWith('.'))).toBe(true);
    expect((await readdir(bucketDir())).filter((n) => n.startsWith('.tmp_'))).toEqual(['.tmp_0123456789abcdef']);
  });

  it("ignores and removes a crashed process's file whose mtime is older than the TTL", async () => {
    await mkdir(bucketDir(), { recursive: true });
    const stale = join(bucketDir(), 'dynamo%2Fbackend%2Fgenerate%2Fdead');
    await writeFile(stale, '{"crashed":true}');
    const old = new Date(Date.now() - 60_000);
    await utimes(stale, old, old);

    const store = open({ ttlSecs: 10 });
    expect(await store.list(BUCKET)).toEqual([]);
    await expect(stat(stale)).rejects.toMatchObject({ code: 'ENOENT' });
    // Its key is free again.
    await store.create(BUCKET, 'dynamo/backend/generate/dead', '{"crashed":false}');
  });

  it('lets create take the name of an expired file', async () => {
    await mkdir(bucketDir(), { recursive: true });
    const stale = join(bucketDir(), 'k');
    await writeFile(stale, 'old');
    const old = new Date(Date.now() - 60_000);
    await utimes(stale, old, old);
    const store = open({ ttlSecs: 10 });
    await store.create(BUCKET, 'k', 'new');
    expect(await readFile(stale, 'utf8')).toBe('new');
  });

  it('a watcher sees a record expire when its writer stops touching it', async () => {
    const watcher = open({ ttlSecs: 2 });
    const watch = watchInto(watcher, BUCKET, '');
    // A "process" that wrote its record and then died: nothing touches the file any more.
    await mkdir(bucketDir(), { recursive: true });
    await writeFile(join(bucketDir(), 'dynamo%2Fbackend%2Fgenerate%2F1'), '{}');
    await waitFor('the put', () => watch.events.length >= 1);
    const seenAt = Date.now();
    await waitFor('the expiry', () => watch.events.length >= 2, 10_000);
    await watch.stop();
    expect(watch.events).toEqual([
      { type: 'put', key: 'dynamo/backend/generate/1', value: '{}' },
      { type: 'delete', key: 'dynamo/backend/generate/1' },
    ]);
    expect(Date.now() - seenAt).toBeGreaterThanOrEqual(1000);
    expect(await readdir(bucketDir())).toEqual([]);
  });

  it("the owner's touches keep its record alive past the TTL", async () => {
    // TTL 3 s, touches every 1 s: a late touch on a loaded machine still leaves a margin.
    const owner = open({ ttlSecs: 3 });
    const other = open({ ttlSecs: 3 });
    const watch = watchInto(other, BUCKET, '');
    await owner.create(BUCKET, 'dynamo/backend/generate/live', '{}');
    const file = join(bucketDir(), fileNameOfKey('dynamo/backend/generate/live'));
    const firstMtime = (await stat(file)).mtimeMs;
    const until = Date.now() + 4500;
    // Another store keeps scanning (and would sweep the file if it looked expired).
    await waitFor(
      '1.5 TTLs to pass',
      async () => {
        expect(await other.list(BUCKET)).toEqual([{ key: 'dynamo/backend/generate/live', value: '{}' }]);
        return Date.now() > until;
      },
      10_000,
    );
    expect((await stat(file)).mtimeMs).toBeGreaterThan(firstMtime);
    await watch.stop();
    expect(watch.events).toEqual([{ type: 'put', key: 'dynamo/backend/generate/live', value: '{}' }]);
  });

  it('puts back its own record if another process swept it while this one was stalled', async () => {
    const owner = open({ ttlSecs: 2 });
    await owner.put(BUCKET, 'k', 'mine');
    const file = join(bucketDir(), 'k');
    await rm(file);
    await waitFor('the record to come back', async () => (await readFile(file, 'utf8').catch(() => undefined)) === 'mine', 5000);
  });

  it('two stores on one root see each other, and a closing store takes its files with it', async () => {
    const a = open();
    const b = open();
    const watch = watchInto(b, BUCKET, 'dynamo/');
    await a.create(BUCKET, `dynamo/backend/generate/${hexId(a.instanceId)}`, '{"from":"a"}');
    await waitFor('b to see a', () => watch.events.length >= 1);
    expect(await b.list(BUCKET)).toEqual([{ key: `dynamo/backend/generate/${hexId(a.instanceId)}`, value: '{"from":"a"}' }]);
    await a.close();
    await waitFor('b to see a leave', () => watch.events.length >= 2);
    await watch.stop();
    expect(watch.events[1]).toEqual({ type: 'delete', key: `dynamo/backend/generate/${hexId(a.instanceId)}` });
    expect(await readdir(bucketDir())).toEqual([]);
  });

  it('a watch on a bucket that does not exist yet creates its directory and reports later writes', async () => {
    const store = open();
    const watch = watchInto(store, 'v1/mdc', '');
    await waitFor('the bucket directory', async () => (await stat(join(root, 'v1', 'mdc')).catch(() => undefined))?.isDirectory());
    await mkdir(join(root, 'v1', 'mdc'), { recursive: true });
    // Written as stock's store and ours write (a temp file, then a rename): a plain writeFile
    // creates the file empty first, and the watch may read it before the content lands.
    await writeFile(join(root, 'v1', 'mdc', '.tmp_x'), 'card');
    await rename(join(root, 'v1', 'mdc', '.tmp_x'), join(root, 'v1', 'mdc', 'x'));
    await waitFor('the put', () => watch.events.length >= 1);
    await watch.stop();
    expect(watch.events).toEqual([{ type: 'put', key: 'x', value: 'card' }]);
  });

  it('rejects a bucket that would escape the root', async () => {
    const store = open();
    await expect(store.put('../etc', 'k', 'v')).rejects.toThrow(/bucket/);
  });
});
