// Slow and lossy links between the frontend's host and the workers': added latency (Toxiproxy, each
// way), a narrow link, and lost packets (nftables). Every answer stays exact, and the time to the
// first token grows by about the round trips the path adds, not more.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Cluster, Link } from '@dynamo/testing/cluster';
import { randomFirst, streamCompletion } from '@dynamo/testing/follow-prompt';
import type { Deployment } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { instances, skipReason, startCluster, Streams } from './support.js';

/** The median time to first text of `n` requests sent one after another. */
async function ttftMs(url: string, model: string, n = 9): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await streamCompletion(url, model, randomFirst(4), 4);
    expect(r.complete, r.error).toBe(true);
    times.push(r.firstTextMs!);
  }
  return times.sort((x, y) => x - y)[Math.floor(n / 2)]!;
}

describe.skipIf(skipReason !== undefined)('slow and lossy links to the workers (etcd + tcp)', () => {
  let cluster: Cluster;
  let deployment: Deployment;
  let url: string;
  let link: Link;

  beforeAll(async () => {
    ({ cluster, deployment } = await startCluster(['fe', 'w1', 'w2'], { name: 'etcd + tcp', discovery: 'etcd', plane: 'tcp' }));
    deployment.sampleWorker(['--model-name', 'linked', '--component', 'linked', '--follow-prompt', '--delay-ms', '5'], {}, cluster.host('w1'));
    deployment.sampleWorker(['--model-name', 'lossy', '--component', 'lossy', '--follow-prompt', '--delay-ms', '5'], {}, cluster.host('w2'));
    ({ url } = await deployment.frontend([], {}, cluster.host('fe')));
    await waitFor('both workers behind the frontend', async () => (await instances(url, 'linked')) === 1 && (await instances(url, 'lossy')) === 1, 60_000);
    // Before any request: every connection between the two hosts from here on goes through the proxy.
    link = await cluster.link('fe', 'w1');
  });

  afterAll(async () => {
    await deployment?.stop();
    await cluster?.destroy();
  });

  it('adds about the round trips of the path to the first token, and answers exactly, at 20 and 80 ms', async () => {
    const base = await ttftMs(url, 'linked');
    const rows: string[] = [];
    for (const rttMs of [20, 80]) {
      await link.latency(rttMs / 2);
      const ttft = await ttftMs(url, 'linked');
      rows.push(`RTT +${rttMs} ms: TTFT p50 ${base.toFixed(1)} -> ${ttft.toFixed(1)} ms (+${(ttft - base).toFixed(1)})`);
      // The request goes out and the first token comes back: one round trip (the call-home
      // connection is dialled ahead of need). A second one, plus a busy machine's slack, is the most.
      expect(ttft - base).toBeGreaterThan(0.5 * rttMs);
      expect(ttft - base).toBeLessThan(2 * rttMs + 40);
      const { exact, wrong } = await new Streams(url, 6, 60, 'linked').check();
      expect(wrong).toEqual([]);
      expect(exact).toBe(6);
    }
    console.info(`links: ${rows.join('; ')}`);
    await link.heal();
  });

  it('answers exactly over a narrow link', async () => {
    await link.bandwidth(16);
    try {
      const { exact, wrong } = await new Streams(url, 4, 150, 'linked').check();
      expect(wrong).toEqual([]);
      expect(exact).toBe(4);
    } finally {
      await link.heal();
    }
  });

  it('answers exactly when a tenth of the packets between the hosts are lost', async () => {
    await cluster.loss('fe', 'w2', 10);
    try {
      const { exact, wrong } = await new Streams(url, 6, 150, 'lossy').check();
      expect(wrong).toEqual([]);
      expect(exact).toBe(6);
    } finally {
      await cluster.loss('fe', 'w2', 0);
    }
  });
});
