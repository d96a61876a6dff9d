// run() in real worker processes receiving real signals, on the embedded default (file discovery
// + tcp): graceful shutdown under load, its stages and budget, failed and interrupted starts, and
// the health canary.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Client, DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { hexId } from '@dynamo/runtime/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import type { GenerateChunk } from '../src/index.js';
import { events, startEngine, systemPort } from './support/engine-process.js';

const kvDir = mkdtempSync(join(tmpdir(), 'backend-lifecycle-'));
const env = {
  DYN_DISCOVERY_BACKEND: 'file',
  DYN_FILE_KV: kvDir,
  DYN_REQUEST_PLANE: 'tcp',
  DYN_LOG: 'info',
  DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '1',
};
const workers: Child[] = [];
let caller: DistributedRuntime;

beforeAll(async () => {
  caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
});
afterAll(async () => {
  for (const w of workers) w.kill();
  await caller.shutdown();
  rmSync(kvDir, { recursive: true, force: true });
});

function worker(component: string, args: string[] = [], extraEnv: Record<string, string> = {}): Child {
  const child = startEngine('lifecycle-engine', ['--component', component, ...args], { ...env, ...extraEnv });
  workers.push(child);
  return child;
}

/** The worker's instance id, once it is serving. */
async function serving(w: Child): Promise<bigint> {
  const start = await w.waitForLine(/^EVENT start /);
  await waitFor('the worker to serve', () => w.stderr().includes('"msg":"Serving lifecycle on'), 30_000);
  return BigInt(`0x${start.split(' ')[3]}`);
}

