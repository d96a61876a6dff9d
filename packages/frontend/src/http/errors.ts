import { STATUS_CODES } from 'node:http';
import { DynamoException } from '@dynamo/runtime';

/** An error with the HTTP status it answers with. */
export class HttpError extends Error {
  readonly status: number;
  readonly details: unknown;

  constructor(status: number, message: string, options: { cause?: unknown; details?: unknown } = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'HttpError';
    this.status = status;
    this.details = options.details;
  }
}

/** Stock Dynamo's reason phrases, with its two custom codes. */
export function reasonPhrase(status: number): string {
  if (status === 529) return 'Overloaded';
  if (status === 499) return 'Client Closed Request';
  return STATUS_CODES[status] ?? 'Error';
}

/** Dynamo's flat error body: `{message, type, code}` (and `details` when there are any). */
export function errorBody(status: number, message: string, details?: unknown): { message: string; type: string; code: number; details?: unknown } {
  return { message, type: reasonPhrase(status), code: status, ...(details === undefined ? {} : { details }) };
}

/** The worker-side kinds that mean "no worker could take or finish this": a 503. */
const UNAVAILABLE = new Set(['CannotConnect', 'Disconnected', 'ConnectionTimeout', 'EngineShutdown', 'StreamIncomplete']);

/**
 * The HTTP status and message for anything a request handler throws: the request's own faults
 * (InvalidArgument) are 400, unreachable or vanished workers 503, a cancelled request 499, a worker
 * with no room (WorkerOverloaded) 529 as stock answers it, and anything else 500.
 */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof DynamoException) {
    if (err.kind === 'InvalidArgument') return new HttpError(400, err.message, { cause: err });
    if (UNAVAILABLE.has(err.kind)) return new HttpError(503, err.message, { cause: err });
    if (err.kind === 'Cancelled') return new HttpError(499, err.message, { cause: err });
    if (err.kind === 'WorkerOverloaded') return new HttpError(529, err.message, { cause: err });
    return new HttpError(500, err.message, { cause: err });
  }
  return new HttpError(500, err instanceof Error ? err.message : String(err), { cause: err });
}
