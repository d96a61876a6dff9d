import { readFileSync } from 'node:fs';
import { InvalidArgument } from '@dynamo/runtime';
import { describeIssues } from '@dynamo/runtime/internal';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

import { serviceSpec } from './clients.js';
import type { ServiceGraph } from './graph.js';

type Json = Record<string, unknown>;

/** The reserved `ServiceArgs` key of a service's config: overrides of the decorator's process options. */
export const ServiceArgsSchema = z.strictObject({
  workers: z.number().int().min(1).optional(),
  resources: z.strictObject({ cpu: z.coerce.string().optional(), memory: z.coerce.string().optional(), gpu: z.coerce.string().optional() }).optional(),
  envs: z.record(z.string(), z.coerce.string()).optional(),
});

/** One service as `dynamo-serve` runs it, after config layering. */
export interface ResolvedService {
  name: string;
  namespace: string;
  workers: number;
  resources: { cpu: string; memory: string; gpu: string };
  envs: Record<string, string>;
  /** What `serviceConfig(this)` returns in the service. */
  config: Json;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `over` merged into `base`: objects key by key, anything else replaced. */
export function deepMerge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k], v) : v;
  return out;
}

/** A flag value: JSON when it parses (numbers, booleans, objects), else the text itself. */
function flagValue(text: string, keepString: boolean): unknown {
  if (keepString) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Splits `--Class.key=value` / `--Class.key value` overrides (any flag with a dot in its name)
 * from the other arguments. Nested keys (`--Backend.ServiceArgs.workers=2`) build nested
 * objects; values under `ServiceArgs.envs` stay strings.
 */
export function parseOverrideArgs(argv: readonly string[]): { overrides: Record<string, Json>; rest: string[] } {
  const overrides: Record<string, Json> = {};
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const match = /^--([^=.\s]+(?:\.[^=.\s]+)+)(?:=(.*))?$/s.exec(arg);
    if (!match) {
      if (/^--[^=]*\./.test(arg)) throw new InvalidArgument(`${arg}: expected --Class.key=value with non-empty names`);
      rest.push(arg);
      continue;
    }
    const path = match[1]!.split('.');
    let text = match[2];
    if (text === undefined) {
      text = argv[i + 1];
      if (text === undefined || text.startsWith('--')) throw new InvalidArgument(`${arg}: needs a value (--${match[1]}=VALUE)`);
      i++;
    }
    const keepString = path[1] === 'ServiceArgs' && path[2] === 'envs';
    let node: Json = (overrides[path[0]!] ??= {});
    for (const key of path.slice(1, -1)) node = isObject(node[key]) ? (node[key] as Json) : (node[key] = {});
    node[path.at(-1)!] = flagValue(text, keepString);
  }
  return { overrides, rest };
}

/**
 * The deployment config: `DYN_DEPLOYMENT_CONFIG` (YAML or JSON text) when set, else the YAML
 * file, else empty. Top-level keys are service class names (plus `Common`).
 */
export function readDeploymentConfig(file: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): Json {
  let text: string;
  let source: string;
  if (env.DYN_DEPLOYMENT_CONFIG) {
    text = env.DYN_DEPLOYMENT_CONFIG;
    source = 'DYN_DEPLOYMENT_CONFIG';
  } else if (file !== undefined) {
    source = file;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new InvalidArgument(`config file ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (err as Error).message}`, {
        cause: err,
      });
    }
  } else return {};
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new InvalidArgument(`${source}: not valid YAML: ${(err as Error).message}`, { cause: err });
  }
  if (doc == null) return {};
  if (!isObject(doc)) throw new InvalidArgument(`${source}: expected a mapping of service names to their config`);
  for (const [k, v] of Object.entries(doc)) if (!isObject(v)) throw new InvalidArgument(`${source}: ${k} must be a mapping (got ${JSON.stringify(v)})`);
  return doc;
}

/** A service's section with `common-configs` keys filled from `Common` where the section lacks them. */
function withCommon(name: string, section: Json, common: Json): Json {
  const listed = section['common-configs'];
  if (listed === undefined) return section;
  if (!Array.isArray(listed) || !listed.every((k) => typeof k === 'string')) throw new InvalidArgument(`${name}.common-configs must be a list of key names`);
  const out: Json = { ...section };
  delete out['common-configs'];
  for (const key of listed) if (!(key in out) && key in common) out[key] = common[key];
  return out;
}

/**
 * Layers each service's config: the decorator's `config` < the deployment config < flags.
 * `ServiceArgs` (workers, resources, envs) overrides the decorator's process options the same
 * way. A flag for a service not in the graph is an error; such a YAML section only a warning.
 */
export function resolveServices(graph: ServiceGraph, fileConfig: Json, overrides: Record<string, Json>): { services: ResolvedService[]; warnings: string[] } {
  const names = [...graph.services.keys()];
  for (const name of Object.keys(overrides)) {
    if (!graph.services.has(name)) throw new InvalidArgument(`--${name}.*: no service ${name} in the graph (services: ${names.join(', ')})`);
  }
  const warnings = Object.keys(fileConfig)
    .filter((k) => k !== 'Common' && !graph.services.has(k))
    .map((k) => `config section ${k} matches no service in the graph (services: ${names.join(', ')})`);
  const common = isObject(fileConfig.Common) ? fileConfig.Common : {};
  const services = names.map((name): ResolvedService => {
    const { spec } = serviceSpec(graph.services.get(name)!);
    const layered = deepMerge(withCommon(name, (fileConfig[name] as Json | undefined) ?? {}, common), overrides[name] ?? {});
    const { ServiceArgs: rawArgs, ...config } = layered;
    const args = ServiceArgsSchema.safeParse(rawArgs ?? {});
    if (!args.success) throw new InvalidArgument(describeIssues(`${name}.ServiceArgs`, args.error), { cause: args.error });
    const resources = { ...spec.resources, ...definedOnly(args.data.resources ?? {}) };
    const gpus = Number(resources.gpu);
    if (!Number.isFinite(gpus) || gpus < 0)
      throw new InvalidArgument(`${name}.resources.gpu: must be a number of GPUs, e.g. 1 or 0.5 (got ${JSON.stringify(resources.gpu)})`);
    return {
      name,
      namespace: spec.namespace,
      workers: args.data.workers ?? spec.workers,
      resources,
      envs: { ...spec.envs, ...args.data.envs },
      config: deepMerge(spec.config, config),
    };
  });
  return { services, warnings };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
