// dynamo-serve with real processes on the embedded default (file discovery, tcp): a graph of
// Gateway (HTTP route) → Worker (two processes) answers end to end, shares load, restarts a
// killed worker, layers config decorator < YAML < flags, hands out GPUs, and stops on SIGTERM.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { waitFor } from '@dynamo/testing/free-port';
import { type ServeProcess, startServe } from '@dynamo/testing/dynamo-serve';
import { alive } from '@dynamo/testing/processes';

const here = dirname(fileURLToPath(import.meta.url));
const graph = `${join(here, 'fixtures/serve-graph.ts')}#Gateway`;
const dir = mkdtempSync(join(tmpdir(), 'dynamo-serve-test-'));
const env = { DYN_FILE_KV: join(dir, 'kv'), CUDA_VISIBLE_DEVICES: '4,5', DYN_DISCOVERY_BACKEND: undefined, DYN_REQUEST_PLANE: undefined };
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface WorkerReply {
  n: number;
  pid: number;
  config: Record<string, unknown>;
  cuda: string | null;
  envs: Array<string | undefined>;
}

async function call(url: string, n: number): Promise<WorkerReply> {
  const res = await fetch(`${url}/call`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ n }) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return (await res.json()) as WorkerReply;
}

describe('dynamo-serve on the embedded default', () => {
  let serve: ServeProcess;
  let url: string;
  let workers: Map<string, { pid: number; url?: string }>;

  beforeAll(async () => {
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      ['Worker:', '  b: yaml', '  c: yaml', '  nested: {x: 2}', '  ServiceArgs:', '    envs: {FROM_YAML: yes-yaml}', 'Elsewhere:', '  z: 1', ''].join('\n'),
    );
    serve = startServe([graph, '-f', config, '--Worker.c=flag', '--Worker.nested.y', '3'], env);
    workers = await serve.ready();
    url = workers.get('Gateway#1')!.url!;
  }, 90_000);
  afterAll(() => {
    if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
  });

  it('starts the entry and what it depends on, one process per worker, and answers the HTTP route end to end', async () => {
    expect([...workers.keys()].sort()).toEqual(['Gateway#1', 'Worker#1', 'Worker#2']);
    expect(new Set([...workers.values()].map((w) => w.pid)).size).toBe(3);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await call(url, 7)).n).toBe(7);
  });

  it('workers: 2 gives two instances that share the load', async () => {
    const pids = new Set<number>();
    for (let i = 0; i < 8; i++) pids.add((await call(url, i)).pid);
    expect([...pids].sort()).toEqual([workers.get('Worker#1')!.pid, workers.get('Worker#2')!.pid].sort());
  });

  it('layers config: decorator < YAML < --Class.key=value, nested keys merged; ServiceArgs.envs reach the processes', async () => {
    const reply = await call(url, 1);
    expect(reply.config).toEqual({ a: 'decorator', b: 'yaml', c: 'flag', nested: { x: 2, y: 3 } });
    expect(reply.envs).toEqual(['decorator', 'yes-yaml']);
    expect(serve.logs.some((l) => /config section Elsewhere matches no service/.test(String(l.msg)))).toBe(true);
  });

  it('gives each GPU worker its own CUDA_VISIBLE_DEVICES from resources.gpu', async () => {
    const byPid = new Map<number, string | null>();
    for (let i = 0; i < 6; i++) {
      const r = await call(url, i);
      byPid.set(r.pid, r.cuda);
    }
    expect(byPid.get(workers.get('Worker#1')!.pid)).toBe('4');
    expect(byPid.get(workers.get('Worker#2')!.pid)).toBe('5');
  });

  it('restarts a killed worker, which serves again', async () => {
    const victim = workers.get('Worker#2')!.pid;
    process.kill(victim, 'SIGKILL');
    await serve.waitForLog((l) => l.worker === 'Worker#2' && /restarting in 1 s/.test(String(l.msg)), 'the restart notice');
    const back = await serve.waitForLog((l) => l.msg === 'Worker#2 ready' && l.workerPid !== victim, 'Worker#2 ready again');
    const fresh = back.workerPid as number;
    expect(alive(victim)).toBe(false);
    const pids = await waitFor(
      'the new worker to take requests',
      async () => {
        const seen = new Set<number>();
        for (let i = 0; i < 6; i++) seen.add((await call(url, i)).pid);
        return seen.has(fresh) ? seen : undefined;
      },
      20_000,
    );
    expect(pids.has(victim)).toBe(false);
    workers.set('Worker#2', { pid: fresh });
  });

  it('SIGTERM stops every process gracefully and exits 0', async () => {
    const pids = [...workers.values()].map((w) => w.pid);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toEqual({ code: 0, signal: null });
    for (const pid of pids) expect(alive(pid), `worker ${pid}`).toBe(false);
    expect(serve.logs.filter((l) => /stopped \(status 0\)/.test(String(l.msg)))).toHaveLength(3);
  });
});

