import { type Flags, type FlagValues, InvalidArgument, parseFlags } from '@dynamo/runtime';

import { type ServiceGraph, loadGraph } from '../graph.js';
import { parseOverrideArgs, readDeploymentConfig, type ResolvedService, resolveServices } from '../serve-config.js';

type Json = Record<string, unknown>;

const kebab = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** A graph CLI's arguments: the `<module>#<Class>`, `--Class.key=value` overrides and its own flags. */
export type GraphArgs<F extends Flags> = { help: true } | { help: false; ref: string; overrides: Record<string, Json>; values: FlagValues<F> };

/**
 * Parses `<module>#<Class> [-f FILE] [--Class.key=value ...] [flags]` (the graph may come anywhere;
 * `shorts` spell out short flags, by default `-f` for `--config-file`). Throws `InvalidArgument` naming what is wrong.
 */
export function parseGraphArgs<F extends Flags>(
  flags: F,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  shorts: Readonly<Record<string, string>> = { '-f': '--config-file' },
): GraphArgs<F> {
  const { overrides, rest } = parseOverrideArgs(argv);
  const valueFlags = new Set(
    Object.entries(flags)
      .filter(([, f]) => !f.boolean)
      .map(([k]) => kebab(k)),
  );
  let ref: string | undefined;
  const own: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = shorts[rest[i]!] ?? rest[i]!;
    if (!arg.startsWith('-') && ref === undefined) ref = arg;
    else {
      own.push(arg);
      if (valueFlags.has(arg) && i + 1 < rest.length) own.push(rest[++i]!);
    }
  }
  const parsed = parseFlags(flags, own, env);
  if (parsed.help) return { help: true };
  if (ref === undefined) throw new InvalidArgument('give the graph as <module>#<Class> (see --help)');
  return { help: false, ref, overrides, values: parsed.values };
}

/** The graph under `ref` with each service's layered config (warnings for YAML sections that match nothing). */
export async function resolveGraph(
  ref: string,
  configFile: string | undefined,
  overrides: Record<string, Json>,
): Promise<{ graph: ServiceGraph; services: ResolvedService[]; fileConfig: Json; warnings: string[] }> {
  const graph = await loadGraph(ref);
  const fileConfig = readDeploymentConfig(configFile);
  const { services, warnings } = resolveServices(graph, fileConfig, overrides);
  return { graph, services, fileConfig, warnings };
}
