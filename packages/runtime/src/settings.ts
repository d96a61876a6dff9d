import { z } from 'zod';

import { type Flag, parseFlags } from './flags.js';
import { parseOrThrow } from './validate.js';

/**
 * One setting of a process, written once: its flag (CLI name, environment fallback, `--help`, the
 * schema that parses it and holds its default) and its place in the config object the process hands
 * down, converted there by `to` (a unit, a wire spelling). The programmatic option of the same
 * name takes the flag's value.
 */
export interface Setting<F extends string = string, S extends z.ZodType = z.ZodType, T = z.output<S>> extends Flag<S> {
  /** camelCase flag name: `httpPort` is `--http-port` and the option `httpPort`. */
  flag: F;
  /** The config's value from the flag's (default: the same value); not called for an unset one. */
  to?: (value: z.output<S>) => T;
}

/** Makes a {@link Setting}, keeping its flag name's literal type for the option types. */
export function setting<const F extends string, S extends z.ZodType, T = z.output<S>>(flag: F, row: Omit<Setting<F, S, T>, 'flag'>): Setting<F, S, T> {
  return { flag, ...row };
}

/** `row` with another default, e.g. a shared row whose default differs in one process. */
export function withDefault<R extends Setting<string, z.ZodDefault<z.ZodType>, unknown>>(row: R, value: z.output<R['schema']>): R {
  return { ...row, schema: row.schema.removeDefault().default(value as never) } as R;
}

/** A process's settings: sections of its config, each a record of fields. */
export type SettingsTable = Record<string, Record<string, Setting<string, z.ZodType, unknown>>>;

type Rows<T extends SettingsTable> = { [S in keyof T]: T[S][keyof T[S]] }[keyof T];

/** A table's flags by name, for `parseFlags` and `formatHelp`. */
export type FlagsOf<T extends SettingsTable> = { [R in Rows<T> as R['flag']]: R };

/** A table's programmatic options: each flag's value under its camelCase name, as the CLI takes it. */
export type OptionsOf<T extends SettingsTable> = { [R in Rows<T> as R['flag']]?: z.input<R['schema']> };

/** A table's config: section → field → its (converted) value. */
export type ConfigOf<T extends SettingsTable> = {
  readonly [S in keyof T]: { readonly [K in keyof T[S]]: T[S][K] extends Setting<string, z.ZodType, infer O> ? O : never };
};

const rows = (table: SettingsTable) => Object.values(table).flatMap((section) => Object.values(section));

/** The table's flags, in table order. */
export function flagsOf<T extends SettingsTable>(table: T): FlagsOf<T> {
  return Object.fromEntries(rows(table).map((row) => [row.flag, row])) as FlagsOf<T>;
}

/** The schema of the table's programmatic options (unknown names refused). */
export function optionsSchemaOf(table: SettingsTable): z.ZodType<Record<string, unknown>> {
  return z.strictObject(Object.fromEntries(rows(table).map((row) => [row.flag, row.schema])));
}

/** The frozen config the flag values describe (as `parseFlags` returns them, defaults applied). */
export function configOf<T extends SettingsTable>(table: T, values: Readonly<Record<string, unknown>>): ConfigOf<T> {
  const config = Object.fromEntries(
    Object.entries(table).map(([name, section]) => [
      name,
      Object.freeze(
        Object.fromEntries(
          Object.entries(section).map(([field, row]) => {
            const value = values[row.flag];
            return [field, value === undefined || !row.to ? value : row.to(value)];
          }),
        ),
      ),
    ]),
  );
  return Object.freeze(config) as ConfigOf<T>;
}

/** Checks programmatic options against the table (defaults applied, unknown names refused) and makes the config. */
export function configFromOptions<T extends SettingsTable>(table: T, options: OptionsOf<T>, what = 'options'): ConfigOf<T> {
  return configOf(table, parseOrThrow(optionsSchemaOf(table), options, what));
}

/**
 * The config of a table whose rows are read from the environment only (each row's `env`; rows
 * without one take their default): settings a process has no flag for. Throws `InvalidArgument`
 * naming the variable of a bad value.
 */
export function configFromEnv<T extends SettingsTable>(table: T, env: Readonly<Record<string, string | undefined>>): ConfigOf<T> {
  const parsed = parseFlags(flagsOf(table), [], env);
  // An empty argv never asks for help.
  return configOf(table, parsed.help ? {} : parsed.values);
}