describe('dynamo-serve arguments', () => {
  const run = async (args: string[], extra: Record<string, string> = {}) => {
    const p = startServe(args, { ...env, ...extra });
    const { code } = await p.exited;
    return { code, stdout: p.stdout.join('\n'), stderr: p.text.join('\n') };
  };

  it('--dry-run prints each service with its resolved workers, GPUs and config', async () => {
    const { code, stdout } = await run([graph, '--dry-run', '--Worker.ServiceArgs.workers=3', '--Gateway.port=9999']);
    expect(code).toBe(0);
    const plan = JSON.parse(stdout) as {
      entry: string;
      services: Array<{ name: string; workers: number; devices: string[] | null; config: Record<string, unknown>; dependsOn: string[] }>;
      warnings: string[];
    };
    expect(plan.entry).toBe('Gateway');
    expect(plan.services.map((s) => [s.name, s.workers, s.devices, s.dependsOn])).toEqual([
      ['Gateway', 1, null, ['Worker']],
      ['Worker', 3, ['4', '5', '4'], []],
    ]);
    expect(plan.services[0]!.config).toEqual({ port: 9999, host: '127.0.0.1' });
    expect(plan.warnings.join()).toMatch(/asks for 3 GPUs and this machine has 2/);
  });

  it('DYN_DEPLOYMENT_CONFIG replaces the YAML file', async () => {
    const { stdout } = await run([graph, '--dry-run', '-f', join(dir, 'missing.yaml')], { DYN_DEPLOYMENT_CONFIG: '{"Worker": {"b": "from-env"}}' });
    expect((JSON.parse(stdout) as { services: Array<{ config: Record<string, unknown> }> }).services[1]!.config.b).toBe('from-env');
  });

  it.each([
    [[], /give the graph as <module>#<Class>/],
    [['nope.ts#X'], /no module at .*nope\.ts/],
    [[graph.replace('#Gateway', '#Nothing')], /exports no class Nothing \(exported: .*Gateway/],
    [[graph, '--Workr.c=1'], /--Workr\.\*: no service Workr in the graph \(services: Gateway, Worker\)/],
    [[graph, '--Worker.ServiceArgs.workers=0'], /Worker\.ServiceArgs\.workers: Too small/],
    [[graph, '-f', '/nonexistent.yaml'], /config file \/nonexistent\.yaml: not found/],
    [[graph, '--discovery-backend', 'zookeeper'], /--discovery-backend/],
    [[graph, '--service-name', 'Nobody'], /--service-name Nobody: no such service in the graph/],
    [[graph, '--Worker.c'], /--Worker\.c: needs a value/],
    [[graph, '--Gateway.ServiceArgs.workers=2'], /Gateway: a service with @api routes runs one worker here/],
  ])('bad arguments %j exit 2 naming what is wrong', async (args, message) => {
    const { code, stderr } = await run(args as string[]);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  });

  it('--help lists the options', async () => {
    const { code, stdout } = await run(['--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: dynamo-serve <module>#<Class>/);
    expect(stdout).toMatch(/--service-name CLASS/);
  });
});
