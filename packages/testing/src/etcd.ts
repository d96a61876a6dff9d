import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from './free-port.js';
import { loopback, type Placement } from './placement.js';
import { trackProcess } from './processes.js';

/** Every etcd this process started, killed if the test process exits without stopping them. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of running) child.kill('SIGKILL');
  });
}

function findEtcd(): string {
  const candidates = [
    '/usr/bin/etcd',
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, 'etcd')),
  ];
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // try the next one
    }
  }
  throw new Error("etcd binary not found (looked in /usr/bin and on PATH): these tests need a real etcd; install it with 'apt-get install etcd-server'");
}

/**
 * TLS for the client port: the server's certificate, and, with `clientCert`, clients must present
 * a certificate signed by `caFile` (this one is what the harness's health checks present).
 */
export interface EtcdTls {
  caFile: string;
  certFile: string;
  keyFile: string;
  clientCert?: { certFile: string; keyFile: string };
}

/**
 * A single-member etcd on free loopback ports with its own data directory, for tests that need
 * the real thing: leases expiring, watches surviving restarts, a server that lost its data.
 */
export class EtcdServer {
  /** The client URL, e.g. `http://127.0.0.1:40123` (`https://` with TLS). */
  readonly endpoint: string;
  readonly #binary: string;
  readonly #tls: EtcdTls | undefined;
  readonly #dataDir: string;
  readonly #peerUrl: string;
  readonly #on: Placement;
  #child: ChildProcess | undefined;
  #stderr = '';

  private constructor(binary: string, dataDir: string, clientPort: number, peerPort: number, tls: EtcdTls | undefined, on: Placement) {
    this.#binary = binary;
    this.#dataDir = dataDir;
    this.#tls = tls;
    this.#on = on;
    this.endpoint = `${tls ? 'https' : 'http'}://${on.address}:${clientPort}`;
    this.#peerUrl = `http://${on.address}:${peerPort}`;
  }

  /** Starts a fresh etcd (on this machine's loopback, or on the host `on`) and waits until it serves requests. */
  static async start(options: { tls?: EtcdTls; on?: Placement } = {}): Promise<EtcdServer> {
    const binary = findEtcd();
    installExitHook();
    for (let attempt = 1; ; attempt++) {
      const dataDir = await mkdtemp(join(tmpdir(), 'dynamo-test-etcd-'));
      const clientPort = await freePort();
      let peerPort = await freePort();
      while (peerPort === clientPort) peerPort = await freePort();
      const server = new EtcdServer(binary, dataDir, clientPort, peerPort, options.tls, options.on ?? loopback);
      try {
        await server.#launch();
        return server;
      } catch (err) {
        await rm(dataDir, { recursive: true, force: true });
        // Another process can take a port between freePort() and etcd's bind: pick others.
        if (attempt < 3 && /address already in use/.test((err as Error).message)) continue;
        throw err;
      }
    }
  }

  /** Whether the server process is running. */
  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Stops the server (SIGTERM; SIGKILL after 5 s); the data directory stays for {@link restart}. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    this.#child = undefined;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
    running.delete(child);
  }

  /** Starts a stopped server again: same ports, same data (leases and keys survive). */
  async start(): Promise<void> {
    if (this.#child === undefined) await this.#launch();
  }

  /** Stops and starts again with the same data and ports. */
  async restart(): Promise<void> {
    await this.stop();
    await this.#launch();
  }

  /** Stops, wipes the data directory and starts empty on the same ports: every lease and key is gone. */
  async restartFresh(): Promise<void> {
    await this.stop();
    await rm(this.#dataDir, { recursive: true, force: true });
    await this.#launch();
  }

  /** Stops the server and deletes its data. */
  async dispose(): Promise<void> {
    await this.stop();
    await rm(this.#dataDir, { recursive: true, force: true });
  }

  async #launch(): Promise<void> {
    this.#stderr = '';
    const placed = this.#on.command(this.#binary, [
      '--name',
      'test',
      '--data-dir',
      this.#dataDir,
      '--listen-client-urls',
      this.endpoint,
      '--advertise-client-urls',
      this.endpoint,
      '--listen-peer-urls',
      this.#peerUrl,
      '--initial-advertise-peer-urls',
      this.#peerUrl,
      '--initial-cluster',
      `test=${this.#peerUrl}`,
      '--logger',
      'zap',
      '--log-level',
      'error',
      ...(this.#tls
        ? [
            '--cert-file',
            this.#tls.certFile,
            '--key-file',
            this.#tls.keyFile,
            ...(this.#tls.clientCert ? ['--client-cert-auth', '--trusted-ca-file', this.#tls.caFile] : []),
          ]
        : []),
    ]);
    const child = spawn(placed.command, placed.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    running.add(child);
    trackProcess(`etcd ${this.endpoint}`, child);
    this.#child = child;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-4000);
    });
    let exit: string | undefined;
    child.once('exit', (code, signal) => {
      exit = `exited with ${signal ?? `code ${code}`}`;
      running.delete(child);
      if (this.#child === child) this.#child = undefined;
    });
    child.once('error', (err) => {
      exit = `failed to start: ${err.message}`;
      running.delete(child);
      if (this.#child === child) this.#child = undefined;
    });
    // Poll /health until etcd answers; give up at once if the process died (a port taken, say).
    const deadline = Date.now() + 20_000;
    let lastError = 'no answer';
    for (;;) {
      if (exit !== undefined || Date.now() > deadline) {
        await this.stop();
        throw new Error(`could not start etcd (${this.#binary}) on ${this.endpoint}: ${exit ?? `timed out: ${lastError}`}\n${this.#stderr.trim()}`);
      }
      try {
        const body = (await this.#health()) as { health?: string };
        if (body.health === 'true') return;
        lastError = `health ${JSON.stringify(body)}`;
      } catch (err) {
        lastError = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** GET /health, over TLS (trusting the test CA, with the client certificate) when configured. */
  async #health(): Promise<unknown> {
    const url = `${this.endpoint}/health`;
    const tls = this.#tls;
    if (!tls) {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (!res.ok) throw new Error(`health: HTTP ${res.status}`);
      return res.json();
    }
    const client = tls.clientCert ? { cert: readFileSync(tls.clientCert.certFile), key: readFileSync(tls.clientCert.keyFile) } : {};
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, { ca: readFileSync(tls.caFile), ...client, timeout: 1000 }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          try {
            resolve(JSON.parse(text));
          } catch (err) {
            reject(err as Error);
          }
        });
      });
      req.on('timeout', () => req.destroy(new Error('health: timed out')));
      req.on('error', reject);
      req.end();
    });
  }
}
