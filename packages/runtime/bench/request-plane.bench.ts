// Request-plane benchmark: `pnpm --filter @dynamo/runtime bench` (tsx; not a vitest test).
//
// For the tcp and nats request planes, with the worker in a child process (file discovery in a
// temp dir, the way separate processes find each other), it measures at the client:
//   1. one long stream: items/s of a single request streaming N `{"token_ids":[i]}` items;
//   2. short requests (request -> 1 item -> end) at concurrency C: requests/s, p50/p99 latency;
//   3. the loopback floor, measured in the same run against a plain `node:net` child process:
//      64 pipelined echo loops on one socket, the same with a fresh connection per request (what
//      the call-home response plane does for every request), and a one-way stream of
//      length-prefixed frames;
//      With the nats plane, also plain nats.js request/reply with an empty answer (the ack) at
//      concurrency C: the NATS round trip alone, without a call-home.
//   4. the worker's RSS (after a forced GC): idle after startup; right after the short requests
//      (V8's young generation has grown to its maximum under the load); and idle again, once the
//      worker's V8 has given the young generation back on its own (polled without forcing a GC, for
//      up to BENCH_IDLE_SETTLE_S), which is what the growth target compares. The stream runs
//      first, right after the idle reading. Also the caller's heap after them.
// It prints a table with PASS/FAIL beside each target and always exits 0: it is a report.
//
// Knobs (environment): BENCH_PLANES=tcp,nats  BENCH_STREAM_ITEMS=500000  BENCH_REQUESTS=20000
// BENCH_WARMUP=2000  BENCH_CONCURRENCY=64  BENCH_SOAK=100000 (short requests before the RSS check)
// BENCH_FLOOR=0 (skip the node:net floor)  BENCH_PHASE_TIMEOUT_S=120 (per measurement)
// BENCH_IDLE_SETTLE_S=60 (how long the idle worker may take to give memory back)
// BENCH_RUNNER=node|tsx (how the caller and the children run: plain node on esbuild bundles, the
// way a built frontend and worker run, or with the tsx loader on the sources; node falls back to
// tsx when esbuild is unavailable)  BENCH_CHILD_FLAGS='--cpu-prof --cpu-prof-dir=/tmp/prof' (extra node flags for the
// children; profile the caller with `node --cpu-prof --import tsx bench/request-plane.bench.ts`).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect, type Socket } from 'node:net';
import { arch, cpus, platform, release, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node';
import { type Client, DistributedRuntime, loadRuntimeConfig } from '../src/index.js';
// The same tick-batched writer the runtime's request plane uses, so the floor writes alike.
import { tickBatchedWriter } from '../src/wire/socket-helpers.js';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';

// The bench re-runs itself from a bundle in bench/.build (see main), which passes its real directory.
const here = process.env.BENCH_HERE ?? dirname(fileURLToPath(import.meta.url));
const packageRoot = join(here, '..');

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.replace(/_/g, ''));
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return value;
}

const STREAM_ITEMS = intEnv('BENCH_STREAM_ITEMS', 500_000);
const REQUESTS = intEnv('BENCH_REQUESTS', 20_000);
const WARMUP = intEnv('BENCH_WARMUP', 2_000);
const CONCURRENCY = intEnv('BENCH_CONCURRENCY', 64);
const SOAK = Math.max(intEnv('BENCH_SOAK', 100_000), WARMUP + REQUESTS);
const IDLE_SETTLE_MS = intEnv('BENCH_IDLE_SETTLE_S', 60) * 1000;
const PLANES = (process.env.BENCH_PLANES ?? 'tcp,nats')
  .split(',')
  .map((p) => p.trim())
  .filter(Boolean) as Array<'tcp' | 'nats'>;
const RUNNER_WANTED = process.env.BENCH_RUNNER === 'tsx' ? 'tsx' : 'node';
const FLOOR = process.env.BENCH_FLOOR !== '0';
// Extra node flags for the child processes, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
const CHILD_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(' ').filter(Boolean);

const TARGETS = {
  streamItemsPerSec: 250_000, // one tcp stream
  shortRps: 5_000,
  idleRssMb: 100,
  rssGrowthPct: 10,
};

// ---------------------------------------------------------------------------------------------
// Child processes

interface Memory {
  gc: boolean;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  /** V8's young generation (new space), committed bytes. */
  newSpace: number;
  external: number;
  arrayBuffers: number;
}

type Runner = { kind: 'node'; bundle: string } | { kind: 'tsx' };