/** A worker with its system status server on a free port, once serving: its id and the server's base URL. */
async function servingWithStatus(component: string, args: string[]): Promise<{ w: Child; id: bigint; base: string }> {
  const w = worker(component, args, { DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1' });
  const id = await serving(w);
  return { w, id, base: `http://127.0.0.1:${await systemPort(w)}` };
}

async function collect(stream: AsyncIterable<unknown>): Promise<GenerateChunk[]> {
  const out: GenerateChunk[] = [];
  for await (const chunk of stream) out.push(chunk as GenerateChunk);
  return out;
}

/** Discovery records (instance and model card) that name this instance. */
function records(id: bigint): string[] {
  return ['instances', 'mdc'].flatMap((bucket) => {
    const dir = join(kvDir, 'v1', bucket);
    return existsSync(dir)
      ? readdirSync(dir)
          .filter((name) => name.endsWith(hexId(id)))
          .map((name) => `${bucket}/${name}`)
      : [];
  });
}

/** Epoch ms of the first JSON log line with this message. */
function logTime(w: Child, msg: string): number {
  const line = w
    .stderr()
    .split('\n')
    .find((l) => l.includes(`"msg":"${msg}`));
  if (!line) throw new Error(`no log line "${msg}" in:\n${w.stderr()}`);
  return (JSON.parse(line) as { time: number }).time;
}

const request = (maxTokens: number) => ({ token_ids: [1, 2, 3], stop_conditions: { max_tokens: maxTokens } });

describe('run(): graceful shutdown', () => {
  let client: Client;
  beforeAll(async () => {
    client = await caller.endpoint('dynamo.pool.generate').client();
  });

  it('SIGTERM with 20 streams in flight: all finish, new requests go elsewhere, drain runs once between the grace period and cleanup, exit 0, records gone', async () => {
    const a = worker('pool', ['--delay-ms', '50']);
    const b = worker('pool', ['--delay-ms', '5']);
    const [idA, idB] = await Promise.all([serving(a), serving(b)]);
    await waitFor('both instances', () => client.instanceIds().length === 2, 20_000);
    expect(records(idA).sort()).toEqual([`instances/dynamo%2Fpool%2Fgenerate%2F${hexId(idA)}`, `mdc/dynamo%2Fpool%2Fgenerate%2F${hexId(idA)}`]);

    const streams = Array.from({ length: 20 }, () => collect(client.direct(request(40), idA)));
    await waitFor('20 requests on worker A', () => events(a).filter(([name]) => name === 'request').length === 20);
    a.child.kill('SIGTERM');
    await waitFor('A to leave discovery', () => !client.instanceIds().includes(idA), 10_000);
    const later = await Promise.all(Array.from({ length: 5 }, () => collect(client.roundRobin(request(3)))));

    for (const chunks of await Promise.all(streams)) {
      expect(chunks.flatMap((c) => c.token_ids)).toHaveLength(40);
      expect(chunks.at(-1)!.finish_reason).toBe('length');
    }
    for (const chunks of later) expect(chunks.at(-1)!.finish_reason).toBe('length');
    expect(await a.exited).toBe(0);
    expect(events(a).filter(([name]) => name === 'request')).toHaveLength(20);
    expect(events(b).filter(([name]) => name === 'request')).toHaveLength(5);
    expect(records(idA)).toEqual([]);
    expect(records(idB)).toHaveLength(2);

    const drains = events(a).filter(([name]) => name === 'drain');
    const cleanups = events(a).filter(([name]) => name === 'cleanup');
    expect(drains).toHaveLength(1);
    expect(cleanups).toHaveLength(1);
    const drainAt = drains[0]![1];
    expect(drainAt).toBeGreaterThanOrEqual(logTime(a, 'SIGTERM received') + 1000);
    expect(drainAt).toBeGreaterThanOrEqual(logTime(a, 'shutdown stage inflight: completed'));
    expect(drainAt).toBeLessThanOrEqual(cleanups[0]![1]);
    expect(a.stderr()).toContain('"msg":"Engine cleanup complete"');
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 60_000);

  it('abandons a cleanup() that hangs at its bound, naming the variable to raise, and still exits', async () => {
    const w = worker('hang', ['--cleanup-hangs'], { DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '0', DYN_WORKER_SHUTDOWN_CLEANUP_TIMEOUT_SECS: '1' });
    await serving(w);
    const signalled = Date.now();
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(events(w).filter(([name]) => name === 'cleanup')).toHaveLength(1);
    expect(w.stderr()).toMatch(/engine cleanup did not finish within 1(\.\d+)?s; abandoning it\. Set DYN_WORKER_SHUTDOWN_CLEANUP_TIMEOUT_SECS/);
  }, 30_000);

  it('exits with 911 when shutdown overruns DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT, saying so', async () => {
    const w = worker('overrun', ['--delay-ms', '100'], { DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '0', DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT: '1' });
    const id = await serving(w);
    const slow = await caller.endpoint('dynamo.overrun.generate').client();
    await waitFor('the instance', () => slow.instanceIds().includes(id), 20_000);
    const stream = collect(slow.direct(request(1000), id)).catch((e: unknown) => e);
    await w.waitForLine(/^EVENT request /);
    w.child.kill('SIGTERM');
    // Dynamo's code 911, as the OS reports it: exit statuses are 8 bits (911 & 0xff = 143).
    expect(await w.exited).toBe(911 & 0xff);
    expect(w.stderr()).toContain('Set DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT to allow more time');
    expect(await stream).toBeInstanceOf(Error);
  }, 30_000);

  it('a start() that throws: cleanup() runs once, the error names the engine, exit code 1', async () => {
    const w = worker('broken', ['--start-throws']);
    expect(await w.exited).toBe(1);
    expect(events(w).map(([name]) => name)).toEqual(['start', 'cleanup']);
    expect(w.stderr()).toContain('engine LifecycleEngine: start() failed: no GPU here');
  }, 30_000);

  it('a signal during start(): shuts down without ever serving', async () => {
    const w = worker('slowstart', ['--start-ms', '1500']);
    const start = await w.waitForLine(/^EVENT start /);
    const id = BigInt(`0x${start.split(' ')[3]}`);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(
      events(w)
        .map(([name]) => name)
        .filter((n) => n !== 'drain'),
    ).toEqual(['start', 'started', 'cleanup']);
    expect(w.stderr()).toContain('Shutdown signal observed during engine.start()');
    expect(w.stderr()).not.toContain('"msg":"Serving');
    expect(records(id)).toEqual([]);
  }, 30_000);

  it('a second SIGINT exits at once', async () => {
    const w = worker('impatient', [], { DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '30' });
    await serving(w);
    w.child.kill('SIGINT');
    await waitFor('the first signal to be seen', () => w.stderr().includes('SIGINT received'));
    w.child.kill('SIGINT');
    expect(await w.exited).toBe(130);
  }, 30_000);
});

describe('run(): health canary', () => {
  it('turns /health unhealthy while the engine fails every request, and healthy again when it recovers', async () => {
    const flag = join(kvDir, 'fail-now');
    const w = worker('canary', ['--fail-when', flag], {
      DYN_SYSTEM_PORT: '0',
      DYN_SYSTEM_HOST: '127.0.0.1',
      DYN_HEALTH_CHECK_ENABLED: '1',
      DYN_CANARY_WAIT_TIME: '0.2',
      DYN_HEALTH_CHECK_REQUEST_TIMEOUT: '1',
    });
    await serving(w);
    const health = `http://127.0.0.1:${await systemPort(w)}/health`;
    const status = async () => (await fetch(health)).status;
    await waitFor('healthy', async () => (await status()) === 200, 10_000);
    const probes = () => events(w).filter(([name]) => name === 'request').length;
    await waitFor('a canary probe', () => probes() > 0, 10_000);

    writeFileSync(flag, '');
    await waitFor('unhealthy', async () => (await status()) === 503, 10_000);
    const body = (await (await fetch(health)).json()) as { status: string; endpoints: Record<string, string> };
    expect(body).toMatchObject({ status: 'notready', endpoints: { generate: 'notready' } });
    expect(w.stderr()).toContain('device lost');

    rmSync(flag);
    await waitFor('healthy again', async () => (await status()) === 200, 10_000);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
  }, 40_000);
});

describe('run(): engine metrics on /metrics', () => {
  it("shows the engine's registerPrometheus metrics by prefix and the per-DP-rank KV cache gauges", async () => {
    const { w, id, base } = await servingWithStatus('metered', ['--dp-ranks', '0,1']);
    const metrics = `${base}/metrics`;
    const sample = (text: string, name: string, rank?: number) =>
      text
        .split('\n')
        .find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && (rank === undefined || l.includes(`dp_rank="${rank}"`)))
        ?.split(' ')
        .at(-1);

    let text = await (await fetch(metrics)).text();
    // Seeded at 0 for each rank before the engine reports anything; no hit rate until one is known.
    expect([sample(text, 'dynamo_component_total_blocks', 0), sample(text, 'dynamo_component_total_blocks', 1)]).toEqual(['0', '0']);
    expect(sample(text, 'dynamo_component_gpu_cache_usage_percent', 1)).toBe('0');
    expect(sample(text, 'dynamo_component_kv_cache_hit_rate')).toBeUndefined();
    expect(sample(text, 'lifecycle_requests_total')).toBe('0');

    const client = await caller.endpoint('dynamo.metered.generate').client();
    for (let i = 0; i < 2; i++) await collect(await client.direct(request(1), id));
    text = await (await fetch(metrics)).text();
    expect(sample(text, 'lifecycle_requests_total')).toBe('2');
    // The engine's metrics carry the worker's labels.
    expect(text).toContain(
      'lifecycle_requests_total{dynamo_namespace="dynamo",dynamo_component="metered",dynamo_endpoint="generate",model="lifecycle",model_name="lifecycle"} 2',
    );
    expect(text).not.toContain('private_debug_total');
    expect(sample(text, 'dynamo_component_total_blocks', 1)).toBe('64');
    expect(sample(text, 'dynamo_component_gpu_cache_usage_percent', 1)).toBe(String(2 / 64));
    expect(sample(text, 'dynamo_component_kv_cache_hit_rate', 1)).toBe('0.5');
    expect(sample(text, 'dynamo_component_total_blocks', 0)).toBe('0');
    expect(text).toMatch(/dynamo_component_total_blocks\{[^}]*dynamo_component="metered"[^}]*model="lifecycle"[^}]*dp_rank="1"\} 64/);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
  }, 40_000);
});

