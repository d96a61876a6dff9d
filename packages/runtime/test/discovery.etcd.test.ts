/**
 * The etcd backend against a real etcd: lease-bound keys, crash expiry, and surviving etcd
 * restarts with and without its data.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EtcdKvStore } from '../src/discovery/etcd.js';
import type { KvStore } from '../src/discovery/kv-store.js';
import { CannotConnect, InvalidArgument } from '../src/errors.js';
import { hexId, parseJson, stringifyJson } from '../src/json.js';
import { createLogging } from '../src/logger.js';
import { EtcdServer } from '@dynamo/testing/etcd';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { trackProcess } from '@dynamo/testing/processes';
import { makeTestTlsFiles } from '@dynamo/testing/tls';
import { watchInto } from './watch-into.js';

const log = createLogging({ filter: 'error' }).child('test.discovery.etcd');
const here = dirname(fileURLToPath(import.meta.url));
const packageDir = join(here, '..');

describe('etcd discovery store', { timeout: 30_000 }, () => {
  let etcd: EtcdServer;
  let raw: Etcd3;
  let scratch: string;
  let bucketNo = 0;
  let bucket: string;
  const stores: KvStore[] = [];
  const children: ChildProcess[] = [];
  const connect = async (leaseTtlSecs = 2) => {
    const store = await EtcdKvStore.connect({ endpoints: [etcd.endpoint], leaseTtlSecs, log });
    stores.push(store);
    return store;
  };
  const keysOf = async (prefix: string) => Object.keys(await raw.getAll().prefix(prefix).strings());

  beforeAll(async () => {
    etcd = await EtcdServer.start();
    raw = new Etcd3({ hosts: etcd.endpoint });
    scratch = await mkdtemp(join(tmpdir(), 'dynamo-test-etcd-worker-'));
  }, 30_000);

  afterEach(async () => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  afterAll(async () => {
    raw?.close();
    await etcd?.dispose();
    await rm(scratch, { recursive: true, force: true });
  });

  beforeEach(() => {
    // A bucket per test keeps the tests apart on the one etcd.
    bucket = `t${++bucketNo}/v1/instances`;
  });

  it('binds its keys to its primary lease, whose id is the instance id and the key suffix', async () => {
    const store = await connect();
    const id = hexId(store.instanceId);
    const record = stringifyJson({ type: 'Endpoint', namespace: 'dynamo', component: 'backend', endpoint: 'generate', instance_id: store.instanceId });
    await store.create(bucket, `dynamo/backend/generate/${id}`, record);

    const res = await raw.get(`${bucket}/dynamo/backend/generate/${id}`).exec();
    const kv = res.kvs[0]!;
    expect(BigInt(kv.lease)).toBe(store.instanceId);
    expect(kv.value.toString()).toBe(record);
    // parseJson gives a bigint past 2^53 only; about one random lease id in 1,000 is below it.
    expect(BigInt((parseJson(kv.value.toString()) as { instance_id: bigint | number }).instance_id)).toBe(store.instanceId);
    const leases = await raw.leaseClient.leaseLeases();
    expect(leases.leases.map((l) => BigInt(l.ID))).toContain(store.instanceId);
  });

  it("removes a SIGKILLed worker's keys within the lease TTL", async () => {
    // A real second process: it registers under its own lease, then dies without any cleanup.
    const script = join(scratch, 'worker.mts');
    await writeFile(
      script,
      [
        `import { EtcdKvStore } from ${JSON.stringify(pathToFileURL(join(packageDir, 'src/discovery/etcd.ts')).href)};`,
        `const quiet = { debug() {}, info() {}, warn() {}, error() {} };`,
        `const store = await EtcdKvStore.connect({ endpoints: [process.argv[2]], leaseTtlSecs: 2, log: quiet });`,
        `await store.create(process.argv[3], 'dynamo/backend/generate/' + store.instanceId.toString(16), '{}');`,
        `console.log(store.instanceId.toString(16));`,
        `setInterval(() => {}, 60_000);`,
      ].join('\n'),
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script, etcd.endpoint, bucket], { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] });
    trackProcess('an etcd worker (tsx script)', child);
    children.push(child);
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const id = await waitFor('the worker to register', () => /^[0-9a-f]+\n/.test(stdout) && stdout.trim(), 20_000);

    const observer = await connect();
    const watch = watchInto(observer, bucket, 'dynamo/');
    await waitFor('the worker record', () => watch.events.length >= 1);
    expect(watch.events[0]).toMatchObject({ type: 'put', key: `dynamo/backend/generate/${id}` });

    child.kill('SIGKILL');
    await once(child, 'exit');
    const killedAt = Date.now();
    await waitFor('the record to expire', () => watch.events.length >= 2, 6000);
    const took = Date.now() - killedAt;
    await watch.stop();
    expect(watch.events[1]).toEqual({ type: 'delete', key: `dynamo/backend/generate/${id}` });
    expect(took).toBeLessThan(2000 + 2000); // the TTL, plus etcd's expiry check and a loaded machine
    expect(await keysOf(`${bucket}/`)).toEqual([]);
  });

  it('re-registers its keys under the same instance id after etcd restarts without its data', async () => {
    const worker = await connect();
    const frontend = await connect();
    const id = worker.instanceId;
    const key = `dynamo/backend/generate/${hexId(id)}`;
    await worker.create(bucket, key, '{"registered":true}');
    await worker.put(`${bucket}-mdc`, key, '{"card":true}');
    const watch = watchInto(frontend, bucket, 'dynamo/');
    await waitFor('the record', () => watch.events.length >= 1);

    await etcd.restartFresh(); // every lease and key is gone

    await waitFor(
      'the record to come back',
      async () =>
        (await raw.get(`${bucket}/${key}`).string()) === '{"registered":true}' && (await raw.get(`${bucket}-mdc/${key}`).string()) === '{"card":true}',
      15_000,
    );
    expect(worker.instanceId).toBe(id);
    const kv = (await raw.get(`${bucket}/${key}`).exec()).kvs[0]!;
    expect(BigInt(kv.lease)).toBe(id);
    // The watcher resyncs against an etcd whose revisions started over. It reports only what
    // changed for it: a delete and a put if it listed before the worker re-registered, nothing if
    // after. Either way the record is what it last reported for the key...
    const lastFor = (k: string) => watch.events.filter((e) => e.key === k).at(-1);
    await waitFor('the watcher to hold the record', () => lastFor(key)?.type === 'put', 15_000);
    expect(lastFor(key)).toEqual({ type: 'put', key, value: '{"registered":true}' });
    // ...and it follows writes to the new etcd, which only a resynced watcher sees.
    const extra = 'dynamo/backend/generate/extra';
    await worker.put(bucket, extra, 'x');
    await waitFor('a write after the restart', () => lastFor(extra) !== undefined, 10_000);
    expect(lastFor(extra)).toEqual({ type: 'put', key: extra, value: 'x' });
    expect(lastFor(key)).toEqual({ type: 'put', key, value: '{"registered":true}' });
    await watch.stop();
    // The lease is renewed again: the records outlive the TTL.
    await new Promise((r) => setTimeout(r, 2500));
    expect(await keysOf(`${bucket}/`)).toContain(`${bucket}/${key}`);
  });

  it('keeps its lease and its watches across an etcd restart with data', async () => {
    const worker = await connect(3);
    const frontend = await connect(3);
    await worker.create(bucket, 'dynamo/backend/generate/a', 'a');
    const watch = watchInto(frontend, bucket, 'dynamo/');
    await waitFor('the record', () => watch.events.length >= 1);

    await etcd.restart();

    await worker.put(bucket, 'dynamo/backend/generate/b', 'b');
    await waitFor('an event after the restart', () => watch.events.some((e) => e.key.endsWith('/b')), 10_000);
    // Past the TTL: had the lease lapsed, its key would have gone (and been reported as deleted).
    const until = Date.now() + 3500;
    await waitFor('the TTL to pass', () => Date.now() > until, 10_000);
    await worker.delete(bucket, 'dynamo/backend/generate/b');
    await waitFor('the delete', () => watch.events.some((e) => e.type === 'delete'), 10_000);
    await watch.stop();
    expect(watch.events).toEqual([
      { type: 'put', key: 'dynamo/backend/generate/a', value: 'a' },
      { type: 'put', key: 'dynamo/backend/generate/b', value: 'b' },
      { type: 'delete', key: 'dynamo/backend/generate/b' },
    ]);
    expect(await keysOf(`${bucket}/`)).toEqual([`${bucket}/dynamo/backend/generate/a`]);
  });

  it('revokes its lease on close, so its keys vanish at once', async () => {
    const worker = await connect(30);
    await worker.create(bucket, 'k', 'v');
    stores.splice(stores.indexOf(worker), 1);
    await worker.close();
    expect(await keysOf(`${bucket}/`)).toEqual([]);
  });

  it('logs in with a user and password, keeps watching across a restart, and reports a wrong password as CannotConnect without echoing it', async () => {
    // Its own etcd: turning auth on would lock the other tests out of the shared one.
    const secured = await EtcdServer.start();
    try {
      const admin = new Etcd3({ hosts: secured.endpoint });
      await admin.user('root').create('s3cret-pass');
      await admin.user('root').addRole('root');
      await admin.auth.authEnable();
      admin.close();

      const login = { endpoints: [secured.endpoint], username: 'root', password: 's3cret-pass', leaseTtlSecs: 2, log };
      const worker = await EtcdKvStore.connect(login);
      const frontend = await EtcdKvStore.connect(login);
      stores.push(worker, frontend);
      await worker.create('v1/instances', 'dynamo/backend/generate/1', '{}');
      expect(await frontend.list('v1/instances')).toEqual([{ key: 'dynamo/backend/generate/1', value: '{}' }]);
      // A restart invalidates auth tokens; the watch must log in again rather than go quiet.
      const watch = watchInto(frontend, 'v1/instances', '');
      await waitFor('the record', () => watch.events.length >= 1);
      await secured.restart();
      await worker.put('v1/instances', 'dynamo/backend/generate/2', '{}');
      await waitFor('a write after the restart', () => watch.events.length >= 2, 15_000);
      // The stale token shows only once the watch stream reconnects (a second or two); a write
      // right after the restart can still arrive through the resync's list. Give it that time.
      await new Promise((r) => setTimeout(r, 3000));
      await worker.put('v1/instances', 'dynamo/backend/generate/3', '{}');
      await waitFor('a later write', () => watch.events.length >= 3, 10_000);
      await watch.stop();
      expect(watch.events.slice(1)).toEqual([
        { type: 'put', key: 'dynamo/backend/generate/2', value: '{}' },
        { type: 'put', key: 'dynamo/backend/generate/3', value: '{}' },
      ]);
      await Promise.all(stores.splice(0).map((s) => s.close()));

      const error = await EtcdKvStore.connect({ endpoints: [secured.endpoint], username: 'root', password: 'wrong-pass', connectTimeoutSecs: 2, log }).catch(
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(CannotConnect);
      expect((error as Error).message).toContain(secured.endpoint);
      expect((error as Error).message).not.toContain('wrong-pass');
    } finally {
      await secured.dispose();
    }
  });

  it('connects over TLS with ETCD_AUTH_CA, presents a client certificate when etcd requires one, and refuses an untrusted server', async () => {
    const tls = makeTestTlsFiles();
    const clientCert = { certFile: tls.clientCertFile, keyFile: tls.clientKeyFile };
    const secured = await EtcdServer.start({ tls: { caFile: tls.caFile, certFile: tls.certFile, keyFile: tls.keyFile, clientCert } });
    try {
      expect(secured.endpoint).toMatch(/^https:\/\//);
      const mtls = { endpoints: [secured.endpoint], caCert: tls.caFile, clientCert: tls.clientCertFile, clientKey: tls.clientKeyFile, leaseTtlSecs: 2, log };
      const worker = await EtcdKvStore.connect(mtls);
      const frontend = await EtcdKvStore.connect(mtls);
      stores.push(worker, frontend);
      await worker.create('v1/instances', 'dynamo/backend/generate/1', '{"over":"tls"}');
      expect(await frontend.list('v1/instances')).toEqual([{ key: 'dynamo/backend/generate/1', value: '{"over":"tls"}' }]);
      // The record is bound to the worker's lease, over TLS like everything else.
      const watch = watchInto(frontend, 'v1/instances', '');
      await waitFor('the record', () => watch.events.length >= 1);
      await worker.close();
      stores.splice(stores.indexOf(worker), 1);
      await waitFor('the delete on lease revoke', () => watch.events.some((e) => e.type === 'delete'), 10_000);
      await watch.stop();

      const withoutClientCert = await EtcdKvStore.connect({ endpoints: [secured.endpoint], caCert: tls.caFile, connectTimeoutSecs: 2, log }).catch(
        (e: unknown) => e,
      );
      expect(withoutClientCert).toBeInstanceOf(CannotConnect);
      expect((withoutClientCert as Error).message).toContain(secured.endpoint);
      const untrusted = await EtcdKvStore.connect({ endpoints: [secured.endpoint], connectTimeoutSecs: 2, log }).catch((e: unknown) => e);
      expect(untrusted).toBeInstanceOf(CannotConnect);
      const missingCa = await EtcdKvStore.connect({ endpoints: [secured.endpoint], caCert: join(tls.caFile, 'nope.pem'), log }).catch((e: unknown) => e);
      expect(missingCa).toBeInstanceOf(InvalidArgument);
      expect((missingCa as Error).message).toMatch(/etcd TLS: cannot read the CA certificate at .*nope\.pem/);
    } finally {
      await secured.dispose();
      tls.remove();
    }
  });

  it('fails with CannotConnect naming the endpoints and never the password', async () => {
    const port = await freePort();
    const error = await EtcdKvStore.connect({
      endpoints: [`http://127.0.0.1:${port}`],
      username: 'root',
      password: 'hunter2',
      connectTimeoutSecs: 1,
      log,
    }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(CannotConnect);
    expect((error as Error).message).toContain(`127.0.0.1:${port}`);
    expect((error as Error).message).not.toContain('hunter2');
  });
});