/**
 * Bundles bench/worker.ts (dependencies left external) with the esbuild that tsx ships, so the
 * children run on plain node without a TypeScript loader: tsx's off-thread loader alone adds
 * ~30 MB of RSS, which is not the runtime's and not what a built worker carries.
 */
/** Bundles `bench/{name}.ts` and the sources it imports (dependencies left external) into bench/.build. */
async function bundle(name: string): Promise<string> {
  const tsxRequire = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'));
  const esbuild = tsxRequire('esbuild') as { build(options: Record<string, unknown>): Promise<unknown> };
  const outfile = join(here, '.build', `${name}.mjs`);
  await esbuild.build({
    entryPoints: [join(here, `${name}.ts`)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'silent',
  });
  return outfile;
}

async function prepareRunner(): Promise<{ runner: Runner; note: string }> {
  if (RUNNER_WANTED === 'tsx') return { runner: { kind: 'tsx' }, note: 'node --import tsx (TypeScript loader thread included in RSS)' };
  try {
    const worker = await bundle('worker');
    return { runner: { kind: 'node', bundle: worker }, note: 'plain node on an esbuild bundle of bench/worker.ts + src (deps external)' };
  } catch (err) {
    return { runner: { kind: 'tsx' }, note: `node --import tsx (esbuild unavailable: ${(err as Error).message.split('\n')[0]})` };
  }
}

class Child {
  readonly #proc: ChildProcess;
  readonly #waiters = new Map<string, Array<(message: Record<string, unknown>) => void>>();
  #stderr = '';
  readonly exited: Promise<number | null>;

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    proc.stderr?.on('data', (d: Buffer) => {
      this.#stderr = (this.#stderr + d.toString()).slice(-4000);
    });
    proc.stdout?.on('data', () => {});
    proc.on('message', (message: Record<string, unknown>) => {
      const list = this.#waiters.get(String(message.type));
      list?.shift()?.(message);
    });
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  }

  static async start(runner: Runner, mode: 'worker' | 'floor', env: Record<string, string>): Promise<{ child: Child; ready: Record<string, unknown> }> {
    const flags = ['--expose-gc', ...CHILD_FLAGS];
    const args = runner.kind === 'node' ? [...flags, runner.bundle, mode] : [...flags, '--import', 'tsx', join(here, 'worker.ts'), mode];
    const proc = spawn(process.execPath, args, { cwd: packageRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    const child = new Child(proc);
    const ready = await child.#await('ready', 30_000);
    return { child, ready };
  }

  get pid(): number {
    return this.#proc.pid!;
  }

  #await(type: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child sent no '${type}' within ${timeoutMs} ms; stderr:\n${this.#stderr}`)), timeoutMs);
      const list = this.#waiters.get(type) ?? [];
      list.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
      this.#waiters.set(type, list);
      void this.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`child exited (${code}) before sending '${type}'; stderr:\n${this.#stderr}`));
      });
    });
  }

  /** The child's memory after a forced GC (`mem`), or as it is (`rss`). */
  async memory(kind: 'mem' | 'rss' = 'mem'): Promise<Memory> {
    const answer = this.#await(kind, 10_000);
    this.#proc.send({ cmd: kind });
    return (await answer) as unknown as Memory;
  }

  /**
   * Waits, without forcing a GC, until V8 has shrunk the child's young generation back to its
   * idle size (`newSpace` bytes, plus 1 MiB), or `timeoutMs`; returns the seconds it took, or
   * undefined when it did not happen in time.
   */
  async settle(newSpace: number, timeoutMs: number): Promise<number | undefined> {
    const started = performance.now();
    while (performance.now() - started < timeoutMs) {
      if ((await this.memory('rss')).newSpace <= newSpace + 2 ** 20) return (performance.now() - started) / 1000;
      await settle(1000);
    }
    return undefined;
  }

  /** The child's CPU time so far (user + system), in microseconds. */
  async cpu(): Promise<number> {
    const answer = this.#await('cpu', 10_000);
    this.#proc.send({ cmd: 'cpu' });
    const usage = (await answer) as { user: number; system: number };
    return usage.user + usage.system;
  }

  /** Peak RSS (VmHWM) from /proc, in bytes; undefined off Linux. */
  peakRss(): number | undefined {
    try {
      const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
      return match ? Number(match[1]) * 1024 : undefined;
    } catch {
      return undefined;
    }
  }

  async stop(): Promise<void> {
    if (this.#proc.exitCode !== null || this.#proc.signalCode !== null) return;
    if (this.#proc.connected) this.#proc.send({ cmd: 'stop' });
    else this.#proc.kill('SIGTERM');
    const timer = setTimeout(() => this.#proc.kill('SIGKILL'), 5_000);
    await this.exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface ShortResult {
  count: number;
  /** CPU microseconds per request spent by the worker and by the caller (this process). */
  workerCpuUs?: number;
  callerCpuUs?: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  firstError?: string;
}

/** Runs `total` calls of `once` from `concurrency` loops; latency per call in ms. */
async function closedLoop(total: number, concurrency: number, once: () => Promise<void>): Promise<ShortResult> {
  const latencies = new Float64Array(total);
  let next = 0;
  let errors = 0;
  let firstError: string | undefined;
  const loop = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      const t0 = performance.now();
      try {
        await once();
      } catch (err) {
        errors++;
        firstError ??= (err as Error).message;
      }
      latencies[i] = performance.now() - t0;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort();
  const at = (q: number) => latencies[Math.min(total - 1, Math.floor(q * total))]!;
  return { count: total, rps: total / elapsed, p50: at(0.5), p99: at(0.99), errors, ...(firstError === undefined ? {} : { firstError }) };
}

async function shortRequests(client: Client, total: number): Promise<ShortResult> {
  return closedLoop(total, CONCURRENCY, async () => {
    let items = 0;
    for await (const _ of client.generate({ n: 1 })) items++;
    if (items !== 1) throw new Error(`expected 1 item, got ${items}`);
  });
}

interface StreamResult {
  items: number;
  /** CPU microseconds per item spent by the worker and by the caller (this process). */
  workerCpuUs?: number;
  callerCpuUs?: number;
  seconds: number;
  perSec: number;
}

async function oneStream(client: Client, n: number): Promise<StreamResult> {
  const started = performance.now();
  let items = 0;
  let last: { token_ids: number[] } | undefined;
  for await (const item of client.generate<{ token_ids: number[] }>({ n })) {
    items++;
    last = item;
  }
  const seconds = (performance.now() - started) / 1000;
  if (items !== n || last?.token_ids[0] !== n - 1) throw new Error(`stream delivered ${items}/${n} items, last ${JSON.stringify(last)}`);
  return { items, seconds, perSec: items / seconds };
}

function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, noDelay: true });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
  });
}

