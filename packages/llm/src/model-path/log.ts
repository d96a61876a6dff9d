import { createLogging, type Log } from '@dynamo/runtime';
import { silentLog } from '@dynamo/runtime/internal';

export { silentLog };

let fallback: Log | undefined;

/** The logger used when the caller gives none: the runtime's pino logging at `info`, to stderr. */
export function defaultLog(): Log {
  fallback ??= createLogging().child('llm.model-path');
  return fallback;
}
