// SDK services next to the real stock Dynamo 1.6.1 runtime (ai-dynamo-runtime from the cached
// test venv) on the embedded file store and TCP: a stock Python client calls a TypeScript
// service's endpoint, and a TypeScript service depends() on a stock Python dynamo_worker
// endpoint. Skipped, never passed, without PyPI.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { runStock, type StockProcess, stockPython } from '@dynamo/testing/stock-dynamo';
import { depends, endpoint, serveService, type ServedService, service, serviceClient } from '../src/index.js';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** SDK STOCK INTEROP SKIPPED: ${stock.skip} ***\n`);

@service({ dynamo: { namespace: 'sdkinterop' } })
class Greeter {
  @endpoint({ request: z.object({ name: z.string().min(1), count: z.number().int().min(1).default(2) }) })
  async *generate(request: { name: string; count: number }) {
    for (let i = 0; i < request.count; i++) yield { greeting: `hello ${request.name}`, i };
  }
}

/** The stock worker.py endpoint `sdkinterop/pyworker/generate`, described for depends(): never served from here. */
@service({ dynamo: { namespace: 'sdkinterop' } })
class Pyworker {
  @endpoint({ request: z.object({ count: z.number().int(), tag: z.string() }) })
  async *generate(_request: { count: number; tag: string }): AsyncGenerator<{ n: number; echo: unknown }> {}
}

@service({ dynamo: { namespace: 'sdkinterop' } })
class Relay {
  python = depends(Pyworker);

  @endpoint({ request: z.object({ count: z.number().int() }) })
  async *generate(request: { count: number }) {
    for await (const item of this.python.generate({ count: request.count, tag: 'via-relay' })) yield { relayed: item };
  }
}

describe.skipIf('skip' in stock)('SDK services with the stock 1.6.1 runtime', () => {
  const python = (stock as { python: string }).python;
  const kv = mkdtempSync(join(tmpdir(), 'sdk-interop-kv-'));
  const env = { DYN_DISCOVERY_BACKEND: 'file', DYN_REQUEST_PLANE: 'tcp', DYN_FILE_KV: kv, DYN_LOG: 'error' };
  const stockEnv = {
    ...env,
    DYN_TCP_RPC_HOST: '127.0.0.1',
    DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1',
    DYN_EVENT_PLANE_HOST: '127.0.0.1',
    DYN_SYSTEM_HOST: '127.0.0.1',
  };
  const served: Array<ServedService<object>> = [];
  let pyWorker: StockProcess;
  let caller: DistributedRuntime;

  beforeAll(async () => {
    served.push(await serveService(Greeter, { runtimeOptions: { config: loadRuntimeConfig(env) } }));
    pyWorker = runStock(python, 'worker.py', ['-n', 'sdkinterop', '-c', 'pyworker'], stockEnv);
    await pyWorker.waitForLine(/^READY /);
    served.push(await serveService(Relay, { runtimeOptions: { config: loadRuntimeConfig(env) } }));
    caller = await DistributedRuntime.create({ config: loadRuntimeConfig(env) });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(served.map((s) => s.stop()));
    await pyWorker?.stop();
    await caller?.shutdown();
    rmSync(kv, { recursive: true, force: true });
  });

  it('a stock Python client calls a TypeScript service endpoint (namespace/class/endpoint)', async () => {
    const client = runStock(python, 'client.py', ['-n', 'sdkinterop', '-c', 'greeter', '--request', '{"name": "python", "count": 3}'], stockEnv);
    expect(await client.exited, client.stderr()).toBe(0);
    expect(client.lines.map((l) => JSON.parse(l) as unknown)).toEqual([0, 1, 2].map((i) => ({ greeting: 'hello python', i })));
  });

  it("a stock Python client's bad request is refused naming the field, and the service keeps serving", async () => {
    const bad = runStock(python, 'client.py', ['-n', 'sdkinterop', '-c', 'greeter', '--request', '{"name": ""}'], stockEnv);
    expect(await bad.exited).toBe(1);
    expect(bad.stderr()).toMatch(/CLIENT ERROR .*Greeter\.generate request.*name/s);
    const good = runStock(python, 'client.py', ['-n', 'sdkinterop', '-c', 'greeter', '--request', '{"name": "again", "count": 1}'], stockEnv);
    expect(await good.exited, good.stderr()).toBe(0);
    expect(good.lines.map((l) => JSON.parse(l) as unknown)).toEqual([{ greeting: 'hello again', i: 0 }]);
  });

  it('a TypeScript service depends() on a stock Python dynamo_worker endpoint', async () => {
    const items: unknown[] = [];
    for await (const item of serviceClient(Relay, caller).generate({ count: 2 })) items.push(item);
    expect(items).toEqual([0, 1].map((n) => ({ relayed: { n, echo: { count: 2, tag: 'via-relay' } } })));
  });
});