/** A small length-prefixed message, about the size of a short request's body. */
function frame(text: string): Buffer {
  const out = Buffer.allocUnsafe(4 + Buffer.byteLength(text));
  out.writeUInt32BE(out.length - 4, 0);
  out.write(text, 4);
  return out;
}

/** Calls `onFrame` for every complete u32-length-prefixed frame in the byte stream fed to it. */
function frameReader(onFrame: (body: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer | undefined;
  return (chunk) => {
    const data = pending ? Buffer.concat([pending, chunk]) : chunk;
    let off = 0;
    while (data.length - off >= 4) {
      const len = data.readUInt32BE(off);
      if (data.length - off < 4 + len) break;
      onFrame(data.subarray(off + 4, off + 4 + len));
      off += 4 + len;
    }
    pending = off === data.length ? undefined : data.subarray(off);
  };
}

const PING = frame('{"token_ids":[1,2,3,4,5,6,7,8]}');

/** Floor: `concurrency` request/response loops pipelined on one echo connection (FIFO pairing). */
async function floorEchoPipelined(port: number, total: number): Promise<ShortResult> {
  const socket = await dial(port);
  const writer = tickBatchedWriter(socket);
  let waiters: Array<() => void> = [];
  let head = 0;
  socket.on(
    'data',
    frameReader(() => {
      waiters[head++]!();
      if (head > 4096) {
        waiters = waiters.slice(head);
        head = 0;
      }
    }),
  );
  const result = await closedLoop(
    total,
    CONCURRENCY,
    () =>
      new Promise<void>((resolve) => {
        waiters.push(resolve);
        writer.write(PING);
      }),
  );
  socket.destroy();
  return result;
}

/** Floor: a fresh connection per request (connect, send, echo, close): the call-home pattern. */
async function floorEchoConnectPerRequest(port: number, total: number): Promise<ShortResult> {
  return closedLoop(total, CONCURRENCY, async () => {
    const socket = await dial(port);
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.on(
        'data',
        frameReader(() => resolve()),
      );
      socket.write(PING);
    });
    socket.end();
  });
}