describe('run(): engine controls on the system port', () => {
  it('pause leaves discovery (the card stays), resume rejoins unless the engine refuses or still sleeps; a throw is a 500 and the worker goes on', async () => {
    const { w, id, base } = await servingWithStatus('controlled', ['--controls', 'pause_generation,resume_generation,wake_up,profile']);
    const control = async (name: string, body: unknown = {}) => {
      const res = await fetch(`${base}/engine/control/${name}`, { method: 'POST', body: JSON.stringify(body) });
      return { status: res.status, body: JSON.parse(await res.text()) as unknown };
    };
    const instance = `instances/dynamo%2Fcontrolled%2Fgenerate%2F${hexId(id)}`;
    const card = `mdc/dynamo%2Fcontrolled%2Fgenerate%2F${hexId(id)}`;
    await waitFor('the worker in discovery', () => records(id).length === 2, 10_000);

    expect(await control('pause_generation')).toEqual({ status: 200, body: { status: 'ok', message: 'pause_generation done' } });
    expect(records(id)).toEqual([card]);
    expect((await fetch(`${base}/health`)).status).toBe(503);
    expect(await control('resume_generation', { fail: true })).toEqual({ status: 200, body: { status: 'error', message: 'resume_generation refused' } });
    expect(records(id)).toEqual([card]);
    expect(await control('wake_up', { still: true })).toMatchObject({ status: 200, body: { is_sleeping: true } });
    expect(records(id)).toEqual([card]);
    expect(await control('resume_generation')).toEqual({ status: 200, body: { status: 'ok', message: 'resume_generation done' } });
    expect(records(id).sort()).toEqual([instance, card]);
    expect((await fetch(`${base}/health`)).status).toBe(200);

    // Any other name runs as it is, touching nothing.
    expect(await control('profile')).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(records(id)).toHaveLength(2);
    expect(await control('profile', { explode: true })).toEqual({ status: 500, body: { error: 'Handler error', message: 'profile exploded' } });
    expect(await control('profile', { reply: 'yes' })).toEqual({
      status: 500,
      body: { error: 'Handler error', message: "engineControl('profile') must return a JSON object, got string" },
    });
    expect(await control('sleep')).toMatchObject({ status: 404 });
    expect(
      events(w)
        .filter(([name]) => name === 'control')
        .map(([, , detail]) => detail),
    ).toEqual(['pause_generation', 'resume_generation', 'wake_up', 'resume_generation', 'profile', 'profile', 'profile']);

    // Still serving after the failed controls.
    const client = await caller.endpoint('dynamo.controlled.generate').client();
    await client.waitForInstances();
    const chunks = await collect(client.direct(request(2), id));
    expect(chunks.at(-1)!.finish_reason).toBe('length');
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
  }, 40_000);

  it('names a bad control name at startup, exit 2 (bad input), after cleanup', async () => {
    const w = worker('badcontrol', ['--controls', 'ok,has space'], { DYN_SYSTEM_PORT: '0', DYN_SYSTEM_HOST: '127.0.0.1' });
    expect(await w.exited).toBe(2);
    expect(w.stderr()).toContain('engine LifecycleEngine: supportedControls() must return control names');
    expect(events(w).map(([name]) => name)).toContain('cleanup');
  }, 30_000);
});
