import type { Context } from '../context.js';

/**
 * An endpoint handler: takes a request and returns the stream of responses. Declare a second
 * parameter to receive the request's {@link Context} (cancellation, id, metadata); handlers that
 * declare only one are called without it.
 */
// biome-ignore lint/suspicious/noExplicitAny: the default lets an untyped handler take any request, as JSON does.
export type EndpointHandler<Req = any, Res = unknown> = ((request: Req) => AsyncIterable<Res>) | ((request: Req, context: Context) => AsyncIterable<Res>);

/** Calls `handler` the way it declared itself, checking it returned an async iterable. */
export function invokeHandler(handler: EndpointHandler, request: unknown, context: Context): AsyncIterable<unknown> {
  const output: unknown =
    handler.length >= 2 ? (handler as (r: unknown, c: Context) => unknown)(request, context) : (handler as (r: unknown) => unknown)(request);
  if (output == null || typeof (output as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function') {
    throw new TypeError(`endpoint handler must return an AsyncIterable (use an async generator), got ${output === null ? 'null' : typeof output}`);
  }
  return output as AsyncIterable<unknown>;
}