/** Floor: plain nats.js requests answered with an empty payload by the floor child (the ack alone). */
async function floorNatsRequest(nc: NatsConnection, total: number): Promise<ShortResult> {
  return closedLoop(total, CONCURRENCY, async () => {
    await nc.request('bench.floor.echo', PING, { timeout: 10_000 });
  });
}

/**
 * Floor: one connection, the server writes `n` small length-prefixed frames (one write each, or
 * packed into 64 KiB buffers), counted here.
 */
async function floorStream(port: number, n: number, packed: boolean): Promise<StreamResult> {
  const started = performance.now();
  const socket = await dial(port);
  let items = 0;
  await new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on(
      'data',
      frameReader(() => items++),
    );
    socket.on('end', () => resolve());
    const request = Buffer.alloc(5);
    request.writeUInt32BE(n, 0);
    request[4] = packed ? 1 : 0;
    socket.write(request);
  });
  socket.destroy();
  const seconds = (performance.now() - started) / 1000;
  if (items !== n) throw new Error(`floor stream delivered ${items}/${n} frames`);
  return { items, seconds, perSec: items / seconds };
}

// ---------------------------------------------------------------------------------------------
// Runs

interface FloorResults {
  pipelined: ShortResult;
  connectPerRequest: ShortResult;
  /** Plain nats.js request/reply, when a NATS server runs. */
  natsRequest?: ShortResult;
  stream: StreamResult;
  streamPacked: StreamResult;
}

interface PlaneResults {
  plane: 'tcp' | 'nats';
  short: ShortResult;
  soak: ShortResult;
  stream: StreamResult;
  idle: Memory;
  afterMeasured: Memory;
  /** Right after the soak (forced GC): the young generation is still expanded. */
  afterSoak: Memory;
  /** Idle again after the soak (forced GC once V8 gave memory back, see `idleSettledS`). */
  afterIdle: Memory;
  idleSettledS: number | undefined;
  afterStream: Memory;
  peakRss: number | undefined;
  callerHeapIdle: number;
  callerHeapAfterSoak: number;
  shortTotal: number;
}

function progress(text: string): void {
  process.stderr.write(`  .. ${text}\n`);
}

async function runFloor(runner: Runner, nats: NatsTestServer | undefined): Promise<FloorResults> {
  const { child, ready } = await Child.start(runner, 'floor', nats ? { NATS_SERVER: nats.url } : {});
  try {
    const results = await phase('floor', () => floorPhases(ready));
    if (nats) {
      progress('floor: nats request/reply');
      const nc = await natsConnect({ servers: nats.url, noAsyncTraces: true });
      try {
        await floorNatsRequest(nc, WARMUP);
        results.natsRequest = await phase('floor nats', () => floorNatsRequest(nc, REQUESTS));
      } finally {
        await nc.close();
      }
    }
    return results;
  } finally {
    await child.stop();
  }
}

