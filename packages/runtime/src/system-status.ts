import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Log } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';

/** Options of the per-process status server (`DYN_SYSTEM_*`). */
export interface SystemStatusOptions {
  host: string;
  port: number;
  healthPath: string;
  livePath: string;
  /** Status of an endpoint before it is served (`DYN_SYSTEM_STARTING_HEALTH_STATUS`). */
  startingStatus: 'ready' | 'notready';
}

/**
 * The system status server every worker runs on `DYN_SYSTEM_PORT`: `/health` and `/live` report
 * per-endpoint readiness (200 when all are ready, 503 otherwise), `/metrics` the Prometheus text.
 */
export class SystemStatusServer {
  readonly #options: SystemStatusOptions;
  readonly #metrics: RuntimeMetrics;
  readonly #log: Log;
  readonly #endpoints = new Map<string, 'ready' | 'notready'>();
  readonly #started = process.hrtime.bigint();
  #server: Server | undefined;

  constructor(options: SystemStatusOptions, metrics: RuntimeMetrics, log: Log) {
    this.#options = options;
    this.#metrics = metrics;
    this.#log = log;
  }

  /** Tracks an endpoint with the starting status. */
  track(endpoint: string): void {
    if (!this.#endpoints.has(endpoint)) this.#endpoints.set(endpoint, this.#options.startingStatus);
  }

  /** Marks an endpoint ready (serving) or not (stopped, failing its canary). */
  setStatus(endpoint: string, status: 'ready' | 'notready'): void {
    this.#endpoints.set(endpoint, status);
  }

  /** Stops tracking an endpoint (it was unserved). */
  untrack(endpoint: string): void {
    this.#endpoints.delete(endpoint);
  }

  /** The `/health` body. */
  health(): { status: 'ready' | 'notready'; uptime: { secs: number; nanos: number }; endpoints: Record<string, string> } {
    const elapsed = process.hrtime.bigint() - this.#started;
    const endpoints = Object.fromEntries(this.#endpoints);
    const ready = [...this.#endpoints.values()].every((s) => s === 'ready') && (this.#endpoints.size > 0 || this.#options.startingStatus === 'ready');
    return {
      status: ready ? 'ready' : 'notready',
      uptime: { secs: Number(elapsed / 1_000_000_000n), nanos: Number(elapsed % 1_000_000_000n) },
      endpoints,
    };
  }

  /** Starts listening; resolves with the bound port. */
  async listen(): Promise<number> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET') {
        res.writeHead(405, { allow: 'GET' }).end();
        return;
      }
      if (path === this.#options.healthPath || path === this.#options.livePath) {
        const body = this.health();
        res.writeHead(body.status === 'ready' ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        return;
      }
      if (path === '/metrics') {
        this.#metrics.expose().then(
          (text) => res.writeHead(200, { 'content-type': this.#metrics.registry.contentType }).end(text),
          (err: unknown) => {
            this.#log.error({ err }, 'collecting metrics failed');
            res.writeHead(500).end();
          },
        );
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no route ${path}` }));
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#options.port, this.#options.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    this.#log.info({ host: this.#options.host, port }, 'system status server listening');
    return port;
  }

  /** Stops the server. */
  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
