import { parseArgs } from 'node:util';
import type { z } from 'zod';
import { envFlag } from './config.js';
import { InvalidArgument } from './errors.js';
import { describeIssues, parseOrThrow } from './validate.js';

/**
 * One command-line option. The key it is stored under is camelCase; the flag is its kebab-case
 * form (`maxTokens` ⇢ `--max-tokens`). `schema` validates the raw value (a string, or a boolean for
 * switches) and supplies the default, so the parser, the defaults and `--help` share one source.
 */
export interface Flag<S extends z.ZodType = z.ZodType> {
  schema: S;
  description: string;
  /** A switch (`--flag`; `--no-flag` turns it off) rather than `--flag VALUE`. */
  boolean?: boolean;
  /** Other names the flag answers to (kebab-case, without `--`), e.g. a stock alias. */
  aliases?: readonly string[];
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
export function parseFlags<F extends Flags>(flags: F, argv: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): ParsedFlags<F> {
  const options = Object.fromEntries(
    Object.entries(flags).flatMap(([key, flag]) =>
      [kebab(key), ...(flag.aliases ?? [])].map((name) => [name, { type: flag.boolean ? 'boolean' : 'string' }] as const),
    ),
  ) as Record<string, { type: 'boolean' | 'string' }>;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
      allowNegative: true,
    });
  } catch (err) {
    throw new InvalidArgument(`${(err as Error).message} (see --help)`, { cause: err });
  }
  if (parsed.values.help === true) return { help: true };
  const values: Record<string, unknown> = {};
  for (const [key, flag] of Object.entries(flags)) {
    const given = [kebab(key), ...(flag.aliases ?? [])].find((name) => parsed.values[name] !== undefined);
    let raw: unknown = given === undefined ? undefined : parsed.values[given];
    let source = `--${given ?? kebab(key)}`;
    if (raw === undefined && flag.env !== undefined && env[flag.env] !== undefined && env[flag.env] !== '') {
      raw = flag.boolean ? parseOrThrow(envFlag, env[flag.env], flag.env) : env[flag.env];
      source = flag.env;
    }
    const result = flag.schema.safeParse(raw);
    if (!result.success) throw new InvalidArgument(describeIssues(source, result.error), { cause: result.error });
    values[key] = result.data;
  }
  return { help: false, values: values as FlagValues<F> };
}

/** `--help`'s right column for a flag or variable: its description and default. */
function explained(flag: Flag): string {
  const fallback = flag.schema.safeParse(undefined);
  const shown = fallback.success && fallback.data !== undefined && fallback.data !== false ? ` (default: ${JSON.stringify(fallback.data)})` : '';
  return `${flag.description}${shown}`;
}

/** Two columns, the left padded to its widest entry. */
const columns = (rows: ReadonlyArray<readonly [string, string]>) => {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([l, r]) => `  ${l.padEnd(width)}${r}`).join('\n');
};

/**
 * Renders `--help` text for `flags`, with each default taken from its schema, then the settings
 * read from `environment` only (each row's variable; those a flag already names are left out).
 */
export function formatHelp(usage: string, summary: string, flags: Flags, environment: Flags = {}): string {
  const rows: Array<readonly [string, string]> = Object.entries(flags).map(([key, flag]) => {
    const names = [kebab(key), ...(flag.aliases ?? [])].map((n) => `--${n}`).join(', ');
    const left = `${names}${flag.boolean ? '' : ` ${flag.placeholder ?? 'VALUE'}`}`;
    return [left, `${explained(flag)}${flag.env ? ` [env: ${flag.env}]` : ''}`] as const;
  });
  rows.push(['-h, --help', 'Show this help and exit']);
  const named = new Set(Object.values(flags).map((flag) => flag.env));
  const variables = Object.values(environment).flatMap((flag) =>
    flag.env === undefined || named.has(flag.env) ? [] : [[`${flag.env}=${flag.boolean ? '1' : (flag.placeholder ?? 'VALUE')}`, explained(flag)] as const],
  );
  const environmentText = variables.length > 0 ? `\n\nEnvironment (no flag):\n${columns(variables)}` : '';
  return `Usage: ${usage}\n\n${summary}\n\nOptions:\n${columns(rows)}${environmentText}\n`;
}
