import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

import { followLines } from './line-follower.js';
import { trackProcess } from './processes.js';
import { repoRoot } from './repo.js';

/** A worker child process (packages/runtime/test/fixtures/worker.ts) and what it printed. */
export interface WorkerProcess {
  child: ChildProcess;
  instanceId: bigint;
  lines: string[];
  /** Resolves with the first stdout line matching `pattern`. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM and wait for exit (graceful). */
  stop(): Promise<number | null>;
  /** SIGKILL (a crash). */
  kill(): Promise<void>;
}

/** Starts a worker with `env` (DYN_* etc.) and waits for its READY line. */
export async function startWorker(env: Record<string, string>, args: string[] = [], timeoutMs = 20_000): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'packages', 'runtime', 'test', 'fixtures', 'worker.ts'), ...args], {
    env: { ...process.env, DYN_LOG: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  trackProcess(`worker.ts ${args.join(' ')}`.trim(), child);
  const follower = followLines(child, 'worker.ts');
  const { lines, exited } = follower;
  const waitForLine = (pattern: RegExp, ms = timeoutMs) => follower.waitForLine(pattern, ms);
  const ready = await waitForLine(/^READY /);
  return {
    child,
    instanceId: BigInt(`0x${ready.slice('READY '.length)}`),
    lines,
    waitForLine,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
