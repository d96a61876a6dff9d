import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as dial } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort, waitFor } from './free-port.js';
import { loopback, type Placement } from './placement.js';
import { trackProcess } from './processes.js';

/** How to start the test server; every field is optional (no auth, default limits). */
export interface NatsServerOptions {
  /** Require this user/password (`--user/--pass`). */
  user?: string;
  pass?: string;
  /** Require this token (`--auth`). */
  token?: string;
  /** Serve TLS with this PEM certificate and key (`--tls --tlscert --tlskey`). */
  tls?: { certFile: string; keyFile: string };
  /** Extra configuration file text (nats-server's config syntax), passed with `-c`. */
  config?: string;
  /** Where it runs (default: this machine's loopback). */
  on?: Placement;
}

/** A `nats-server` child process on a port of its own (loopback, or its host's address). */
export interface NatsTestServer {
  readonly port: number;
  /** `nats://ADDRESS:PORT` (`tls://` when serving TLS), without credentials. */
  readonly url: string;
  /** Kills the server and waits until it is gone. */
  stop(): Promise<void>;
  /** Stops it if running and starts a fresh one on the same port; waits until it accepts clients. */
  restart(): Promise<void>;
  /** The server's recent stderr/stdout, for failure messages. */
  output(): string;
}

const running = new Set<ChildProcess>();
const scratchDirs = new Set<string>();
let exitHookInstalled = false;

/** Best-effort cleanup when the test process exits normally (the watchdog below covers kills). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of running) child.stdin?.destroy();
    for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
  });
}

/**
 * Runs nats-server under a tiny `sh` watchdog that holds our end of a stdin pipe: when this process
 * goes away by any means (SIGKILL of a vitest worker included), the pipe closes and the watchdog
 * kills nats-server, so no server outlives the tests. Closing stdin is also how `stop()` works.
 */
const watchdog = [
  'exec 3<&0',
  'bin="$1"; shift',
  '"$bin" "$@" </dev/null 3<&- &',
  'server=$!',
  '( read -r _ <&3; kill -9 "$server" 2>/dev/null ) &',
  'watch=$!',
  'wait "$server"; code=$?',
  'kill "$watch" 2>/dev/null',
  'exit "$code"',
].join('\n');

/**
 * Finds the `nats-server` binary: `$NATS_SERVER_BIN`, Debian's `/usr/sbin/nats-server`, or `PATH`.
 * Throws (rather than letting the suite skip) when it is missing.
 */
export function natsServerBinary(): string {
  const candidates = [
    process.env.NATS_SERVER_BIN,
    '/usr/sbin/nats-server',
    '/usr/bin/nats-server',
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, 'nats-server')),
  ];
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new Error(
    'nats-server was not found (looked at $NATS_SERVER_BIN, /usr/sbin/nats-server and PATH); ' +
      'install it with `apt-get install nats-server` to run the NATS request-plane tests',
  );
}

/** Resolves once something on `port` greets a TCP client with NATS's `INFO` line. */
function greets(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = dial({ host, port });
    let seen = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (chunk) => {
      seen += chunk.toString('latin1');
      if (seen.startsWith('INFO ')) done(true);
    });
  });
}

/** Starts `nats-server -a <address> -p <free port>` and waits until it accepts clients. */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsTestServer> {
  const binary = natsServerBinary();
  installExitHook();
  const on = options.on ?? loopback;
  let port = await freePort();
  const args = ['-a', on.address];
  if (options.user !== undefined) args.push('--user', options.user);
  if (options.pass !== undefined) args.push('--pass', options.pass);
  if (options.token !== undefined) args.push('--auth', options.token);
  if (options.tls !== undefined) args.push('--tls', '--tlscert', options.tls.certFile, '--tlskey', options.tls.keyFile);

  let child: ChildProcess | undefined;
  let log: string[] = [];
  const output = () => log.join('');

  const start = async () => {
    let configDir: string | undefined;
    const startArgs = [...args, '-p', String(port)];
    if (options.config !== undefined) {
      // Written afresh for each start and removed once the server has read it.
      configDir = mkdtempSync(join(tmpdir(), 'nats-test-'));
      scratchDirs.add(configDir);
      const file = join(configDir, 'server.conf');
      writeFileSync(file, options.config);
      startArgs.push('-c', file);
    }
    const placed = on.command('/bin/sh', ['-c', watchdog, 'nats-watchdog', binary, ...startArgs]);
    const proc = spawn(placed.command, placed.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    child = proc;
    running.add(proc);
    trackProcess(`nats-server -p ${port}`, proc);
    const keep = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.length > 200) log = log.slice(-100);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const exited = new Promise<never>((_, reject) => {
      proc.once('exit', (code, signal) => {
        running.delete(proc);
        reject(new Error(`nats-server exited with ${signal ?? `code ${code}`}`));
      });
      proc.once('error', (err) => reject(new Error(`nats-server failed to start: ${err.message}`)));
    });
    exited.catch(() => undefined);
    try {
      await Promise.race([waitFor(`nats-server on ${on.address}:${port}`, () => greets(on.address, port), 15_000), exited]);
    } catch (err) {
      proc.stdin?.destroy();
      proc.kill('SIGKILL');
      throw new Error(`${(err as Error).message}\n--- nats-server output ---\n${output()}`);
    } finally {
      if (configDir) {
        rmSync(configDir, { recursive: true, force: true });
        scratchDirs.delete(configDir);
      }
    }
  };

  const stop = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.stdin?.end();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await gone;
    clearTimeout(timer);
  };

  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      // Another process can take the port between freePort() and the server's bind: pick another.
      if (attempt >= 3 || !/address already in use/.test((err as Error).message)) throw err;
      port = await freePort();
    }
  }
  return {
    port,
    url: `${options.tls ? 'tls' : 'nats'}://${on.address}:${port}`,
    output,
    stop,
    async restart() {
      await stop();
      await start();
    },
  };
}
