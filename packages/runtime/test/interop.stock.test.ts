// Interop with the real stock Dynamo 1.6 release (ai-dynamo-runtime from PyPI, in a test-only venv):
// our client against a stock Python worker, and a stock Python client against our worker, over
// the TCP request plane with file discovery and with etcd.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedRuntime, InvalidArgument, loadRuntimeConfig } from '../src/index.js';
import { EtcdServer } from './harness/etcd.js';
import { runStock, stockPython } from './harness/stock-dynamo.js';
import { startWorker } from './harness/worker-process.js';

const stock = stockPython();
const python = 'python' in stock ? stock.python : '';

let etcd: EtcdServer | undefined;
const fileRoot = mkdtempSync(join(tmpdir(), 'dynamo-interop-'));

const backends = [
  { name: 'file discovery', env: () => ({ DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: fileRoot }) },
  { name: 'etcd', env: () => ({ DYN_DISCOVERY_BACKEND: 'etcd', ETCD_ENDPOINTS: etcd!.endpoint }) },
];

describe.skipIf('skip' in stock)('interop with stock Dynamo 1.6 over tcp', () => {
  beforeAll(async () => {
    etcd = await EtcdServer.start();
  }, 60_000);

  afterAll(async () => {
    await etcd?.dispose();
    rmSync(fileRoot, { recursive: true, force: true });
  });

  describe.each(backends)('$name', (backend) => {
    it('our client streams from a stock Python worker, and gets its errors typed', async () => {
      const component = `stock${backend.name.startsWith('file') ? 'f' : 'e'}`;
      const env = { ...backend.env(), DYN_REQUEST_PLANE: 'tcp' };
      const worker = runStock(python, 'worker.py', ['-n', 'interop', '-c', component], env);
      const caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
      try {
        const ready = await worker.waitForLine(/^READY /);
        const instanceId = BigInt(ready.split(' ')[1]!);
        const client = await caller.endpoint(`interop.${component}.generate`).client();
        expect(await client.waitForInstances({ timeoutMs: 30_000 })).toEqual([instanceId]);
        const items: unknown[] = [];
        for await (const item of client.direct({ count: 3, tag: 'from-ts' }, instanceId)) items.push(item);
        expect(items).toEqual([0, 1, 2].map((n) => ({ n, echo: { count: 3, tag: 'from-ts' } })));

        const partial: unknown[] = [];
        const failure = await (async () => {
          try {
            for await (const item of client.generate({ count: 3, fail_at: 1 })) partial.push(item);
          } catch (err) {
            return err;
          }
          return undefined;
        })();
        expect(partial).toHaveLength(1);
        expect(failure).toBeInstanceOf(InvalidArgument);
        expect((failure as Error).message).toContain('fail_at 1');
      } finally {
        await caller.shutdown();
        await worker.stop();
      }
    }, 120_000);

    it('a stock Python client streams from our worker, and its stop reaches our handler', async () => {
      const component = `ts${backend.name.startsWith('file') ? 'f' : 'e'}`;
      const env = { ...backend.env(), DYN_REQUEST_PLANE: 'tcp' };
      const worker = await startWorker(env, ['interop', component]);
      try {
        const client = runStock(python, 'client.py', ['-n', 'interop', '-c', component, '--count', '4'], env);
        const code = await client.exited;
        expect(code, client.stderr()).toBe(0);
        const items = client.lines.map((l) => JSON.parse(l) as { i: number; instance: string });
        expect(items).toEqual([0, 1, 2, 3].map((i) => ({ i, instance: worker.instanceId.toString(16) })));

        const stopper = runStock(python, 'client.py', ['-n', 'interop', '-c', component, '--request', '{"mode":"forever","delayMs":5}', '--stop-after', '2'], env);
        expect(await stopper.exited, stopper.stderr()).toBe(0);
        await worker.waitForLine(/^STOPPED /, 10_000);
      } finally {
        await worker.stop();
      }
    }, 120_000);
  });
});