async function floorPhases(ready: Record<string, unknown>): Promise<FloorResults> {
  const echoPort = Number(ready.echoPort);
  const streamPort = Number(ready.streamPort);
  progress('floor: pipelined echo');
  await floorEchoPipelined(echoPort, WARMUP);
  const pipelined = await floorEchoPipelined(echoPort, REQUESTS);
  progress('floor: connect per request');
  await floorEchoConnectPerRequest(echoPort, WARMUP);
  const connectPerRequest = await floorEchoConnectPerRequest(echoPort, REQUESTS);
  progress('floor: one-way stream');
  await floorStream(streamPort, Math.min(STREAM_ITEMS, 50_000), false);
  const stream = await floorStream(streamPort, STREAM_ITEMS, false);
  await floorStream(streamPort, Math.min(STREAM_ITEMS, 50_000), true);
  const streamPacked = await floorStream(streamPort, STREAM_ITEMS, true);
  return { pipelined, connectPerRequest, stream, streamPacked };
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// This process (the caller) runs under tsx without --expose-gc; this is the usual way to get gc().
setFlagsFromString('--expose-gc');
const callerGc = runInNewContext('gc') as () => void;

/** This process's heap after a full GC, in bytes: what the caller side retains. */
function callerHeapUsed(): number {
  callerGc();
  callerGc();
  return process.memoryUsage().heapUsed;
}

/** A hung plane must not hang the report: each measurement gets at most `BENCH_PHASE_TIMEOUT_S`. */
const PHASE_TIMEOUT_MS = intEnv('BENCH_PHASE_TIMEOUT_S', 120) * 1000;
async function phase<R>(what: string, run: () => Promise<R>): Promise<R> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${PHASE_TIMEOUT_MS / 1000} s`)), PHASE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([run(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `measure` and adds the worker's and this process's CPU time per unit to its result. */
async function withCpu<R extends { workerCpuUs?: number; callerCpuUs?: number }>(child: Child, units: number, measure: () => Promise<R>): Promise<R> {
  const worker0 = await child.cpu();
  const caller0 = process.cpuUsage();
  const result = await measure();
  const caller = process.cpuUsage(caller0);
  const worker1 = await child.cpu();
  result.workerCpuUs = (worker1 - worker0) / units;
  result.callerCpuUs = (caller.user + caller.system) / units;
  return result;
}

async function runPlane(plane: 'tcp' | 'nats', runner: Runner, nats: NatsTestServer | undefined): Promise<PlaneResults> {
  const kvRoot = mkdtempSync(join(tmpdir(), `dynamo-bench-${plane}-`));
  const env: Record<string, string> = {
    DYN_DISCOVERY_BACKEND: 'file',
    DYN_FILE_KV: kvRoot,
    DYN_REQUEST_PLANE: plane,
    DYN_LOG: 'error',
    ...(nats ? { NATS_SERVER: nats.url } : {}),
  };
  const { child } = await Child.start(runner, 'worker', env);
  const caller = await DistributedRuntime.create({ config: loadRuntimeConfig(env) });
  try {
    const client = await caller.endpoint('bench.worker.generate').client();
    await client.waitForInstances({ timeoutMs: 15_000 });
    await settle(500);
    const idle = await child.memory();
    const callerHeapIdle = callerHeapUsed();

    // The stream first: measured on a warm runtime but before the short requests, whose
    // garbage (in the caller especially) would otherwise be collected during it.
    progress(`${plane}: one stream of ${STREAM_ITEMS} items`);
    await phase(`${plane} stream warm-up`, () => oneStream(client, Math.min(STREAM_ITEMS, 50_000)));
    const stream = await phase(`${plane} stream`, () => withCpu(child, STREAM_ITEMS, () => oneStream(client, STREAM_ITEMS)));
    const afterStream = await child.memory();

    progress(`${plane}: short requests (warm-up ${WARMUP}, measured ${REQUESTS} at concurrency ${CONCURRENCY})`);
    await phase(`${plane} warm-up`, () => shortRequests(client, WARMUP));
    const short = await phase(`${plane} short requests`, () => withCpu(child, REQUESTS, () => shortRequests(client, REQUESTS)));
    const afterMeasured = await child.memory();
    const soakCount = SOAK - WARMUP - REQUESTS;
    progress(`${plane}: ${soakCount} more short requests (RSS after ${SOAK})`);
    const soak = soakCount > 0 ? await phase(`${plane} soak`, () => shortRequests(client, soakCount)) : short;
    await settle(200);
    const afterSoak = await child.memory();
    const callerHeapAfterSoak = callerHeapUsed();
    progress(`${plane}: waiting (at most ${IDLE_SETTLE_MS / 1000} s) for the idle worker to give its young generation back`);
    const idleSettledS = await child.settle(idle.newSpace, IDLE_SETTLE_MS);
    const afterIdle = await child.memory();
    return {
      plane,
      short,
      soak,
      stream,
      idle,
      afterMeasured,
      afterSoak,
      afterIdle,
      idleSettledS,
      afterStream,
      peakRss: child.peakRss(),
      shortTotal: SOAK,
      callerHeapIdle,
      callerHeapAfterSoak,
    };
  } finally {
    await caller.shutdown({ drainTimeoutMs: 2000 });
    await child.stop();
    rmSync(kvRoot, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const mb = (bytes: number) => bytes / (1024 * 1024);
const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
const fmtMs = (n: number) => n.toFixed(n < 10 ? 2 : 1);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r, i) => {
      const line = r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('   ');
      return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('   ')}` : line;
    })
    .join('\n');
}

