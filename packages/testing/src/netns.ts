// The machine-level pieces of the cluster harness: running iproute2 and nftables, whether this
// machine can host a cluster at all, and sweeping what a killed test run left behind.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';

import { alive } from './processes.js';

/** Runs `command args` (stdin `input`), resolving with its stdout; rejects with its stderr. */
export function run(command: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.once('error', (e) => reject(new Error(`${command} ${args.join(' ')}: ${e.message}`)));
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited with ${code}: ${err.trim()}`))));
    // A command that reads no input may exit before it is written: that is not an error.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

/** `ip args`. */
export const ip = (...args: string[]) => run('ip', args);

/** Runs an nftables script inside namespace `ns`. */
export const nft = (ns: string, script: string) => run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], script);

/** Every namespace this harness names: `dyn-<pid>-<cluster>-<host>`. */
const OURS = /^dyn-(\d+)-(\d+)-/;

/**
 * Why this machine cannot host a cluster, or `undefined` when it can: the harness needs Linux,
 * root (network namespaces, veth pairs, a bridge), iproute2's `ip` and nftables' `nft`.
 */
export async function clusterUnsupported(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `network namespaces are Linux only (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)';
  for (const [tool, pkg] of [
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
  ] as const) {
    try {
      await run(tool, ['-V']);
    } catch {
      return `${tool} not found (apt-get install ${pkg})`;
    }
  }
  const probe = `dyn-${process.pid}-0-probe`;
  try {
    await ip('netns', 'add', probe);
    await ip('netns', 'del', probe);
  } catch (err) {
    return `cannot create a network namespace here: ${(err as Error).message}`;
  }
  return undefined;
}

/** Removes the namespaces and bridges of clusters whose test process is gone (a vitest worker killed mid-run). */
export async function sweepStaleClusters(): Promise<void> {
  let names: string[];
  try {
    names = readdirSync('/run/netns');
  } catch {
    return;
  }
  const stale = new Set<string>();
  for (const name of names) {
    const match = OURS.exec(name);
    if (!match || alive(Number(match[1]))) continue;
    const pids = (await run('ip', ['netns', 'pids', name]).catch(() => '')).split(/\s+/).filter(Boolean);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await ip('netns', 'del', name).catch(() => undefined);
    stale.add(match[2]!);
  }
  for (const id of stale) await ip('link', 'del', `dyb${id}`).catch(() => undefined);
}
