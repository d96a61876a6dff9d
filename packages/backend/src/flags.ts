import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { describeIssues, InvalidArgument } from '@dynamo/runtime';
import { DisaggregationModeSchema } from './protocol/disaggregation.js';
import { type WorkerConfig, type WorkerConfigInput, workerConfig } from './protocol/worker-config.js';

/**
 * One command-line option. The key it is stored under is camelCase; the flag is its kebab-case
 * form (`maxTokens` ⇢ `--max-tokens`). `schema` validates the raw value (a string, or a boolean for
 * switches) and supplies the default, so the parser, the defaults and `--help` share one source.
 */
export interface Flag<S extends z.ZodType = z.ZodType> {
  schema: S;
  description: string;
  /** A switch (`--flag`, no value) rather than `--flag VALUE`. */
  boolean?: boolean;
  /** Environment variable read when the flag is absent. */
  env?: string;
  /** Shown in `--help` after the flag, e.g. `N`. */
  placeholder?: string;
}

/** A set of options, keyed by their camelCase names. */
export type Flags = Record<string, Flag>;

/** The parsed, validated values of a {@link Flags} set. */
export type FlagValues<F extends Flags> = { [K in keyof F]: z.output<F[K]['schema']> };

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Result of {@link parseFlags}: either the values or a request for help. */
export type ParsedFlags<F extends Flags> = { help: true } | { help: false; values: FlagValues<F> };

/**
 * Parses `argv` against `flags` (env variables fill absent flags; `--help`/`-h` is always
 * accepted). Throws {@link InvalidArgument} naming the flag for unknown options or bad values.
 */
export function parseFlags<F extends Flags>(
  flags: F,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): ParsedFlags<F> {
  const options = Object.fromEntries(
    Object.entries(flags).map(([key, flag]) => [kebab(key), { type: flag.boolean ? 'boolean' : 'string' }] as const),
  ) as Record<string, { type: 'boolean' | 'string' }>;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new InvalidArgument(`${(err as Error).message} (see --help)`, { cause: err });
  }
  if (parsed.values.help === true) return { help: true };
  const values: Record<string, unknown> = {};
  for (const [key, flag] of Object.entries(flags)) {
    let raw: unknown = parsed.values[kebab(key)];
    let source = `--${kebab(key)}`;
    if (raw === undefined && flag.env !== undefined && env[flag.env] !== undefined && env[flag.env] !== '') {
      raw = flag.boolean ? parseEnvBoolean(flag.env, env[flag.env] as string) : env[flag.env];
      source = flag.env;
    }
    const result = flag.schema.safeParse(raw);
    if (!result.success) throw new InvalidArgument(describeIssues(source, result.error), { cause: result.error });
    values[key] = result.data;
  }
  return { help: false, values: values as FlagValues<F> };
}

function parseEnvBoolean(name: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new InvalidArgument(`${name}: expected a boolean (true/false/1/0), got '${value}'`);
}

/** Renders `--help` text for `flags`, with each default taken from its schema. */
export function formatHelp(usage: string, summary: string, flags: Flags): string {
  const rows = Object.entries(flags).map(([key, flag]) => {
    const left = `--${kebab(key)}${flag.boolean ? '' : ` ${flag.placeholder ?? 'VALUE'}`}`;
    const fallback = flag.schema.safeParse(undefined);
    const shown = fallback.success && fallback.data !== undefined && fallback.data !== false ? ` (default: ${JSON.stringify(fallback.data)})` : '';
    const env = flag.env ? ` [env: ${flag.env}]` : '';
    return [left, `${flag.description}${shown}${env}`] as const;
  });
  rows.push(['-h, --help', 'Show this help and exit']);
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return `Usage: ${usage}\n\n${summary}\n\nOptions:\n${rows.map(([l, r]) => `  ${l.padEnd(width)}${r}`).join('\n')}\n`;
}

const name = (fallback: string) => z.string().regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+').default(fallback);

