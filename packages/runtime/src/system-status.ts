import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Log } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';

const ENGINE_PREFIX = '/engine/';

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
 * A handler of an `/engine/<name>` route: the request's parsed JSON body (`{}` when the body is
 * empty) and HTTP method in, the JSON reply out. A throw answers 500.
 */
export type EngineRouteHandler = (body: unknown, method: string) => Promise<unknown>;

/** A request to a route of {@link SystemStatusServer.setRoute}: its method, full path and parsed JSON body. */
export interface HttpRouteRequest {
  method: string;
  path: string;
  body: unknown;
}

/** Answers a {@link HttpRouteRequest}: a status and a JSON body (a throw answers 500). */
export type HttpRouteHandler = (request: HttpRouteRequest) => Promise<{ status: number; body: unknown }>;

/**
 * The system status server every worker runs on `DYN_SYSTEM_PORT`: `/health` and `/live` report
 * per-endpoint readiness (200 when all are ready, 503 otherwise), `/metrics` the Prometheus text,
 * and `/engine/<name>` the engine routes a worker registers (engine controls), answering as stock
 * Dynamo 1.6.1 does: 404 for a name nobody registered, 400 for a body that is not JSON, 500 when
 * the handler throws, else 200 with its reply (all as `text/plain` JSON text, as stock sends them).
 */
export class SystemStatusServer {
  readonly #options: SystemStatusOptions;
  readonly #metrics: RuntimeMetrics;
  readonly #log: Log;
  readonly #endpoints = new Map<string, 'ready' | 'notready'>();
  readonly #engineRoutes = new Map<string, EngineRouteHandler>();
  readonly #routes = new Map<string, HttpRouteHandler>();
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

  /** Serves `handler` at `/engine/<name>` (any method); `undefined` removes the route. */
  setEngineRoute(name: string, handler: EngineRouteHandler | undefined): void {
    if (handler) this.#engineRoutes.set(name, handler);
    else this.#engineRoutes.delete(name);
  }

  /**
   * Serves `handler` at `prefix` and every path below it (any method, JSON in and out, e.g. the
   * worker's `/v1/loras`); `undefined` removes it. A body that is not JSON answers 400.
   */
  setRoute(prefix: string, handler: HttpRouteHandler | undefined): void {
    if (handler) this.#routes.set(prefix, handler);
    else this.#routes.delete(prefix);
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
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      if (path.startsWith(ENGINE_PREFIX)) {
        this.#engineRoute(path, req, res);
        return;
      }
      const route = [...this.#routes].find(([prefix]) => path === prefix || path.startsWith(`${prefix}/`));
      if (route) {
        this.#route(route[1], path, req, res);
        return;
      }
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

  #engineRoute(path: string, req: IncomingMessage, res: ServerResponse): void {
    const reply = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(JSON.stringify(body));
    readJson(req, (body) => {
      const handler = this.#engineRoutes.get(path.slice(ENGINE_PREFIX.length));
      if (!handler) return reply(404, { error: 'Route not found', message: `Route ${path} not found` });
      if (body instanceof SyntaxError) return reply(400, { error: 'Invalid JSON', message: body.message });
      handler(body, req.method ?? 'GET').then(
        (result) => reply(200, result),
        (err: unknown) => {
          this.#log.warn({ err, route: path }, 'engine route failed');
          reply(500, { error: 'Handler error', message: err instanceof Error ? err.message : String(err) });
        },
      );
    });
  }

  #route(handler: HttpRouteHandler, path: string, req: IncomingMessage, res: ServerResponse): void {
    const reply = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    readJson(req, (body) => {
      if (body instanceof SyntaxError) return reply(400, { error: 'Invalid JSON', message: body.message });
      handler({ method: req.method ?? 'GET', path, body }).then(
        (result) => reply(result.status, result.body),
        (err: unknown) => {
          this.#log.warn({ err, route: path }, 'route failed');
          reply(500, { error: 'Handler error', message: err instanceof Error ? err.message : String(err) });
        },
      );
    });
  }

  /** Stops the server. */
  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Reads a request's body as JSON: `{}` when empty, a `SyntaxError` when it is not JSON. */
function readJson(req: IncomingMessage, then: (body: unknown) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = {};
    try {
      if (text.trim() !== '') body = JSON.parse(text);
    } catch (err) {
      body = err instanceof SyntaxError ? err : new SyntaxError(String(err));
    }
    then(body);
  });
}