function report(env: string[], floor: FloorResults | undefined, planes: PlaneResults[], skipped: string[], failures: string[]): void {
  const by = (p: string) => planes.find((r) => r.plane === p);
  const tcp = by('tcp');
  const nats = by('nats');
  const cell = (r: PlaneResults | undefined, f: (r: PlaneResults) => string) => (r ? f(r) : 'n/a');
  const checks: Array<{ what: string; ok: boolean; detail: string }> = [];

  const rows: string[][] = [['', 'tcp', 'nats', 'floor (node:net)', 'target']];
  rows.push([
    `one stream, items/s (${fmtInt(STREAM_ITEMS)} items)`,
    cell(tcp, (r) => fmtInt(r.stream.perSec)),
    cell(nats, (r) => fmtInt(r.stream.perSec)),
    floor ? `${fmtInt(floor.stream.perSec)} / ${fmtInt(floor.streamPacked.perSec)}` : 'n/a',
    `tcp >= ${fmtInt(TARGETS.streamItemsPerSec)}`,
  ]);
  const cpu = (x: { workerCpuUs?: number; callerCpuUs?: number }, digits: number) =>
    x.workerCpuUs === undefined ? '?' : `${x.workerCpuUs.toFixed(digits)} / ${x.callerCpuUs!.toFixed(digits)}`;
  rows.push(['  CPU us per item, worker / caller', cell(tcp, (r) => cpu(r.stream, 2)), cell(nats, (r) => cpu(r.stream, 2)), '', '']);
  rows.push([
    `short requests/s (c=${CONCURRENCY}, ${fmtInt(REQUESTS)})`,
    cell(tcp, (r) => fmtInt(r.short.rps)),
    cell(nats, (r) => fmtInt(r.short.rps)),
    floor ? `${fmtInt(floor.pipelined.rps)} / ${fmtInt(floor.connectPerRequest.rps)}` : 'n/a',
    `>= ${fmtInt(TARGETS.shortRps)}`,
  ]);
  rows.push([
    '  latency p50, ms',
    cell(tcp, (r) => fmtMs(r.short.p50)),
    cell(nats, (r) => fmtMs(r.short.p50)),
    floor ? `${fmtMs(floor.pipelined.p50)} / ${fmtMs(floor.connectPerRequest.p50)}` : 'n/a',
    '',
  ]);
  rows.push([
    '  latency p99, ms',
    cell(tcp, (r) => fmtMs(r.short.p99)),
    cell(nats, (r) => fmtMs(r.short.p99)),
    floor ? `${fmtMs(floor.pipelined.p99)} / ${fmtMs(floor.connectPerRequest.p99)}` : 'n/a',
    '',
  ]);
  rows.push(['  CPU us per request, worker / caller', cell(tcp, (r) => cpu(r.short, 0)), cell(nats, (r) => cpu(r.short, 0)), '', '']);
  if (floor?.natsRequest) {
    const f = floor.natsRequest;
    rows.push(['  floor: plain nats.js request/reply, req/s (p50 / p99 ms)', '', '', `${fmtInt(f.rps)} (${fmtMs(f.p50)} / ${fmtMs(f.p99)})`, '']);
  }
  rows.push([
    `  requests/s over the next ${fmtInt(SOAK - WARMUP - REQUESTS)}`,
    cell(tcp, (r) => fmtInt(r.soak.rps)),
    cell(nats, (r) => fmtInt(r.soak.rps)),
    '',
    '',
  ]);
  rows.push(['worker RSS idle, MB', cell(tcp, (r) => mb(r.idle.rss).toFixed(1)), cell(nats, (r) => mb(r.idle.rss).toFixed(1)), '', `< ${TARGETS.idleRssMb}`]);
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`;
  const growth = (r: PlaneResults) => (r.afterIdle.rss / r.idle.rss - 1) * 100;
  const loadGrowth = (r: PlaneResults) => (r.afterSoak.rss / r.idle.rss - 1) * 100;
  rows.push([
    `worker RSS idle after ${fmtInt(SOAK)} requests, MB`,
    cell(tcp, (r) => `${mb(r.afterIdle.rss).toFixed(1)} (${pct(growth(r))})`),
    cell(nats, (r) => `${mb(r.afterIdle.rss).toFixed(1)} (${pct(growth(r))})`),
    '',
    `growth <= ${TARGETS.rssGrowthPct}%`,
  ]);
  const settled = (r: PlaneResults) => (r.idleSettledS === undefined ? `not within ${IDLE_SETTLE_MS / 1000}` : r.idleSettledS.toFixed(0));
  rows.push(['  seconds idle until V8 gave memory back', cell(tcp, settled), cell(nats, settled), '', '']);
  rows.push([
    `  RSS right after the ${fmtInt(SOAK)}, MB`,
    cell(tcp, (r) => `${mb(r.afterSoak.rss).toFixed(1)} (${pct(loadGrowth(r))})`),
    cell(nats, (r) => `${mb(r.afterSoak.rss).toFixed(1)} (${pct(loadGrowth(r))})`),
    '',
    '',
  ]);
  rows.push([
    '  young generation idle / loaded / idle again, MB',
    cell(tcp, (r) => `${mb(r.idle.newSpace).toFixed(0)} / ${mb(r.afterSoak.newSpace).toFixed(0)} / ${mb(r.afterIdle.newSpace).toFixed(0)}`),
    cell(nats, (r) => `${mb(r.idle.newSpace).toFixed(0)} / ${mb(r.afterSoak.newSpace).toFixed(0)} / ${mb(r.afterIdle.newSpace).toFixed(0)}`),
    '',
    '',
  ]);
  const steady = (r: PlaneResults) => (r.afterSoak.rss / r.afterMeasured.rss - 1) * 100;
  rows.push([
    `  RSS change over the last ${fmtInt(SOAK - WARMUP - REQUESTS)}, %`,
    cell(tcp, (r) => `${steady(r) >= 0 ? '+' : ''}${steady(r).toFixed(1)}`),
    cell(nats, (r) => `${steady(r) >= 0 ? '+' : ''}${steady(r).toFixed(1)}`),
    '',
    '',
  ]);
  rows.push([
    '  heap used idle -> after, MB',
    cell(tcp, (r) => `${mb(r.idle.heapUsed).toFixed(1)} -> ${mb(r.afterIdle.heapUsed).toFixed(1)}`),
    cell(nats, (r) => `${mb(r.idle.heapUsed).toFixed(1)} -> ${mb(r.afterIdle.heapUsed).toFixed(1)}`),
    '',
    '',
  ]);
  rows.push([
    '  RSS after the stream (run first) / peak, MB',
    cell(tcp, (r) => `${mb(r.afterStream.rss).toFixed(1)} / ${r.peakRss ? mb(r.peakRss).toFixed(1) : '?'}`),
    cell(nats, (r) => `${mb(r.afterStream.rss).toFixed(1)} / ${r.peakRss ? mb(r.peakRss).toFixed(1) : '?'}`),
    '',
    '',
  ]);
  rows.push([
    `caller heap idle -> after ${fmtInt(SOAK)}, MB`,
    cell(tcp, (r) => `${mb(r.callerHeapIdle).toFixed(1)} -> ${mb(r.callerHeapAfterSoak).toFixed(1)}`),
    cell(nats, (r) => `${mb(r.callerHeapIdle).toFixed(1)} -> ${mb(r.callerHeapAfterSoak).toFixed(1)}`),
    '',
    '',
  ]);

  if (tcp)
    checks.push({ what: 'tcp one stream >= 250k items/s', ok: tcp.stream.perSec >= TARGETS.streamItemsPerSec, detail: `${fmtInt(tcp.stream.perSec)} items/s` });
  for (const f of failures) checks.push({ what: f.split(':')[0]!, ok: false, detail: f.slice(f.indexOf(':') + 1).trim() });
  for (const r of planes) {
    checks.push({
      what: `${r.plane} short requests >= 5k/s`,
      ok: r.short.rps >= TARGETS.shortRps,
      detail: `${fmtInt(r.short.rps)} req/s, p50 ${fmtMs(r.short.p50)} ms, p99 ${fmtMs(r.short.p99)} ms`,
    });
    checks.push({ what: `${r.plane} worker RSS idle < 100 MB`, ok: mb(r.idle.rss) < TARGETS.idleRssMb, detail: `${mb(r.idle.rss).toFixed(1)} MB` });
    checks.push({
      what: `${r.plane} worker RSS growth <= 10% after ${fmtInt(r.shortTotal)} requests`,
      ok: growth(r) <= TARGETS.rssGrowthPct,
      detail: `${pct(growth(r))} idle (${pct(loadGrowth(r))} right after the load, young generation expanded)`,
    });
    const errors = r.short.errors + (r.soak === r.short ? 0 : r.soak.errors);
    if (errors > 0)
      checks.push({
        what: `${r.plane} short requests without errors`,
        ok: false,
        detail: `${errors} failed, first: ${r.short.firstError ?? r.soak.firstError}`,
      });
  }

  const out: string[] = [];
  out.push('');
  out.push('== Request-plane benchmark (@dynamo/runtime)');
  for (const line of env) out.push(`   ${line}`);
  out.push('');
  out.push(table(rows));
  out.push('');
  out.push('   floor (node:net): plain sockets to a node:net child process, no runtime.');
  out.push('     short requests: "pipelined on one socket / a fresh connection per request" (every Dynamo request');
  out.push('     opens a call-home connection from the worker to the caller, so the second figure bounds both planes);');
  out.push('     stream: u32-length-prefixed {"token_ids":[i]} frames, "one write per frame, corked per 256 / packed');
  out.push('     into 64 KiB writes"; the client only frames and counts them (no JSON.parse).');
  out.push('   worker RSS: V8 grows the young generation (semi-spaces up to 16 MiB each on 64-bit Node) under any');
  out.push('     sustained load and gives it back after a while idle; the growth target compares idle with idle, and');
  out.push('     the "right after" row shows the loaded figure. Heap in use is the leak signal.');
  if (floor && floor.pipelined.errors + floor.connectPerRequest.errors > 0) {
    out.push(
      `   floor errors: ${floor.pipelined.errors + floor.connectPerRequest.errors} (${floor.pipelined.firstError ?? floor.connectPerRequest.firstError})`,
    );
  }
  for (const s of skipped) out.push(`   skipped: ${s}`);
  out.push('');
  out.push('Targets:');
  for (const c of checks) out.push(`  ${verdict(c.ok)}  ${c.what.padEnd(48)} ${c.detail}`);
  const failed = checks.filter((c) => !c.ok).length;
  out.push('');
  out.push(failed === 0 ? 'All targets met.' : `${failed} of ${checks.length} targets FAILED (this is a report; the exit code stays 0).`);
  console.log(out.join('\n'));
}

/**
 * Runs this bench again from a bundle on plain node, so that the caller side is measured the way a
 * built frontend runs rather than under tsx (whose transformed code adds a helper call to every
 * closure). Returns the exit code, or undefined when the bench should go on in this process.
 */
async function rerunBundled(): Promise<number | undefined> {
  if (RUNNER_WANTED !== 'node' || process.env.BENCH_BUNDLED === '1') return undefined;
  let self: string;
  try {
    self = await bundle('request-plane.bench');
  } catch {
    return undefined;
  }
  const child = spawn(process.execPath, [self], { stdio: 'inherit', env: { ...process.env, BENCH_BUNDLED: '1', BENCH_HERE: here } });
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  return code ?? (signal ? 1 : 0);
}

async function main(): Promise<void> {
  const started = performance.now();
  const { runner, note } = await prepareRunner();
  const cpu = cpus();
  const env = [
    `node ${process.version} (${platform()} ${arch()}, kernel ${release()}), ${cpu.length} cores (${cpu[0]?.model.trim() ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM`,
    `worker: separate process, file discovery in a temp dir, DYN_LOG=error; ${note}`,
    `caller: this process (${process.env.BENCH_BUNDLED === '1' ? 'plain node on an esbuild bundle of the bench + src' : 'tsx'}); warm-up ${fmtInt(WARMUP)} requests / 50k items before each measurement`,
  ];
  console.log(`request-plane bench: ${env[0]}`);
  const skipped: string[] = [];
  const failures: string[] = [];

  let nats: NatsTestServer | undefined;
  if (PLANES.includes('nats')) {
    try {
      nats = await startNatsServer();
      env.push(`nats: local nats-server at ${nats.url}`);
    } catch (err) {
      skipped.push(`nats: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  const results: PlaneResults[] = [];
  let floor: FloorResults | undefined;
  try {
    if (FLOOR) {
      progress('loopback floor');
      try {
        floor = await runFloor(runner, nats);
      } catch (err) {
        skipped.push(`floor: ${(err as Error).message}`);
      }
    } else {
      skipped.push('floor (BENCH_FLOOR=0)');
    }
    for (const plane of PLANES) {
      if (plane !== 'tcp' && plane !== 'nats') {
        skipped.push(`unknown plane '${plane}'`);
        continue;
      }
      if (plane === 'nats' && !nats) continue;
      try {
        results.push(await runPlane(plane, runner, nats));
      } catch (err) {
        failures.push(`${plane} plane measured: ${(err as Error).message ?? String(err)}`);
      }
    }
  } finally {
    await nats?.stop();
  }
  env.push(`total bench time ${((performance.now() - started) / 1000).toFixed(0)} s`);
  report(env, floor, results, skipped, failures);
}

const bundledExit = await rerunBundled();
if (bundledExit !== undefined) process.exit(bundledExit);
await main();
// Open handles (discovery watchers, NATS) must not keep a finished report alive.
process.exit(0);
