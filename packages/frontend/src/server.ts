import { createServer as httpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as httpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { DynamoException } from '@dynamo/runtime';
import { stringifyJson } from '@dynamo/runtime/internal';
import Fastify, { type FastifyInstance } from 'fastify';

import { anthropicErrorBody } from './anthropic/output.js';
import { ANTHROPIC_PATH, countTokensHandler, messagesHandler } from './anthropic/route.js';
import { registerBusyThresholdRoutes } from './busy-threshold-route.js';
import { guardConnections } from './http/connection-guard.js';
import { embeddingsHandler } from './openai/embeddings.js';
import { errorBody, HttpError, RETRY_AFTER_SECS, reasonPhrase, retriable, toHttpError } from './http/errors.js';
import { type GenerationDeps, generationHandler } from './openai/generation.js';
import { parseJsonBody } from './http/json-body.js';
import { openApiDocument } from './openapi.js';
import { responsesHandler } from './responses/route.js';

/** How the HTTP server is set up: the `http` settings, and what its routes need. */
export interface HttpServerOptions extends GenerationDeps {
  tls?: { cert: Buffer; key: Buffer };
  /** True once shutdown began: `/live` and `/health` answer 503. */
  shuttingDown(): boolean;
}

const GENERATION_ROUTES = { '/v1/chat/completions': 'chat', '/v1/completions': 'completions' } as const;
const POST_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'];

/**
 * Reads and drops the rest of a request body that is refused unread (a 413), for up to `ms`.
 * Answering first and closing would reset a client still sending it, which then reports a
 * broken pipe instead of the error; read to its end, the client gets the answer.
 */
function discardBody(req: IncomingMessage, ms: number): Promise<void> {
  if (req.complete || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      req.off('end', done).off('close', done).off('error', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    req.on('end', done).on('close', done).on('error', done).resume();
  });
}

/**
 * The OpenAI HTTP surface on fastify: generation routes, models, health, liveness and metrics,
 * with Dynamo's flat error bodies for every failure, including the ones raised before a route
 * runs (bad JSON, invalid UTF-8, too large, wrong content type, a client too slow to send).
 */
export function createHttpServer(options: HttpServerOptions): FastifyInstance<Server> {
  const { registry, metrics, log } = options;
  const { http } = options;
  const timeout = http.requestTimeoutMs;
  const app = Fastify({
    bodyLimit: http.bodyLimitBytes,
    logger: false,
    return503OnClosing: true,
    serverFactory: (handler) => {
      // Checking every second makes a slow client's timeout land close to its deadline.
      const headersTimeout = Math.min(http.headersTimeoutMs, timeout);
      const settings = {
        requestTimeout: timeout,
        headersTimeout,
        keepAliveTimeout: http.keepAliveTimeoutMs,
        connectionsCheckingInterval: Math.min(1000, timeout),
        noDelay: true,
      };
      const server = (options.tls ? httpsServer({ ...settings, ...options.tls }, handler) : httpServer(settings, handler)) as Server;
      server.maxRequestsPerSocket = http.maxRequestsPerSocket;
      const limits = { maxConnections: http.maxConnections, maxConnectionsPerIp: http.maxConnectionsPerIp, headersTimeoutMs: headersTimeout };
      guardConnections(server, { ...limits, tls: options.tls !== undefined }, log, (status, message) =>
        JSON.stringify(errorBody(status, message, { overloadStatus: http.overloadStatus })),
      );
      return server;
    },
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Socket) => {
      if (err.code === 'ECONNRESET' || !socket.writable) {
        socket.destroy();
        return;
      }
      const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
      const status = timedOut ? 408 : 400;
      const body = JSON.stringify(
        errorBody(status, timedOut ? `the request was not received within ${timeout / 1000} s` : `malformed HTTP request: ${err.message}`, {
          overloadStatus: http.overloadStatus,
        }),
      );
      socket.end(
        `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    },
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body: Buffer, done) => {
    try {
      done(null, parseJsonBody(body));
    } catch (err) {
      done(err as HttpError, undefined);
    }
  });

  app.setErrorHandler(async (err: Error & { code?: string; statusCode?: number }, req, reply) => {
    const overloadStatus = http.overloadStatus;
    let error: HttpError;
    if (err instanceof HttpError || err instanceof DynamoException) error = toHttpError(err, overloadStatus);
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') error = new HttpError(413, `request body is larger than the limit of ${http.bodyLimitBytes} bytes`);
    else if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') error = new HttpError(415, 'Expected request with Content-Type application/json');
    else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) error = new HttpError(err.statusCode, err.message);
    else error = toHttpError(err, overloadStatus);
    if (error.status >= 500) log.error({ method: req.method, url: req.url, status: error.status, err: error.message }, 'request failed');
    else log.debug({ method: req.method, url: req.url, status: error.status, err: error.message }, 'request refused');
    if (error.status === 413) await discardBody(req.raw, timeout);
    if (reply.sent || reply.raw.headersSent) return;
    if (retriable(error.status, overloadStatus)) void reply.header('retry-after', String(RETRY_AFTER_SECS));
    if (http.anthropicApi && req.url.startsWith(ANTHROPIC_PATH)) {
      return reply
        .code(error.status)
        .type('application/json')
        .send(anthropicErrorBody(error.status, error.message, overloadStatus));
    }
    return reply
      .code(error.status)
      .type('application/json')
      .send(errorBody(error.status, error.message, { details: error.details, param: error.param, overloadStatus }));
  });

  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(404, `Route not found: ${req.method} ${req.url.split('?')[0]}`, { overloadStatus: http.overloadStatus }));
  });

  for (const [path, surface] of Object.entries(GENERATION_ROUTES)) app.post(path, generationHandler(surface, options));
  app.post('/v1/embeddings', embeddingsHandler(options));
  app.post('/v1/responses', responsesHandler(options));
  if (http.anthropicApi) {
    app.post(ANTHROPIC_PATH, messagesHandler(options, { stripPreamble: http.stripAnthropicPreamble }));
    app.post(`${ANTHROPIC_PATH}/count_tokens`, countTokensHandler(options, { stripPreamble: http.stripAnthropicPreamble }));
  }
  for (const path of http.anthropicApi ? [...POST_ROUTES, ANTHROPIC_PATH, `${ANTHROPIC_PATH}/count_tokens`] : POST_ROUTES) {
    app.route({
      method: ['GET', 'PUT', 'DELETE', 'PATCH'],
      url: path,
      handler: (_req, reply) =>
        reply
          .code(405)
          .header('allow', 'POST')
          .send(errorBody(405, `${path} only takes POST`, { overloadStatus: http.overloadStatus })),
    });
  }

  const modelEntry = (name: string) => {
    const model = registry.get(name);
    if (!model?.ready) return undefined;
    const window = model.card.context_length;
    return { id: model.name, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'nvidia', ...(window > 0 ? { context_window: window } : {}) };
  };
  app.get('/v1/models', async () => ({
    object: 'list',
    data: registry.all().flatMap((m) => modelEntry(m.name) ?? []),
  }));
  app.get('/v1/models/*', async (req, reply) => {
    const name = decodeURIComponent((req.params as { '*': string })['*']);
    // A model literally named ".../ready" wins, as in stock.
    const readiness = !registry.get(name) && name.endsWith('/ready') ? readinessOf(name.slice(0, -'/ready'.length)) : undefined;
    if (readiness) return reply.code(readiness.ready ? 200 : 503).send(readiness);
    const entry = modelEntry(name);
    if (!entry) throw new HttpError(404, `Model not found: ${name}`, { param: 'model' });
    return entry;
  });

  /**
   * Stock's readiness body: the model, and per namespace whether its worker types are live: an
   * aggregated worker, or decode workers and (when their card needs them) prefill workers.
   */
  const readinessOf = (name: string) => {
    const model = registry.get(name);
    if (!model) return undefined;
    const base = model.base ?? model;
    const { namespaces } = model.readiness();
    const prefill = base.disaggregated ? base.prefillWorkers?.()?.readiness().namespaces : undefined;
    const detail = Object.fromEntries(
      Object.entries(namespaces)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([namespace, n]) => {
          const types: Record<string, { workers: number; needs: string[][] }> = base.disaggregated
            ? { decode: { workers: n.workers, needs: base.card.needs }, prefill: { workers: prefill?.[namespace]?.workers ?? 0, needs: [['decode']] } }
            : { aggregated: { workers: n.workers, needs: [] } };
          const present = Object.keys(types).filter((type) => types[type]!.workers > 0);
          const missing = (base.disaggregated ? ['decode', ...(base.needsPrefill ? ['prefill'] : [])] : ['aggregated']).filter(
            (type) => !present.includes(type),
          );
          const ready = n.ready && missing.length === 0;
          const reason = missing.length > 0 ? `missing worker types: ${missing.join(', ')}` : "the model's files are not loaded yet";
          return [namespace, { ready, ...(!ready && { reason }), worker_types: types, present, missing_worker_types: missing }];
        }),
    );
    const ready = Object.values(detail).some((n) => n.ready);
    return { model: model.name, ready, ...(!ready && { reason: 'no namespace has all required worker types live' }), namespaces: detail };
  };

  if (http.adminApi) registerBusyThresholdRoutes(app, registry, log);

  const openapi = openApiDocument({ anthropicApi: http.anthropicApi });
  app.get('/openapi.json', async () => openapi);

  // Clients probe the base URL before their first request (Claude Code sends HEAD /); stock answers 404.
  app.get('/', async () => ({ status: 'ok', message: 'Dynamo frontend: the API is under /v1, its description at /openapi.json' }));

  app.get('/live', async (_req, reply) => {
    if (options.shuttingDown()) return reply.code(503).send({ status: 'shutting_down', message: 'Service is shutting down' });
    return { status: 'live', message: 'Service is live' };
  });

  app.get('/health', async (_req, reply) => {
    const instances = registry.instanceRecords();
    const endpoints = [...new Set(instances.map((r) => `dyn://${r.namespace}.${r.component}.${r.endpoint}`))].sort();
    const status = options.shuttingDown() ? 'shutting_down' : registry.watchError ? 'not_ready' : 'healthy';
    const body = { status, ...(registry.watchError ? { message: `model discovery failed: ${registry.watchError.message}` } : {}), endpoints, instances };
    // Instance ids are u64: written as bare integers, not rounded.
    return reply
      .code(status === 'healthy' ? 200 : 503)
      .type('application/json')
      .send(stringifyJson(body));
  });

  app.get('/metrics', async (_req, reply) => reply.type(metrics.registry.contentType).send(await metrics.expose()));

  return app;
}
