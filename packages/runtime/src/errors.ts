/**
 * The Dynamo error family. Each class is one `BackendError` kind of stock Dynamo, so an error an
 * engine throws keeps its meaning when it crosses the wire. Everything this module exports is the
 * family: `@dynamo/runtime` and `@dynamo/backend` re-export it whole (`@dynamo/runtime/errors`).
 */

/** Names of the error kinds, as Dynamo spells them. */
export type DynamoErrorKind =
  | 'Unknown'
  | 'InvalidArgument'
  | 'CannotConnect'
  | 'Disconnected'
  | 'ConnectionTimeout'
  | 'Cancelled'
  | 'EngineShutdown'
  | 'StreamIncomplete'
  | 'WorkerOverloaded';

/**
 * What every Dynamo error carries, whichever copy of this package made it: an app often ends up with
 * two copies of `@dynamo/runtime` (a dependency pinning another version), and each copy's classes
 * are different objects, so a plain `instanceof` would miss the other copy's errors.
 */
const BRAND = Symbol.for('@dynamo/runtime:DynamoException');

/** The family's classes and the kind each stands for (`*`: any kind); filled below. */
const familyKinds = new Map<unknown, DynamoErrorKind | '*'>();

/**
 * Base class of every Dynamo error; `kind` says which one without an `instanceof` chain.
 * `instanceof` works across copies of the package: an error from another copy is an instance of
 * this copy's class of its kind (classes you derive from them keep the plain prototype check).
 */
export class DynamoException extends Error {
  /** The Dynamo error kind; `Unknown` for a bare `DynamoException`. */
  readonly kind: DynamoErrorKind = 'Unknown';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    const kind = familyKinds.get(this);
    return kind !== undefined && isDynamoError(value) && (kind === '*' || value.kind === kind);
  }
}
Object.defineProperty(DynamoException.prototype, BRAND, { value: true });

/** Whether `value` is a Dynamo error, from this copy of the package or any other. */
export function isDynamoError(value: unknown): value is DynamoException {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/** The Dynamo error kind of `value`, from any copy of the package; undefined for anything else. */
export function kindOf(value: unknown): DynamoErrorKind | undefined {
  return isDynamoError(value) ? value.kind : undefined;
}

function kindClass(kind: DynamoErrorKind) {
  return class extends DynamoException {
    override readonly kind = kind;
  };
}

/** An error nobody classified. */
export class Unknown extends kindClass('Unknown') {}
/** Bad input: a malformed request, a prompt that is too long, an unknown flag. */
export class InvalidArgument extends kindClass('InvalidArgument') {}
/** A dependency (discovery, the request plane, a model source) could not be reached. */
export class CannotConnect extends kindClass('CannotConnect') {}
/** An established connection was lost. */
export class Disconnected extends kindClass('Disconnected') {}
/** An operation ran past its deadline. */
export class ConnectionTimeout extends kindClass('ConnectionTimeout') {}
/** The client cancelled the request. */
export class Cancelled extends kindClass('Cancelled') {}
/** The engine failed to start, crashed, or is shutting down. */
export class EngineShutdown extends kindClass('EngineShutdown') {}
/** A response stream ended before its final marker; callers may migrate the request. */
export class StreamIncomplete extends kindClass('StreamIncomplete') {}
/** This worker has no room for the request now (its queue is full); a frontend answers 529. */
export class WorkerOverloaded extends kindClass('WorkerOverloaded') {}

type ErrorClass = new (message: string, options?: { cause?: unknown }) => DynamoException;

// The class of each kind, for errors that arrive by name; `satisfies` keeps it and the union in step.
const byKind = {
  Unknown,
  InvalidArgument,
  CannotConnect,
  Disconnected,
  ConnectionTimeout,
  Cancelled,
  EngineShutdown,
  StreamIncomplete,
  WorkerOverloaded,
} satisfies Record<DynamoErrorKind, ErrorClass>;
familyKinds.set(DynamoException, '*');
for (const [kind, cls] of Object.entries(byKind)) familyKinds.set(cls, kind as DynamoErrorKind);

/** Builds the error class for a kind name received from the wire; unknown names become `Unknown`. */
export function dynamoExceptionOf(kind: string, message: string, options?: { cause?: unknown }): DynamoException {
  const cls: ErrorClass = Object.hasOwn(byKind, kind) ? byKind[kind as DynamoErrorKind] : Unknown;
  return new cls(message, options);
}

const disconnectCodes = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE']);

function httpStatus(err: object): number | undefined {
  for (const key of ['status', 'statusCode', 'code'] as const) {
    const value = (err as Record<string, unknown>)[key];
    if (typeof value === 'number' && Number.isInteger(value) && value >= 100 && value < 600) return value;
  }
  return undefined;
}

/**
 * Classifies any thrown value as a {@link DynamoException}, the way Dynamo classifies Python
 * exceptions: Dynamo errors pass through; HTTP-like errors (numeric `status`/`statusCode`/`code`)
 * become `InvalidArgument` for 4xx and `Unknown` otherwise; `TypeError`/`RangeError`/`SyntaxError`
 * and zod errors become `InvalidArgument`; `AbortError` becomes `Cancelled`; `TimeoutError` and
 * `ETIMEDOUT` become `ConnectionTimeout`; `ECONNREFUSED` becomes `CannotConnect`; connection resets
 * become `Disconnected`; anything else is `Unknown`. The original is kept as `cause`.
 */
export function toDynamoException(err: unknown): DynamoException {
  if (isDynamoError(err)) return err;
  if (!(err instanceof Error)) {
    return new Unknown(typeof err === 'string' ? err : `non-Error value thrown: ${describe(err)}`, { cause: err });
  }
  const opts = { cause: err };
  const status = httpStatus(err);
  if (status !== undefined) {
    const body = JSON.stringify({ message: err.message || `HTTP ${status}`, code: status });
    return status >= 400 && status < 500 ? new InvalidArgument(body, opts) : new Unknown(body, opts);
  }
  const code = (err as { code?: unknown }).code;
  if (err.name === 'AbortError') return new Cancelled(err.message || 'operation aborted', opts);
  if (err.name === 'TimeoutError' || code === 'ETIMEDOUT') return new ConnectionTimeout(err.message, opts);
  if (code === 'ECONNREFUSED') return new CannotConnect(err.message, opts);
  if (typeof code === 'string' && disconnectCodes.has(code)) return new Disconnected(err.message, opts);
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError || err.name === 'ZodError') {
    return new InvalidArgument(err.message, opts);
  }
  return new Unknown(err.message, opts);
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(value);
  } catch {
    return String(value);
  }
}
