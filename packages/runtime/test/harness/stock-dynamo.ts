import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { trackProcess, waitingFor } from './processes.js';

const interop = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'test', 'interop');

/**
 * The stock Dynamo 1.6 virtualenv (test/interop/setup-venv.sh, cached between runs), with `extra`
 * pip requirements added when given. Returns the venv's python, or why it is unavailable: `skip`
 * when the package registry cannot be reached (the tests then report skipped, never passed); any
 * other failure throws.
 */
export function stockPython(extra: string[] = []): { python: string } | { skip: string } {
  const env = extra.length > 0 ? { ...process.env, DYNAMO_INTEROP_EXTRA: extra.join(' ') } : process.env;
  const result = spawnSync('bash', [join(interop, 'setup-venv.sh'), '--print-python'], { encoding: 'utf8', timeout: 900_000, env });
  if (result.status === 3) return { skip: `stock Dynamo unavailable (PyPI unreachable): ${result.stderr.trim().split('\n').at(-1)}` };
  if (result.status !== 0) throw new Error(`test/interop/setup-venv.sh failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return { python: result.stdout.trim().split('\n').at(-1)! };
}

/**
 * What every stock process the tests start gets in its environment. Stock 1.6.1 sizes its Tokio
 * blocking pool to the core count, and on the NATS request plane each component it meets first
 * blocks a runtime thread (`block_in_place`) until that component's NATS service is registered.
 * On a 2-core machine two components met at once use up the pool: the stock frontend stops
 * materializing models and stops answering HTTP (seen with eight stock workers and no TypeScript
 * process at all: 4 of 8 starts hung on NATS, none on TCP). The release's own builder default
 * (512) avoids it; none of the tests is about that pool.
 */
export const stockRuntimeEnv: Readonly<Record<string, string>> = { DYN_RUNTIME_MAX_BLOCKING_THREADS: '512' };

/** A stock Python process (worker.py or client.py) with its stdout lines. */
export interface StockProcess {
  child: ChildProcess;
  lines: string[];
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
  stderr(): string;
  stop(): Promise<void>;
}

/** Runs `test/interop/python/<script>` with the venv's python. */
export function runStock(python: string, script: 'worker.py' | 'client.py', args: string[], env: Record<string, string>): StockProcess {
  const child = spawn(python, [join(interop, 'python', script), ...args], {
    env: { ...process.env, DYN_LOG: 'warn', ...stockRuntimeEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackProcess(`stock python ${script} ${args.join(' ')}`, child);
  const lines: string[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (l: string) => void }> = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const w of [...waiters]) 
      if (w.pattern.test(line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    lines,
    exited,
    stderr: () => stderr,
    waitForLine: (pattern, ms = 60_000) => {
      const done = waitingFor(`a stdout line of ${script} matching ${pattern}`);
      return new Promise<string>((resolve, reject) => {
        const seen = lines.find((l) => pattern.test(l));
        if (seen) return resolve(seen);
        const timer = setTimeout(() => reject(new Error(`${script} printed no line matching ${pattern} in ${ms} ms; stderr:\n${stderr}`)), ms);
        waiters.push({ pattern, resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
        void exited.then((code) => setTimeout(() => reject(new Error(`${script} exited (${code}) before ${pattern}; stderr:\n${stderr}`)), 50));
      }).finally(done);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
