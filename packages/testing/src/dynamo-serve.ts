// Runs the built dynamo-serve CLI as a child process and follows its JSON log lines (its own
// and its workers', which share its stderr).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { trackProcess, waitingFor } from './processes.js';
import { repoRoot } from './repo.js';

/** The built `dynamo-serve` of @dynamo/sdk. */
export const serveCli = join(repoRoot, 'packages', 'sdk', 'dist', 'cli', 'serve.js');

export interface LogLine {
  msg?: string;
  pid?: number;
  [key: string]: unknown;
}

export interface ServeProcess {
  child: ChildProcess;
  logs: LogLine[];
  /** Lines that are not JSON (a service's console output, errors). */
  text: string[];
  stdout: string[];
  /** The first log line `match` accepts, already written or still to come. */
  waitForLog(match: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
  /** The workers of the `graph ready` line: `Service#i` → pid and url. */
  ready(timeoutMs?: number): Promise<Map<string, { pid: number; url?: string }>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `dynamo-serve args` in `cwd`, with `env` over this process's environment and JSON logs. */
export function startServe(args: string[], env: Record<string, string | undefined>, cwd?: string): ServeProcess {
  const child = spawn(process.execPath, [serveCli, ...args], { cwd, env: { ...process.env, DYN_LOG: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  trackProcess(`dynamo-serve ${args.join(' ')}`, child);
  const logs: LogLine[] = [];
  const text: string[] = [];
  const stdout: string[] = [];
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  createInterface({ input: child.stderr! }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line) as LogLine);
    } catch {
      text.push(line);
    }
    wake();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    stdout.push(line);
    wake();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      wake();
    }),
  );
  const waitForLog = async (match: (line: LogLine) => boolean, what: string, timeoutMs = 60_000): Promise<LogLine> => {
    const deadline = Date.now() + timeoutMs;
    const done = waitingFor(`dynamo-serve to log ${what}`);
    try {
      for (;;) {
        const found = logs.find(match);
        if (found) return found;
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`dynamo-serve exited (${child.exitCode ?? child.signalCode}) before ${what}:\n${text.join('\n')}`);
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}; last lines:\n${[...logs.slice(-10).map((l) => JSON.stringify(l)), ...text.slice(-10)].join('\n')}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    } finally {
      done();
    }
  };
  const ready = async (timeoutMs?: number) => {
    const line = await waitForLog((l) => l.msg === 'graph ready', 'graph ready', timeoutMs);
    return new Map((line.workers as Array<{ worker: string; pid: number; url?: string }>).map((w) => [w.worker, { pid: w.pid, url: w.url }]));
  };
  return { child, logs, text, stdout, waitForLog, ready, exited };
}

/** The built `dynamo-deploy` of @dynamo/sdk. */
export const deployCli = join(repoRoot, 'packages', 'sdk', 'dist', 'cli', 'deploy.js');

/** Runs `dynamo-deploy args` in `cwd` to the end. */
export async function runDeploy(
  args: string[],
  cwd: string,
  env: Record<string, string | undefined> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [deployCli, ...args], {
    cwd,
    env: { ...process.env, DYNAMO_IMAGE: undefined, DYN_DEPLOYMENT_CONFIG: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackProcess(`dynamo-deploy ${args.join(' ')}`, child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stdout, stderr };
}
