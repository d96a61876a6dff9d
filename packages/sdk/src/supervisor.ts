import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Log } from '@dynamo/runtime';

import type { ReadyMessage } from './service-process.js';

/** One service's processes, as the supervisor starts them. */
export interface SupervisedService {
  name: string;
  workers: number;
  /** Extra environment of every worker (the service's `envs`). */
  env: Record<string, string>;
  /** `CUDA_VISIBLE_DEVICES` per worker, when the service uses GPUs. */
  devices?: string[];
}

/** How {@link Supervisor} runs the graph. */
export interface SupervisorOptions {
  /** The program and arguments that serve one service; `--service-name <name>` is appended. */
  command: string;
  args: readonly string[];
  services: readonly SupervisedService[];
  env: NodeJS.ProcessEnv;
  log: Log;
  /** Each line a worker prints, labelled; absent: workers write to this process's stdout/stderr. */
  output?: (label: string, line: string) => void;
  /** Called whenever a worker's state changes (for the status table). */
  onChange?: () => void;
  /** A worker exited with status 2 (bad configuration) before it was ever ready: restarting cannot help. */
  onFatal?: (message: string) => void;
  /** First restart delay, doubled per quick failure (default 1 s). */
  backoffMs?: number;
  /** Longest restart delay (default 30 s). */
  maxBackoffMs?: number;
  /** A worker that ran this long before dying restarts at the first delay again (default 30 s). */
  stableAfterMs?: number;
}

export type WorkerState = 'starting' | 'ready' | 'restarting' | 'stopped';

/** One worker process's state, for status output. */
export interface WorkerStatus {
  service: string;
  /** 1-based. */
  index: number;
  pid: number | undefined;
  state: WorkerState;
  restarts: number;
  httpUrl: string | undefined;
}

interface Slot extends WorkerStatus {
  child: ChildProcess | undefined;
  failures: number;
  startedAt: number;
  everReady: boolean;
  timer: NodeJS.Timeout | undefined;
  exited: Promise<void>;
}

/**
 * Runs one process per service worker, restarts one that dies with a growing delay, and stops
 * them all with SIGTERM (SIGKILL after a timeout). Workers run in their own process group, so a
 * terminal's Ctrl-C reaches only the supervisor, which then stops them in order.
 */
export class Supervisor {
  private readonly slots: Slot[] = [];
  private stopping = false;
  private resolveReady!: () => void;
  /** Resolves once every worker has reported ready at least once. */
  readonly ready = new Promise<void>((resolve) => (this.resolveReady = resolve));

  constructor(private readonly options: SupervisorOptions) {
    for (const service of options.services) {
      for (let i = 1; i <= service.workers; i++) {
        this.slots.push({
          service: service.name,
          index: i,
          pid: undefined,
          state: 'starting',
          restarts: 0,
          httpUrl: undefined,
          child: undefined,
          failures: 0,
          startedAt: 0,
          everReady: false,
          timer: undefined,
          exited: Promise.resolve(),
        });
      }
    }
  }

  /** Starts every worker. */
  start(): void {
    for (const slot of this.slots) this.spawn(slot);
  }

  /** Every worker's state. */
  status(): WorkerStatus[] {
    return this.slots.map(({ service, index, pid, state, restarts, httpUrl }) => ({ service, index, pid, state, restarts, httpUrl }));
  }

  /** Stops every worker: SIGTERM, then SIGKILL for any still running after `timeoutMs`. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping = true;
    for (const slot of this.slots) {
      clearTimeout(slot.timer);
      this.signal(slot, 'SIGTERM');
    }
    const all = Promise.all(this.slots.map((s) => s.exited));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
    if ((await Promise.race([all, late])) === 'late') {
      const left = this.slots.filter((s) => s.child && s.child.exitCode === null && s.child.signalCode === null);
      this.options.log.warn({ workers: left.map(label) }, `still running after ${timeoutMs / 1000} s: killing`);
      for (const slot of left) this.signal(slot, 'SIGKILL');
      await all;
    }
    clearTimeout(timer);
  }

  private signal(slot: Slot, signal: NodeJS.Signals): void {
    const pid = slot.child?.pid;
    if (pid === undefined || slot.child!.exitCode !== null || slot.child!.signalCode !== null) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  }

  private spawn(slot: Slot): void {
    const service = this.options.services.find((s) => s.name === slot.service)!;
    const env: NodeJS.ProcessEnv = { ...this.options.env, ...service.env };
    const devices = service.devices?.[slot.index - 1];
    if (devices !== undefined) env.CUDA_VISIBLE_DEVICES = devices;
    const piped = this.options.output !== undefined;
    const child = spawn(this.options.command, [...this.options.args, '--service-name', slot.service], {
      env,
      detached: true,
      stdio: ['ignore', piped ? 'pipe' : 'inherit', piped ? 'pipe' : 'inherit', 'ipc'],
    });
    slot.child = child;
    slot.pid = child.pid;
    slot.state = 'starting';
    slot.startedAt = Date.now();
    slot.httpUrl = undefined;
    if (piped) {
      for (const stream of [child.stdout!, child.stderr!]) createInterface({ input: stream }).on('line', (line) => this.options.output!(label(slot), line));
    }
    child.on('message', (message: Partial<ReadyMessage>) => {
      if (message?.type !== 'dynamo-serve:ready') return;
      slot.state = 'ready';
      slot.everReady = true;
      slot.httpUrl = message.httpUrl;
      this.options.log.info({ worker: label(slot), workerPid: child.pid, url: message.httpUrl }, `${label(slot)} ready`);
      this.changed();
      if (this.slots.every((s) => s.everReady)) this.resolveReady();
    });
    slot.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        resolve();
        this.exited(slot, code, signal);
      });
      child.once('error', (err) => {
        this.options.log.error({ worker: label(slot), err: err.message }, `${label(slot)} could not start`);
      });
    });
    this.changed();
  }

  private exited(slot: Slot, code: number | null, signal: NodeJS.Signals | null): void {
    slot.child = undefined;
    slot.pid = undefined;
    const how = signal ? `signal ${signal}` : `status ${code}`;
    if (this.stopping) {
      slot.state = 'stopped';
      this.options.log.info({ worker: label(slot), code, signal }, `${label(slot)} stopped (${how})`);
      this.changed();
      return;
    }
    if (code === 2 && !slot.everReady) {
      slot.state = 'stopped';
      this.changed();
      this.options.onFatal?.(`${label(slot)} exited with status 2 (bad configuration) before it was ready`);
      return;
    }
    const initial = this.options.backoffMs ?? 1000;
    const stable = Date.now() - slot.startedAt >= (this.options.stableAfterMs ?? 30_000);
    slot.failures = stable ? 1 : slot.failures + 1;
    const delay = Math.min(this.options.maxBackoffMs ?? 30_000, initial * 2 ** (slot.failures - 1));
    slot.state = 'restarting';
    this.options.log.warn({ worker: label(slot), code, signal, delayMs: delay }, `${label(slot)} exited (${how}); restarting in ${delay / 1000} s`);
    this.changed();
    slot.timer = setTimeout(() => {
      if (this.stopping) return;
      slot.restarts++;
      this.spawn(slot);
    }, delay);
  }

  private changed(): void {
    this.options.onChange?.();
  }
}

function label(slot: { service: string; index: number }): string {
  return `${slot.service}#${slot.index}`;
}
