import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

import { waitingFor } from './processes.js';

/** A child's stdout, line by line, and waits on it. */
export interface LineFollower {
  /** Every stdout line so far. */
  readonly lines: string[];
  /** The child's exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>;
  /** What the child wrote to stderr (the last 8000 characters). */
  stderr(): string;
  /**
   * The first stdout line, seen or still to come, matching `pattern`; rejects after `ms`, or when
   * the child exits first, with its stderr.
   */
  waitForLine(pattern: RegExp, ms: number): Promise<string>;
}

/** Follows `child`'s stdout and stderr; `name` is how failures and waits name it. */
export function followLines(child: ChildProcess, name: string): LineFollower {
  const lines: string[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const w of waiters.filter((w) => w.pattern.test(line))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitForLine = (pattern: RegExp, ms: number) => {
    const done = waitingFor(`a stdout line of ${name} matching ${pattern}`);
    return new Promise<string>((resolve, reject) => {
      const seen = lines.find((l) => pattern.test(l));
      if (seen) return resolve(seen);
      const timer = setTimeout(() => reject(new Error(`${name} printed no line matching ${pattern} in ${ms} ms; stderr:\n${stderr}`)), ms);
      waiters.push({
        pattern,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      });
      // A moment after the exit, so a last line still in the pipe is read first.
      void exited.then((code) => setTimeout(() => reject(new Error(`${name} exited (${code}) before printing ${pattern}; stderr:\n${stderr}`)), 50));
    }).finally(done);
  };
  return { lines, exited, stderr: () => stderr, waitForLine };
}
