import { createLogging, type Log, type Logging } from '@dynamo/runtime';
import { envFlag } from '@dynamo/runtime/internal';

type Env = Readonly<Record<string, string | undefined>>;

/** Logging as Dynamo configures it from the environment: `DYN_LOG` filters, `DYN_LOGGING_JSONL=1` for JSON lines. */
export function loggingFromEnv(env: Env = process.env): Logging {
  return createLogging({ filter: env.DYN_LOG || 'info', jsonl: envFlag.safeParse(env.DYN_LOGGING_JSONL ?? '').data ?? false });
}

let shared: Logging | undefined;

/**
 * A logger for an engine's own lines, on stderr beside the framework's and filtered by the same
 * `DYN_LOG` (its target is `engine.<name>`, so `DYN_LOG=info,engine.my-engine=debug` works).
 * Dynamo's convention: info for lifecycle milestones, debug per request.
 */
export function engineLog(name: string): Log {
  shared ??= loggingFromEnv();
  return shared.child(`engine.${name}`);
}
