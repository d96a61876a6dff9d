import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** A child process with its stdout lines and the tail of its stderr, for process-level tests. */
export interface Child {
  child: ChildProcess;
  lines: string[];
  /** The first stdout line matching `pattern` (already printed or still to come). */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stderr(): string;
  /** SIGKILL unless it already exited. */
  kill(): void;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Starts `command args` with `env` merged over this process's environment. */
export function startChild(command: string, args: string[], env: Record<string, string | undefined> = {}, cwd?: string): Child {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd && { cwd }) });
  running.add(child);
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-200_000)));
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  const waitForLine = async (pattern: RegExp, timeoutMs = 30_000): Promise<string> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = lines.find((l) => pattern.test(l));
      if (found !== undefined) return found;
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        throw new Error(`no stdout line matching ${pattern} (exit ${child.exitCode ?? child.signalCode}); stdout:\n${lines.join('\n')}\nstderr:\n${stderr.slice(-5000)}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return {
    child,
    lines,
    waitForLine,
    exited,
    stderr: () => stderr,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