/**
 * The options every worker accepts, with Dynamo's flag names and `DYN_*` variables. Spread them
 * into an engine's own flags and turn the values into a `WorkerConfig` with `workerConfig()`.
 */
export const workerFlags = {
  namespace: { schema: name('dynamo'), description: 'Dynamo namespace to register in', env: 'DYN_NAMESPACE', placeholder: 'NAME' },
  component: { schema: name('backend'), description: 'Component name of this worker', env: 'DYN_COMPONENT', placeholder: 'NAME' },
  endpoint: { schema: name('generate'), description: 'Endpoint that serves requests', env: 'DYN_ENDPOINT', placeholder: 'NAME' },
  endpointTypes: {
    schema: z.string().default('chat,completions'),
    description: 'Comma-separated OpenAI surfaces to expose (chat, completions, ...)',
    env: 'DYN_ENDPOINT_TYPES',
    placeholder: 'LIST',
  },
  discoveryBackend: {
    schema: z.enum(['file', 'etcd', 'mem']).default('file'),
    description: 'Where workers register: file (embedded, one machine), etcd, or mem (one process)',
    env: 'DYN_DISCOVERY_BACKEND',
    placeholder: 'KIND',
  },
  requestPlane: {
    schema: z.enum(['tcp', 'nats']).default('tcp'),
    description: 'How requests reach the worker',
    env: 'DYN_REQUEST_PLANE',
    placeholder: 'KIND',
  },
  disaggregationMode: {
    schema: DisaggregationModeSchema.default('agg'),
    description: 'Role of this worker: agg, prefill, decode or encode',
    env: 'DYN_DISAGGREGATION_MODE',
    placeholder: 'MODE',
  },
  migrationLimit: {
    schema: z.coerce.number().int().min(0).max(0xffff_ffff).default(0),
    description: 'How many times a frontend may move a request to another worker when this one fails',
    placeholder: 'N',
  },
  healthCheckPayload: {
    schema: z.string().optional().transform((text, ctx) => (text === undefined ? undefined : jsonObjectArgument(text, ctx))),
    description: 'Health canary request: a JSON object, or @FILE holding one (default: the engine\'s)',
    env: 'DYN_HEALTH_CHECK_PAYLOAD',
    placeholder: 'JSON|@FILE',
  },
  customJinjaTemplate: {
    schema: z.string().min(1).optional(),
    description: 'A Jinja chat template that replaces the model\'s',
    env: 'DYN_CUSTOM_JINJA_TEMPLATE',
    placeholder: 'FILE',
  },
  disableKvRouting: { schema: z.boolean().default(false), boolean: true, description: 'Do not publish KV events or load snapshots' },
} satisfies Flags;

/**
 * The `WorkerConfig` that parsed {@link workerFlags} values describe, with `extra` (the model path
 * as `modelName`, the served name, ...) on top. Throws `InvalidArgument` naming a bad field.
 */
export function workerConfigFromFlags(values: FlagValues<typeof workerFlags>, extra: WorkerConfigInput = {}): WorkerConfig {
  const { disableKvRouting, healthCheckPayload, customJinjaTemplate, ...common } = values;
  return workerConfig({
    ...common,
    enableKvRouting: !disableKvRouting,
    ...(healthCheckPayload && { healthCheckPayload }),
    ...(customJinjaTemplate && { customJinjaTemplate }),
    ...extra,
  });
}

/** A JSON object given inline or as `@file`; a zod issue says what is wrong otherwise. */
function jsonObjectArgument(text: string, ctx: z.RefinementCtx): Record<string, unknown> {
  let json = text;
  if (text.startsWith('@')) {
    try {
      json = readFileSync(text.slice(1), 'utf8');
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `cannot read ${text.slice(1)}: ${(err as Error).message}` });
      return z.NEVER;
    }
  }
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not valid JSON: ${(err as Error).message}` });
  }
  return z.NEVER;
}
