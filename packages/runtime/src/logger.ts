import { createRequire } from 'node:module';
import { pino, type Level, type Logger } from 'pino';
import type pinoPretty from 'pino-pretty';

// pino-pretty (and its colour and date libraries) load only for a terminal; services log JSON.
const requireFromHere = createRequire(import.meta.url);

/** A logger as the runtime's modules use it: pino's, or anything with the same four methods. */
export type Log = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

/** A {@link Log} that drops everything (the default where a caller passes none). */
export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

const levels = new Set<string>(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);
// Dynamo's filter speaks tracing's level names; `off` silences.
const alias: Record<string, string> = { off: 'silent', warning: 'warn' };

/** A parsed `DYN_LOG` filter: a default level plus per-target overrides. */
export interface LogFilter {
  level: Level | 'silent';
  targets: Array<{ target: string; level: Level | 'silent' }>;
}

function level(value: string, source: string): Level | 'silent' {
  const v = value.trim().toLowerCase();
  const name = alias[v] ?? v;
  if (!levels.has(name)) {
    throw new RangeError(`${source}: unknown log level '${value}' (expected trace, debug, info, warn, error or off)`);
  }
  return name as Level | 'silent';
}

/**
 * Parses Dynamo's `DYN_LOG` syntax: a default level, then optional `target=level` pairs, comma
 * separated (`info`, `debug,dynamo=debug`, `warn,runtime.discovery=debug`). Empty means `info`.
 */
export function parseLogFilter(spec: string | undefined): LogFilter {
  const filter: LogFilter = { level: 'info', targets: [] };
  for (const part of (spec ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq < 0) filter.level = level(part, 'DYN_LOG');
    else filter.targets.push({ target: part.slice(0, eq).trim(), level: level(part.slice(eq + 1), `DYN_LOG ${part}`) });
  }
  return filter;
}

/** The level a component logs at: the longest matching target prefix wins, else the default. */
export function levelFor(filter: LogFilter, component: string): Level | 'silent' {
  let best: { target: string; level: Level | 'silent' } | undefined;
  for (const t of filter.targets) {
    const matches = component === t.target || component.startsWith(`${t.target}.`) || t.target === 'dynamo';
    if (matches && (best === undefined || t.target.length > best.target.length)) best = t;
  }
  return best?.level ?? filter.level;
}

/** Options for {@link createLogging}. */
export interface LoggingOptions {
  /** `DYN_LOG` value. */
  filter?: string;
  /** JSON lines (`DYN_LOGGING_JSONL=1`); otherwise pretty output on a TTY, JSON elsewhere. */
  jsonl?: boolean;
  /** Where to write (default stderr, so stdout stays for program output). */
  destination?: NodeJS.WritableStream;
}

/** The process's logging: a root pino logger and per-component children at their filtered level. */
export interface Logging {
  root: Logger;
  /** `component` is dotted, e.g. `runtime.discovery.etcd`. */
  child(component: string): Logger;
}

/** Builds the process's logging from `DYN_LOG` / `DYN_LOGGING_JSONL` values. */
export function createLogging(options: LoggingOptions = {}): Logging {
  const filter = parseLogFilter(options.filter);
  const destination = options.destination ?? process.stderr;
  const isTty = (destination as { isTTY?: boolean }).isTTY === true;
  const stream = !options.jsonl && isTty ? (requireFromHere('pino-pretty') as typeof pinoPretty)({ destination, colorize: true, sync: true }) : destination;
  // The root passes everything; each child applies its own level.
  const root = pino({ level: 'trace', base: { pid: process.pid } }, stream);
  return {
    root,
    child: (component) => root.child({ component }, { level: levelFor(filter, component) }),
  };
}
