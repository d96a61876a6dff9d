// Faults of the infrastructure, with every process on a host of its own on default settings:
// a frontend's host cut from etcd for longer than the lease, etcd down and back, NATS down and back
// (request plane and event plane), two frontends on two hosts sharing their routers' load, and a
// worker host scaled down with SIGTERM mid-stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import type { Cluster } from '@dynamo/testing/cluster';
import { type Deployment, post } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { counter, samples } from '@dynamo/testing/interop-stack';
import { BLOCK, blockPrompt, instances, kvWorker, MODEL, routed, skipReason, startCluster, Streams } from './support.js';

const migrations = (url: string) => counter(`${url}/metrics`, 'dynamo_frontend_model_migration_total');

describe.skipIf(skipReason !== undefined)('etcd faults, two frontends and a scale-down (etcd + tcp, kv mode with replica sync)', () => {
  let cluster: Cluster;
  let deployment: Deployment;
  let a: string;
  let b: string;
  let late: Child;
  const served = (host: string) => counter(`http://${cluster.host(host).address}:9090/metrics`, 'dynamo_component_requests_total');

  beforeAll(async () => {
    ({ cluster, deployment } = await startCluster(['fe', 'fe2', 'w1', 'w2'], { name: 'etcd + tcp', discovery: 'etcd', plane: 'tcp' }));
    deployment.sampleWorker(kvWorker(), { DYN_SYSTEM_PORT: '9090' }, cluster.host('w1'));
    const flags = ['--router-mode', 'kv', '--router-replica-sync', '--migration-limit', '3'];
    [{ url: a }, { url: b }] = await Promise.all([deployment.frontend(flags, {}, cluster.host('fe')), deployment.frontend(flags, {}, cluster.host('fe2'))]);
    await waitFor('the worker behind both frontends', async () => (await instances(a)) === 1 && (await instances(b)) === 1, 60_000);
  });

  afterAll(async () => {
    await deployment?.stop();
    await cluster?.destroy();
  });

  it('a frontend cut from etcd past its lease keeps serving the workers it knows and catches up when the cut heals', async () => {
    await cluster.cut('fe', 'infra');
    try {
      // A worker that registers meanwhile is unknown to the cut-off frontend, not to the other.
      late = deployment.sampleWorker(kvWorker(), { DYN_SYSTEM_PORT: '9090' }, cluster.host('w2'));
      await waitFor('the new worker behind the other frontend', async () => (await instances(b)) === 2, 60_000);
      // Past the 10 s lease: etcd has dropped the cut-off frontend's own lease by now.
      await new Promise((r) => setTimeout(r, 11_000));
      expect(await instances(a)).toBe(1);
      const { exact, wrong } = await new Streams(a, 6, 16).check();
      expect(wrong).toEqual([]);
      expect(exact).toBe(6);
    } finally {
      await cluster.restore('fe', 'infra');
    }
    const healed = performance.now();
    await waitFor('the cut-off frontend to see the new worker', async () => (await instances(a)) === 2, 60_000);
    console.info(`the frontend cut from etcd saw the worker that joined meanwhile ${((performance.now() - healed) / 1000).toFixed(1)} s after the cut healed`);
    const before = await served('w2');
    expect((await new Streams(a, 6, 16).check()).exact).toBe(6);
    expect(await served('w2')).toBeGreaterThan(before);
  });

  it("two frontends on two hosts count each other's requests, and a client alternating between them finds its prefix cached", async () => {
    const blocks = (url: string) => samples(url, 'dynamo_frontend_worker_active_decode_blocks{');
    const abort = new AbortController();
    const running = post(a, '/v1/completions', { model: MODEL, prompt: blockPrompt(11, 20), max_tokens: 5000, stream: true }, { signal: abort.signal })
      .then((r) => r.text())
      .catch(() => '');
    await waitFor('frontend A to count its request', async () => (await blocks(a)).some((n) => n >= 20), 20_000);
    await waitFor(
      'frontend B, on another host, to count the same blocks',
      async () => JSON.stringify(await blocks(b)) === JSON.stringify(await blocks(a)),
      20_000,
    );
    abort.abort();
    await running;

    const p = blockPrompt(12, 6);
    expect((await routed(a, p)).cached).toBe(0);
    for (const url of [a, b]) await waitFor(`${url}'s router to have the KV event`, async () => (await routed(url, [...p, 1])).selected === 6 * BLOCK);
    for (let i = 0; i < 6; i++) expect(await routed(i % 2 === 0 ? a : b, [...p, 100 + i])).toEqual({ cached: 6 * BLOCK, selected: 6 * BLOCK });
  });

  it('serves while etcd is down and keeps following discovery once it is back', async () => {
    await deployment.etcd!.stop();
    try {
      for (const url of [a, b]) expect((await new Streams(url, 4, 16).check()).exact).toBe(4);
    } finally {
      await deployment.etcd!.start();
    }
    // After the restart both workers are still registered (their leases survived) and both frontends route to them.
    await waitFor('both workers behind both frontends after etcd is back', async () => (await instances(a)) === 2 && (await instances(b)) === 2, 60_000);
    for (const url of [a, b]) expect((await new Streams(url, 4, 16).check()).exact).toBe(4);
  });

  it('a worker scaled down with SIGTERM mid-stream drains: nothing aborted, nothing migrated, and the frontends see it leave', async () => {
    const before = await migrations(a);
    const streams = new Streams(a, 8, 150);
    await streams.reach(20);
    late.child.kill('SIGTERM');
    const { exact, wrong } = await streams.check();
    expect(wrong).toEqual([]);
    expect(exact).toBe(8);
    expect(await late.exited).toBe(0);
    expect(await migrations(a)).toBe(before);
    await waitFor('both frontends to drop the stopped worker', async () => (await instances(a)) === 1 && (await instances(b)) === 1, 30_000);
  });
});

