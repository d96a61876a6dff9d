import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DistributedRuntime, loadRuntimeConfig, MemKvSpace, registerPrometheus } from '../src/index.js';
import { waitFor } from '@dynamo/testing/free-port';

describe('system status server (DYN_SYSTEM_PORT)', () => {
  it('is off unless DYN_SYSTEM_PORT is set', async () => {
    const runtime = await DistributedRuntime.create({
      config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' }),
      memSpace: new MemKvSpace(),
    });
    expect(runtime.systemPort).toBeUndefined();
    await runtime.shutdown();
  });

  it('serves /health, /live and /metrics with Dynamo names', async () => {
    const space = new MemKvSpace();
    const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_LOG: 'error' };
    const worker = await DistributedRuntime.create({ config: loadRuntimeConfig(env), memSpace: space });
    const caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' }), memSpace: space });
    try {
      const base = `http://127.0.0.1:${worker.systemPort}`;
      const starting = await fetch(`${base}/health`);
      expect(starting.status).toBe(503);
      expect(await starting.json()).toMatchObject({ status: 'notready', endpoints: {} });

      await worker.endpoint('stat.svc.generate').serveEndpoint(async function* () {
        yield { ok: true };
      });
      for (const path of ['/health', '/live']) {
        const res = await fetch(`${base}${path}`);
        expect(res.status).toBe(200);
        const body = (await res.json()) as { status: string; uptime: { secs: number; nanos: number }; endpoints: Record<string, string> };
        expect(body.status).toBe('ready');
        expect(body.endpoints).toEqual({ generate: 'ready' });
        expect(typeof body.uptime.nanos).toBe('number');
      }

      const client = await caller.endpoint('stat.svc.generate').client();
      await client.waitForInstances();
      for await (const _ of client.generate({})) void _;

      const labels = 'dynamo_namespace="stat",dynamo_component="svc",dynamo_endpoint="generate"';
      // The worker's side of the stream finishes when the caller closes, just after the last item.
      const metrics = await waitFor('the request to finish on the worker', async () => {
        const text = await (await fetch(`${base}/metrics`)).text();
        return text.includes(`dynamo_component_inflight_requests{${labels}} 0`) ? text : undefined;
      });
      expect(metrics).toContain(`dynamo_component_requests_total{${labels}} 1`);
      expect(metrics).toContain(`dynamo_component_request_duration_seconds_bucket{le="0.005",${labels}}`);
      expect(metrics).toContain('dynamo_component_response_bytes_total');
      expect(metrics).toContain('dynamo_component_uptime_seconds');
      expect(metrics).toMatch(/^process_resident_memory_bytes \d+$/m);
      expect(metrics).toMatch(/^nodejs_eventloop_lag_p99_seconds [0-9.e+-]+$/m);
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });

  it("answers /engine/<name> routes with stock Dynamo 1.6.1's status codes", async () => {
    const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_LOG: 'error' };
    const runtime = await DistributedRuntime.create({ config: loadRuntimeConfig(env), memSpace: new MemKvSpace() });
    try {
      const base = `http://127.0.0.1:${runtime.systemPort}`;
      const seen: unknown[] = [];
      runtime.systemStatus!.setEngineRoute('control/echo', async (body) => {
        seen.push(body);
        return { status: 'ok', got: body };
      });
      runtime.systemStatus!.setEngineRoute('control/broken', async () => {
        throw new Error('engine exploded');
      });
      const call = async (path: string, init?: RequestInit) => {
        const res = await fetch(`${base}${path}`, init);
        return { status: res.status, type: res.headers.get('content-type'), body: JSON.parse(await res.text()) as unknown };
      };
      expect(await call('/engine/control/echo', { method: 'POST', body: '{"level":2}' })).toEqual({
        status: 200,
        type: 'text/plain; charset=utf-8',
        body: { status: 'ok', got: { level: 2 } },
      });
      // No body (a GET) reaches the handler as {}.
      expect((await call('/engine/control/echo')).body).toEqual({ status: 'ok', got: {} });
      expect(await call('/engine/control/echo', { method: 'POST', body: '{"level":' })).toMatchObject({ status: 400, body: { error: 'Invalid JSON' } });
      expect(await call('/engine/control/nope', { method: 'POST', body: '{}' })).toEqual({
        status: 404,
        type: 'text/plain; charset=utf-8',
        body: { error: 'Route not found', message: 'Route /engine/control/nope not found' },
      });
      expect(await call('/engine/control/broken', { method: 'POST' })).toMatchObject({
        status: 500,
        body: { error: 'Handler error', message: 'engine exploded' },
      });
      // The bad requests reached no handler; the server still answers.
      expect(seen).toEqual([{ level: 2 }, {}]);
      runtime.systemStatus!.setEngineRoute('control/echo', undefined);
      expect((await call('/engine/control/echo')).status).toBe(404);
      expect((await fetch(`${base}/health`)).status).toBe(503);
    } finally {
      await runtime.shutdown();
    }
  });

  it("shows an engine's own registry on /metrics, filtered by prefix, until it is taken off", async () => {
    const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_LOG: 'error' };
    const worker = await DistributedRuntime.create({ config: loadRuntimeConfig(env), memSpace: new MemKvSpace() });
    const engine = new Registry();
    const tokens = new Counter({ name: 'myengine_generated_tokens_total', help: 'Tokens generated', labelNames: ['dp_rank'], registers: [engine] });
    new Gauge({ name: 'myengine_internal_queue', help: 'Excluded by prefix', registers: [engine] }).set(3);
    new Gauge({ name: 'unrelated_gauge', help: 'Not under a shown prefix', registers: [engine] }).set(1);
    // A name the runtime already uses must not appear twice.
    new Gauge({ name: 'dynamo_component_uptime_seconds', help: 'Clashes with the runtime', registers: [engine] }).set(-1);
    new Gauge({ name: 'process_open_fds', help: "Clashes with the process's own", registers: [engine] }).set(-1);
    tokens.inc({ dp_rank: '0' }, 7);
    const off = registerPrometheus(engine, { prefixes: ['myengine_', 'dynamo_component_', 'process_'], excludePrefixes: ['myengine_internal'] });
    try {
      const base = `http://127.0.0.1:${worker.systemPort}`;
      const shown = await (await fetch(`${base}/metrics`)).text();
      expect(shown).toMatch(/^# TYPE myengine_generated_tokens_total counter$/m);
      expect(shown).toMatch(/^# HELP myengine_generated_tokens_total Tokens generated$/m);
      expect(shown).toContain('myengine_generated_tokens_total{dp_rank="0"} 7');
      expect(shown).not.toContain('myengine_internal_queue');
      expect(shown).not.toContain('unrelated_gauge');
      expect(shown.match(/# TYPE dynamo_component_uptime_seconds /g)).toHaveLength(1);
      expect(shown.match(/# TYPE process_open_fds /g)).toHaveLength(1);
      expect(shown).not.toMatch(/^dynamo_component_uptime_seconds -1$/m);
      off();
      expect(await (await fetch(`${base}/metrics`)).text()).not.toContain('myengine_generated_tokens_total');
    } finally {
      off();
      await worker.shutdown();
    }
  });

  it("labels an engine's metrics with the worker's labels, its own labels winning", async () => {
    const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_LOG: 'error' };
    const worker = await DistributedRuntime.create({ config: loadRuntimeConfig(env), memSpace: new MemKvSpace() });
    const engine = new Registry();
    new Counter({ name: 'labelled_tokens_total', help: 'Tokens', labelNames: ['dp_rank', 'model'], registers: [engine] }).inc(
      { dp_rank: '1', model: 'own "name"' },
      3,
    );
    new Histogram({ name: 'labelled_step_seconds', help: 'Step time', buckets: [0.1, 1], registers: [engine] }).observe(0.5);
    worker.metrics.engineLabels = { dynamo_component: 'backend', model: 'qwen3', dp_rank: 'never' };
    const off = registerPrometheus(engine, { prefixes: ['labelled_'] });
    try {
      const shown = await (await fetch(`http://127.0.0.1:${worker.systemPort}/metrics`)).text();
      expect(shown).toContain('labelled_tokens_total{dynamo_component="backend",model="own \\"name\\"",dp_rank="1"} 3');
      expect(shown).toMatch(/^# TYPE labelled_step_seconds histogram$/m);
      expect(shown).toContain('labelled_step_seconds_bucket{dynamo_component="backend",model="qwen3",dp_rank="never",le="1"} 1');
      expect(shown).toContain('labelled_step_seconds_bucket{dynamo_component="backend",model="qwen3",dp_rank="never",le="+Inf"} 1');
      expect(shown).toContain('labelled_step_seconds_count{dynamo_component="backend",model="qwen3",dp_rank="never"} 1');
    } finally {
      off();
      await worker.shutdown();
    }
  });
});
