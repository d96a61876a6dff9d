import { createLogging, type Log, type Logging, logConfigFromEnv } from '@dynamo/runtime';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Logging as Dynamo configures it from the environment: `DYN_LOG` filters, `DYN_LOGGING_JSONL=1`
 * for JSON lines. Throws `InvalidArgument` naming a bad variable.
 */
export function loggingFromEnv(env: Env = process.env): Logging {
  return createLogging(logConfigFromEnv(env));
}

let shared: Logging | undefined;

/**
 * A logger for an engine's own lines, on stderr beside the framework's and filtered by the same
 * `DYN_LOG` (its target is `engine.<name>`, so `DYN_LOG=info,engine.my-engine=debug` works).
 * Dynamo's convention: info for lifecycle milestones, debug per request.
 */
export function engineLog(name: string): Log {
  // Engines call this as their modules load; a bad variable is reported by the Worker, which reads the same ones.
  shared ??= (() => {
    try {
      return loggingFromEnv();
    } catch {
      return createLogging({});
    }
  })();
  return shared.child(`engine.${name}`);
}
