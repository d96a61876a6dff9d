import { STATUS_CODES } from 'node:http';
import { DynamoException } from '@dynamo/runtime';
import type { ZodError } from 'zod';

/** Stock Dynamo's status for a worker with no room; `DYN_HTTP_OVERLOAD_STATUS_CODE` changes it. */
export const DEFAULT_OVERLOAD_STATUS = 529;

/** Seconds a client is told to wait (`Retry-After`) after a 503 or an overload answer. */
export const RETRY_AFTER_SECS = 1;

/** An error with the HTTP status it answers with. */
export class HttpError extends Error {
  readonly status: number;
  readonly details: unknown;
  /** The request field the error is about, when one is. */
  readonly param: string | undefined;

  constructor(status: number, message: string, options: { cause?: unknown; details?: unknown; param?: string } = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'HttpError';
    this.status = status;
    this.details = options.details;
    this.param = options.param ?? paramOf(options.cause);
  }
}

/** The first bad field of a zod failure behind `cause`, as a dotted path (`messages.0.role`). */
function paramOf(cause: unknown): string | undefined {
  const issues = ((cause as { cause?: unknown } | undefined)?.cause as ZodError | undefined)?.issues ?? (cause as ZodError | undefined)?.issues;
  const path = Array.isArray(issues) ? issues[0]?.path : undefined;
  return path && path.length > 0 ? path.map(String).join('.') : undefined;
}

/** Stock Dynamo's reason phrases, with its two custom codes. */
export function reasonPhrase(status: number, overloadStatus = DEFAULT_OVERLOAD_STATUS): string {
  if (status === overloadStatus) return 'Overloaded';
  if (status === 499) return 'Client Closed Request';
  return STATUS_CODES[status] ?? 'UnknownError';
}

/** OpenAI's error `type` for a status, as stock's stream error frames name it. */
export function errorSlug(status: number, overloadStatus = DEFAULT_OVERLOAD_STATUS): string {
  if (status === overloadStatus || status === 503) return 'service_unavailable';
  if (status === 400 || status === 409 || status === 413 || status === 415 || status === 408) return 'invalid_request_error';
  const slugs: Record<number, string> = {
    401: 'authentication_error',
    403: 'permission_error',
    404: 'not_found_error',
    405: 'invalid_request_error',
    429: 'rate_limit_error',
    499: 'request_cancelled',
    501: 'not_implemented_error',
    504: 'timeout_error',
  };
  return slugs[status] ?? 'internal_server_error';
}

/** The body of an error answer; see {@link errorBody}. */
export interface ErrorBody {
  message: string;
  type: string;
  code: number;
  details?: unknown;
  error: { message: string; type: string; param: string | null; code: number };
}

/**
 * An error body both SDK families read: stock Dynamo's flat `{message, type, code}` (and
 * `details`), and the `error` object the OpenAI SDKs take their message, type and param from.
 */
export function errorBody(
  status: number,
  message: string,
  options: { details?: unknown; param?: string | undefined; overloadStatus?: number } = {},
): ErrorBody {
  const overload = options.overloadStatus ?? DEFAULT_OVERLOAD_STATUS;
  return {
    message,
    type: reasonPhrase(status, overload),
    code: status,
    ...(options.details === undefined ? {} : { details: options.details }),
    error: { message, type: errorSlug(status, overload), param: options.param ?? null, code: status },
  };
}

/** The JSON of the frame that ends a failed stream, `{"error": {message, type, code}}`, as stock sends it. */
export function streamErrorJson(error: HttpError, overloadStatus = DEFAULT_OVERLOAD_STATUS): string {
  return JSON.stringify({ error: { message: error.message, type: errorSlug(error.status, overloadStatus), code: error.status } });
}

/** Whether an answer with `status` tells the client when to retry. */
export function retriable(status: number, overloadStatus = DEFAULT_OVERLOAD_STATUS): boolean {
  return status === 503 || status === overloadStatus;
}

/** The worker-side kinds that mean "no worker could take or finish this": a 503. */
const UNAVAILABLE = new Set(['CannotConnect', 'Disconnected', 'EngineShutdown', 'StreamIncomplete']);

/**
 * The HTTP status and message for anything a request handler throws: the request's own faults
 * (InvalidArgument) are 400, unreachable or vanished workers 503, a silent one 504, a cancelled request 499, a worker
 * with no room (WorkerOverloaded) the overload status (529 unless configured), anything else 500.
 */
export function toHttpError(err: unknown, overloadStatus = DEFAULT_OVERLOAD_STATUS): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof DynamoException) {
    if (err.kind === 'InvalidArgument') return new HttpError(400, err.message, { cause: err });
    if (UNAVAILABLE.has(err.kind)) return new HttpError(503, err.message, { cause: err });
    // A worker that went silent past the response timeout, as stock answers it.
    if (err.kind === 'ConnectionTimeout') return new HttpError(504, err.message, { cause: err });
    if (err.kind === 'Cancelled') return new HttpError(499, err.message, { cause: err });
    // A full router queue says which limit, as stock's body does.
    if (err.kind === 'WorkerOverloaded') return new HttpError(overloadStatus, err.message, { cause: err, details: (err as { details?: unknown }).details });
    return new HttpError(500, err.message, { cause: err });
  }
  return new HttpError(500, err instanceof Error ? err.message : String(err), { cause: err });
}
