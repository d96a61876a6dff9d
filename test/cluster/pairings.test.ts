// Every pairing of frontend and workers across hosts, on default host settings (etcd, NATS and
// the discovery backend set, nothing else): our frontend and stock 1.6.1's on one host, our
// follow-prompt workers and stock-bindings ones (test/interop/python/llm_worker.py --follow-prompt)
// on two others, over the TCP and the NATS request plane. Both frontends route by KV events that
// cross hosts (ZMQ, advertised at each worker's own address), and our frontend migrates the
// streams of a stock worker whose host is lost (on tcp: responses come back over TCP on both planes).
// Skipped, never passed, without root or PyPI.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Cluster } from '@dynamo/testing/cluster';
import { type Deployment, modelDir } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { listedModels } from '@dynamo/testing/interop-stack';
import { repoRoot } from '@dynamo/testing/repo';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { BLOCK, blockPrompt, instances, kvWorker, MODEL, routed, skipReason, startCluster, Streams } from './support.js';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** CLUSTER PAIRINGS WITH STOCK SKIPPED: ${stock.skip} ***\n`);
const llmWorker = join(repoRoot, 'test', 'interop', 'python', 'llm_worker.py');

/** The stock-bindings workers' model and component. */
const STOCK_MODEL = 'stock';

describe.skipIf(skipReason !== undefined || 'skip' in stock).each([
  { name: 'etcd + tcp', discovery: 'etcd', plane: 'tcp' },
  { name: 'etcd + NATS', discovery: 'etcd', plane: 'nats' },
] as const)('frontends and workers on different hosts, $name', (setup) => {
  let cluster: Cluster;
  let deployment: Deployment;
  const fe: Record<'ours' | 'stock', string> = { ours: '', stock: '' };

  beforeAll(async () => {
    if ('skip' in stock) return;
    ({ cluster, deployment } = await startCluster(['fe', 'w1', 'w2'], setup));
    for (const host of ['w1', 'w2']) {
      const on = cluster.host(host);
      deployment.sampleWorker(kvWorker(), {}, on);
      deployment.stockProcess(
        stock.python,
        [
          llmWorker,
          '--model-path',
          modelDir,
          '--model-name',
          STOCK_MODEL,
          '--endpoint',
          `dynamo.${STOCK_MODEL}.generate`,
          '--follow-prompt',
          '--delay-ms',
          '20',
        ],
        {},
        on,
      );
    }
    const on = cluster.host('fe');
    [{ url: fe.ours }, { url: fe.stock }] = await Promise.all([
      deployment.frontend(['--router-mode', 'kv', '--migration-limit', '3'], {}, on),
      deployment.stockFrontend(stock.python, ['--router-mode', 'kv'], on),
    ]);
    for (const url of [fe.ours, fe.stock]) {
      await waitFor(
        `${url} to route both models to two workers each`,
        async () =>
          (await listedModels(url)).filter((m) => m === MODEL || m === STOCK_MODEL).length === 2 &&
          (await instances(url, MODEL)) === 2 &&
          (await instances(url, STOCK_MODEL)) === 2,
        120_000,
      );
    }
  }, 300_000);

  afterAll(async () => {
    await deployment?.stop();
    await cluster?.destroy();
  });

  it.each([
    ['ours', MODEL],
    ['ours', STOCK_MODEL],
    ['stock', MODEL],
    ['stock', STOCK_MODEL],
  ] as const)('the %s frontend answers every request for the %s workers', async (frontend, model) => {
    const { exact, wrong } = await new Streams(fe[frontend], 6, 24, model).check();
    expect(wrong).toEqual([]);
    expect(exact).toBe(6);
  });

  // What follows does not depend on the request plane (KV events ride the event plane, responses
  // the TCP call-home stream on both): once, on tcp.
  if (setup.plane !== 'tcp') return;

  it.each(['ours', 'stock'] as const)('the %s frontend sends a repeated prefix to the worker on the host that cached it', async (frontend) => {
    const url = fe[frontend];
    const p = blockPrompt(frontend === 'ours' ? 1 : 2, 6);
    expect((await routed(url, p)).cached).toBe(0);
    // Until the router has the worker's KV event, a repeat lands on it only by chance.
    await waitFor('the KV events to reach the router across hosts', async () => (await routed(url, [...p, 7])).selected === 6 * BLOCK);
    for (let i = 0; i < 4; i++) expect(await routed(url, [...p, 100 + i])).toEqual({ cached: 6 * BLOCK, selected: 6 * BLOCK });
  });

  it('our frontend migrates the streams of stock workers whose host is lost, each exact', async () => {
    const streams = new Streams(fe.ours, 8, 150, STOCK_MODEL);
    await streams.reach(40);
    const partitioned = performance.now();
    await cluster.host('w1').partition();
    const { exact, wrong, results } = await streams.check();
    const afterMs = performance.now() - partitioned;
    console.info(
      `partition row, ${setup.name}, our frontend + stock workers: ${exact} of ${results.length} exact, last stream ended ${(afterMs / 1000).toFixed(1)} s after the partition`,
    );
    expect(wrong).toEqual([]);
    expect(afterMs).toBeLessThan(20_000);
    await cluster.host('w1').heal();
  });
});
