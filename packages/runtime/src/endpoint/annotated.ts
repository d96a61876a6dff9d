import { z } from 'zod';
import { dynamoExceptionOf, type DynamoException, toDynamoException } from '../errors.js';
import { itemJson } from '../response-plane/frames.js';

/**
 * Dynamo wraps every response item in `Annotated { data, id?, event?, comment?, error? }`; an item
 * whose `event` is `"error"` carries a failure instead of data.
 */

/** The JSON text of `Annotated { data: item }`, serializing `item` once. */
export function annotatedJson(item: unknown): string {
  return `{"data":${itemJson(item)}}`;
}

/** Kinds Dynamo names at the top level of `error_type`; the others are `{"Backend": kind}`. */
const TOP_LEVEL_KINDS = new Set(['WorkerOverloaded']);

/**
 * The JSON text of an error item, readable by old readers (`comment`) and new ones (`error` as a
 * DynamoError: `error_type` is `{"Backend": kind}`, or the bare name for a top-level class such as
 * `"WorkerOverloaded"`).
 */
export function annotatedErrorJson(err: unknown): string {
  const error = toDynamoException(err);
  const errorType = TOP_LEVEL_KINDS.has(error.kind) ? error.kind : { Backend: error.kind };
  return JSON.stringify({
    event: 'error',
    comment: [error.message],
    error: { error_type: errorType, message: error.message },
  });
}

const ErrorTypeSchema = z.union([z.string(), z.record(z.string(), z.string())]);
const AnnotatedErrorSchema = z.looseObject({
  event: z.literal('error'),
  comment: z.array(z.string()).nullish(),
  error: z.looseObject({ error_type: ErrorTypeSchema.optional(), message: z.string().optional() }).nullish(),
});

/** The error kind named by a DynamoError `error_type` (`"Disconnected"` or `{"Backend": "EngineShutdown"}`). */
function kindOf(errorType: z.infer<typeof ErrorTypeSchema> | undefined): string {
  if (errorType === undefined) return 'Unknown';
  if (typeof errorType === 'string') return errorType;
  return Object.values(errorType)[0] ?? 'Unknown';
}

/** What a received item means: data to hand on, an annotation to skip, or an error to raise. */
export type Unwrapped = { kind: 'data'; data: unknown } | { kind: 'skip' } | { kind: 'error'; error: DynamoException };

/** Interprets one received `Annotated` item. */
export function unwrapAnnotated(item: unknown): Unwrapped {
  if (item === null || typeof item !== 'object') return { kind: 'data', data: item };
  const annotated = item as { data?: unknown; event?: unknown };
  if (annotated.event === 'error') {
    const parsed = AnnotatedErrorSchema.safeParse(item);
    const message = parsed.success
      ? (parsed.data.error?.message ?? parsed.data.comment?.join('; ') ?? 'worker reported an error')
      : 'worker reported a malformed error item';
    return { kind: 'error', error: dynamoExceptionOf(kindOf(parsed.success ? parsed.data.error?.error_type : undefined), message) };
  }
  if (annotated.data === undefined || annotated.data === null) return { kind: 'skip' };
  return { kind: 'data', data: annotated.data };
}
