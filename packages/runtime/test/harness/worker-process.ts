import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { trackProcess, waitingFor } from './processes.js';

const here = dirname(fileURLToPath(import.meta.url));

/** A worker child process (test/fixtures/worker.ts) and what it printed. */
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
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, '..', 'fixtures', 'worker.ts'), ...args], {
    env: { ...process.env, DYN_LOG: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  trackProcess(`worker.ts ${args.join(' ')}`.trim(), child);
  const lines: string[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const w of [...waiters]) {
      if (w.pattern.test(line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitForLine = (pattern: RegExp, ms = timeoutMs) => {
    const done = waitingFor(`a stdout line of worker.ts matching ${pattern}`);
    return new Promise<string>((resolve, reject) => {
      const seen = lines.find((l) => pattern.test(l));
      if (seen) return resolve(seen);
      const timer = setTimeout(() => reject(new Error(`worker printed no line matching ${pattern} within ${ms} ms; stderr:\n${stderr}`)), ms);
      waiters.push({ pattern, resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void exited.then((code) => reject(new Error(`worker exited (${code}) before printing ${pattern}; stderr:\n${stderr}`)));
    }).finally(done);
  };
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
