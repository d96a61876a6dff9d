import { describe, expect, it } from 'vitest';
import { DistributedRuntime, loadRuntimeConfig, MemKvSpace } from '../src/index.js';
import { waitFor } from './harness/free-port.js';

describe('system status server (DYN_SYSTEM_PORT)', () => {
  it('is off unless DYN_SYSTEM_PORT is set', async () => {
    const runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' }), memSpace: new MemKvSpace() });
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
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      await caller.shutdown();
      await worker.shutdown();
    }
  });
});
