import { Readable } from 'node:stream';
import { type Log, parseOrThrow, toDynamoException } from '@dynamo/runtime';
import Fastify, { type FastifyReply } from 'fastify';

import type { RouteSpec } from './metadata.js';

/** Where a service's `@api` routes listen. */
export interface RoutesListen {
  port: number;
  host: string;
}

/** A running HTTP server of one service's routes. */
export interface ServedRoutes {
  /** `http://host:port` as bound (port 0 becomes the real one). */
  readonly url: string;
  close(): Promise<void>;
}

const statusOf: Record<string, number> = { InvalidArgument: 400, CannotConnect: 503, ConnectionTimeout: 504, Cancelled: 499, EngineShutdown: 503 };

function fail(reply: FastifyReply, err: unknown): FastifyReply {
  const error = toDynamoException(err);
  return reply.code(statusOf[error.kind] ?? 500).send({ error: { message: error.message, type: error.kind } });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value != null && typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

/** Server-sent events of the items after `first`; a failure mid-stream becomes an `error` event. */
async function* events(first: unknown, rest: AsyncIterator<unknown>, log: Log, route: string): AsyncGenerator<string> {
  yield `data: ${JSON.stringify(first)}\n\n`;
  try {
    for (let next = await rest.next(); !next.done; next = await rest.next()) yield `data: ${JSON.stringify(next.value)}\n\n`;
  } catch (err) {
    const error = toDynamoException(err);
    log.warn({ route, err: error.message }, 'route stream failed');
    yield `event: error\ndata: ${JSON.stringify({ message: error.message, type: error.kind })}\n\n`;
  }
}

/**
 * Serves `routes` of `instance` with fastify. The request is checked before the method runs
 * (400 naming the field). A stream's first item is awaited before the headers go out, so a
 * failure before any output still gets its status (503 when a dependency has no instance).
 */
export async function serveRoutes(service: string, instance: object, routes: readonly RouteSpec[], listen: RoutesListen, log: Log): Promise<ServedRoutes> {
  const seen = new Set<string>();
  for (const r of routes) {
    const key = `${r.httpMethod} ${r.path}`;
    if (seen.has(key)) throw new TypeError(`${service}: two @api methods serve ${key}`);
    seen.add(key);
  }
  const app = Fastify({ logger: false });
  for (const route of routes) {
    const where = `${service}.${route.method}`;
    const method = (instance as Record<string, (input: unknown) => unknown>)[route.method];
    if (typeof method !== 'function') throw new TypeError(`${where}: not a method`);
    app.route({
      method: route.httpMethod,
      url: route.path,
      handler: async (request, reply) => {
        let output: unknown;
        try {
          const input =
            route.httpMethod === 'GET' ? request.query : route.request ? parseOrThrow(route.request, request.body, `${where} request`) : request.body;
          output = method.call(instance, input);
          if (!isAsyncIterable(output)) return reply.send(await output);
        } catch (err) {
          return fail(reply, err);
        }
        const items = output[Symbol.asyncIterator]();
        let first: IteratorResult<unknown>;
        try {
          first = await items.next();
        } catch (err) {
          return fail(reply, err);
        }
        reply.type('text/event-stream').header('cache-control', 'no-cache');
        return reply.send(first.done ? '' : Readable.from(events(first.value, items, log, where)));
      },
    });
  }
  const address = await app.listen({ port: listen.port, host: listen.host });
  log.info({ service, url: address, routes: routes.map((r) => `${r.httpMethod} ${r.path}`) }, `${service} routes listening`);
  return { url: address, close: () => app.close() };
}
