// What a failing process-level test needs to say: every child process the test file started
// (with the tail of what it printed and whether it still runs) and every wait still pending.
// The harness's spawners and waits register here; report-on-failure.ts prints the report when a
// test or a hook fails, so a timeout names the step it was waiting for and shows each process.
import type { ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';

/** How much of each stream a report shows. */
const TAIL_LINES = 40;
/** How much of each stream is kept: enough for TAIL_LINES of long log lines. */
const KEEP_CHARS = 32_000;

/** The last part of a stream's text. */
class Tail {
  #text = '';
  readonly #decoder = new StringDecoder('utf8');

  push(chunk: Buffer | string): void {
    this.#text += typeof chunk === 'string' ? chunk : this.#decoder.write(chunk);
    if (this.#text.length > 2 * KEEP_CHARS) this.#text = this.#text.slice(-KEEP_CHARS);
  }

  lines(): string[] {
    const lines = this.#text.split('\n');
    if (lines.at(-1) === '') lines.pop();
    return lines.slice(-TAIL_LINES);
  }
}

interface Tracked {
  name: string;
  child: ChildProcess;
  stdout: Tail;
  stderr: Tail;
  /** How it ended, once it did. */
  ended?: string;
}

const tracked: Tracked[] = [];
const pending = new Map<number, { what: string; since: number }>();
let nextWait = 0;

/** Registers a child process so a failure report shows its state and output tail. */
export function trackProcess(name: string, child: ChildProcess): void {
  const entry: Tracked = { name, child, stdout: new Tail(), stderr: new Tail() };
  // Extra 'data' listeners leave the stream to whoever else reads it (readline, a collector).
  child.stdout?.on('data', (chunk: Buffer | string) => entry.stdout.push(chunk));
  child.stderr?.on('data', (chunk: Buffer | string) => entry.stderr.push(chunk));
  child.once('exit', (code, signal) => (entry.ended = signal ? `killed by ${signal}` : `exited with code ${code}`));
  child.once('error', (err) => (entry.ended = `failed to start: ${err.message}`));
  tracked.push(entry);
}

/** A short name for a command line: the program and its first arguments. */
export function commandName(command: string, args: readonly string[]): string {
  const shown = [command, ...args].map((a) => (a.includes('/') ? a.slice(a.lastIndexOf('/') + 1) : a));
  const name = shown.slice(0, 6).join(' ');
  return shown.length > 6 ? `${name} …` : name;
}

/**
 * Marks `what` as awaited until the returned function is called, so a report made meanwhile
 * (a hook or test that timed out around it) names it.
 */
export function waitingFor(what: string): () => void {
  const id = nextWait++;
  pending.set(id, { what, since: Date.now() });
  return () => pending.delete(id);
}

/** Whether a report would have anything to say. */
export function hasProcessReport(): boolean {
  return tracked.length > 0 || pending.size > 0;
}

/** The waits still pending and every tracked process with the tail of its stdout and stderr. */
export function processReport(): string {
  const now = Date.now();
  const out: string[] = [];
  if (pending.size > 0) {
    out.push('still waiting for:');
    for (const { what, since } of pending.values()) out.push(`  - ${what} (for ${((now - since) / 1000).toFixed(1)} s)`);
  }
  for (const p of tracked) {
    out.push(`── ${p.name} (pid ${p.child.pid ?? '-'}): ${p.ended ?? 'running'}`);
    for (const [label, tail] of [
      ['stdout', p.stdout],
      ['stderr', p.stderr],
    ] as const) {
      const lines = tail.lines();
      if (lines.length > 0) out.push(`   ${label} (last ${lines.length} lines):`, ...lines.map((l) => `   │ ${l}`));
    }
  }
  return out.join('\n');
}

/** Whether process `pid` still exists (one of another user's counts: it cannot be signalled, but it is there). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
