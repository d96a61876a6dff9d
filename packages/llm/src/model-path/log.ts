import { createLogging } from '@dynamo/runtime';

/**
 * The logger model-path resolution writes to: pino's `Logger` (e.g. from `createLogging`) fits,
 * and so does any object with these three methods.
 */
export interface ModelPathLog {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** Drops everything. */
export const silentLog: ModelPathLog = { debug() {}, info() {}, warn() {} };

let fallback: ModelPathLog | undefined;

/** The logger used when the caller gives none: the runtime's pino logging at `info`, to stderr. */
export function defaultLog(): ModelPathLog {
  fallback ??= createLogging().child('llm.model-path');
  return fallback;
}
