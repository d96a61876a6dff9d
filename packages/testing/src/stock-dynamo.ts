import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { followLines } from './line-follower.js';
import { trackProcess } from './processes.js';
import { repoRoot, testingRoot } from './repo.js';

const setupVenv = join(testingRoot, 'stock-dynamo', 'setup-venv.sh');

/**
 * The stock Dynamo 1.6 virtualenv (stock-dynamo/setup-venv.sh, cached between runs, with the
 * tools the tests run in it), with `extra` pip requirements added when given. Returns the venv's
 * python, or `skip` when the package registry cannot be reached (the tests then report skipped,
 * never passed); any other failure throws. scripts/test.sh checks the venv once for the whole run
 * and passes its python in `DYNAMO_TS_STOCK_PYTHON`, taken here without checking again.
 */
export function stockPython(extra: string[] = []): { python: string } | { skip: string } {
  const checked = process.env.DYNAMO_TS_STOCK_PYTHON;
  if (checked && extra.length === 0) return { python: checked };
  const env = extra.length > 0 ? { ...process.env, DYNAMO_INTEROP_EXTRA: extra.join(' ') } : process.env;
  const result = spawnSync('bash', [setupVenv, '--print-python'], { encoding: 'utf8', timeout: 900_000, env });
  if (result.status === 3) return { skip: `stock Dynamo unavailable (PyPI unreachable): ${result.stderr.trim().split('\n').at(-1)}` };
  if (result.status !== 0) throw new Error(`packages/testing/stock-dynamo/setup-venv.sh failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
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
  const child = spawn(python, [join(repoRoot, 'test', 'interop', 'python', script), ...args], {
    env: { ...process.env, DYN_LOG: 'warn', ...stockRuntimeEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackProcess(`stock python ${script} ${args.join(' ')}`, child);
  const { lines, exited, stderr, waitForLine } = followLines(child, script);
  return {
    child,
    lines,
    exited,
    stderr,
    waitForLine: (pattern, ms = 60_000) => waitForLine(pattern, ms),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
