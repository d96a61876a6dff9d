import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { type Placement, loopback } from './placement.js';
import { commandName, trackProcess, waitingFor } from './processes.js';

/** A child process with its stdout lines and the tail of its stderr, for process-level tests. */
export interface Child {
  child: ChildProcess;
  /** A short name of the command, as failure reports show it. */
  name: string;
  lines: string[];
  /** The first stdout line matching `pattern` (already printed or still to come). */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stderr(): string;
  /** SIGKILL unless it already exited (to its whole process group when started with `group`). */
  kill(): void;
}

/** How {@link startChild} runs the command. */
export interface ChildOptions {
  cwd?: string;
  /**
   * Runs it in a process group of its own, and {@link Child.kill} kills the group: for a script
   * whose own children must not outlive it (an install it runs, say).
   */
  group?: boolean;
  /** Where it runs (default: this machine); a cluster host's name prefixes its name in reports. */
  on?: Placement;
}

const running = new Set<Child>();
process.once('exit', () => {
  for (const child of running) child.kill();
});

/** Starts `command args` with `env` merged over this process's environment. */
export function startChild(command: string, args: string[], env: Record<string, string | undefined> = {}, options: string | ChildOptions = {}): Child {
  const { cwd, group = false, on = loopback } = typeof options === 'string' ? { cwd: options } : options;
  const placed = on.command(command, args);
  const child = spawn(placed.command, placed.args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: group,
    ...(cwd && { cwd }),
  });
  const name = on === loopback ? commandName(command, args) : `[${on.name}] ${commandName(command, args)}`;
  trackProcess(name, child);
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-200_000)));
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const waitForLine = async (pattern: RegExp, timeoutMs = 30_000): Promise<string> => {
    const deadline = Date.now() + timeoutMs;
    const done = waitingFor(`a stdout line of ${name} matching ${pattern}`);
    try {
      for (;;) {
        const found = lines.find((l) => pattern.test(l));
        if (found !== undefined) return found;
        if (!alive() || Date.now() > deadline) {
          const why = alive() ? `not within ${timeoutMs} ms` : `it ended (exit ${child.exitCode ?? child.signalCode})`;
          throw new Error(`no stdout line of ${name} matching ${pattern}: ${why}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      done();
    }
  };
  const handle: Child = {
    child,
    name,
    lines,
    waitForLine,
    exited: new Promise<number | null>((resolve) =>
      child.once('exit', (code) => {
        // A group may outlive its leader: it stays listed, to be killed when this process exits.
        if (!group) running.delete(handle);
        resolve(code);
      }),
    ),
    stderr: () => stderr,
    kill: () => {
      if (group && child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // the group is gone already
        }
      } else if (alive()) child.kill('SIGKILL');
    },
  };
  running.add(handle);
  return handle;
}