describe.skipIf(skipReason !== undefined)('NATS down and back (etcd + NATS request plane, KV events on NATS)', () => {
  let cluster: Cluster;
  let deployment: Deployment;
  let url: string;

  beforeAll(async () => {
    ({ cluster, deployment } = await startCluster(['fe', 'w1', 'w2'], { name: 'etcd + NATS', discovery: 'etcd', plane: 'nats' }));
    for (const host of ['w1', 'w2']) deployment.sampleWorker(kvWorker(), { DYN_EVENT_PLANE: 'nats' }, cluster.host(host));
    ({ url } = await deployment.frontend(['--router-mode', 'kv', '--migration-limit', '3'], { DYN_EVENT_PLANE: 'nats' }, cluster.host('fe')));
    await waitFor('both workers behind the frontend', async () => (await instances(url)) === 2, 60_000);
  });

  afterAll(async () => {
    await deployment?.stop();
    await cluster?.destroy();
  });

  it('refuses requests in shape while NATS is down, then serves again, with KV events, once it is back', async () => {
    expect((await new Streams(url, 4, 16).check()).exact).toBe(4);
    await deployment.nats!.stop();
    try {
      const started = performance.now();
      const { exact, results } = await new Streams(url, 4, 16).check();
      expect(exact).toBe(0);
      for (const r of results) expect(r.error).toMatch(/HTTP 5\d\d|nats|connect|unavailable/i);
      // Refused, not hung: well inside the request plane's 10 s NATS request timeout and a resend.
      expect(performance.now() - started).toBeLessThan(30_000);
    } finally {
      await deployment.nats!.restart();
    }
    await waitFor('requests to succeed once NATS is back', async () => (await new Streams(url, 1, 8).check()).exact === 1, 60_000);
    expect((await new Streams(url, 6, 16).check()).exact).toBe(6);
    const p = blockPrompt(13, 6);
    expect((await routed(url, p)).cached).toBe(0);
    await waitFor('KV events over NATS to reach the router again', async () => (await routed(url, [...p, 1])).selected === 6 * BLOCK);
    for (let i = 0; i < 4; i++) expect(await routed(url, [...p, 100 + i])).toEqual({ cached: 6 * BLOCK, selected: 6 * BLOCK });
  });
});
