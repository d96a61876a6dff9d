import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgument } from '@dynamo/runtime';

import { serviceSpec } from './clients.js';
import { dependencies } from './depends.js';

/** A service class as the graph holds it: constructed with no arguments. */
export type ServiceClass = new () => object;

/** A graph of services: the entry and everything it depends on, by class name, entry first. */
export interface ServiceGraph {
  entry: ServiceClass;
  services: Map<string, ServiceClass>;
  /** Class name → the class names it depends on. */
  edges: Map<string, string[]>;
}

/** `<module>#<Class>` split, the module resolved against `cwd`. */
export function parseGraphRef(ref: string, cwd = process.cwd()): { modulePath: string; className: string } {
  const hash = ref.lastIndexOf('#');
  if (hash <= 0 || hash === ref.length - 1) throw new InvalidArgument(`graph ${JSON.stringify(ref)}: expected <module>#<Class>, e.g. ./src/graph.ts#Frontend`);
  const modulePath = resolve(cwd, ref.slice(0, hash));
  if (!existsSync(modulePath)) throw new InvalidArgument(`graph ${JSON.stringify(ref)}: no module at ${modulePath}`);
  return { modulePath, className: ref.slice(hash + 1) };
}

let tsLoader: Promise<unknown> | undefined;

/** Imports a graph module; TypeScript goes through tsx, which also lowers standard decorators. */
export async function importGraphModule(modulePath: string): Promise<Record<string, unknown>> {
  if (/\.[cm]?tsx?$/.test(modulePath)) await (tsLoader ??= import('tsx/esm/api').then((tsx) => tsx.register()));
  return (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>;
}

/**
 * The services `entry` reaches through `depends()` fields. Each class is constructed once, with
 * no arguments, to read its fields: keep constructors free of side effects (use `@onStart`).
 */
export function graphOf(entry: ServiceClass): ServiceGraph {
  const services = new Map<string, ServiceClass>();
  const edges = new Map<string, string[]>();
  const queue: ServiceClass[] = [entry];
  while (queue.length > 0) {
    const cls = queue.shift()!;
    const known = services.get(cls.name);
    if (known === cls) continue;
    if (known) throw new InvalidArgument(`two different service classes are named ${cls.name}; service names must be unique in a graph`);
    serviceSpec(cls);
    services.set(cls.name, cls);
    let instance: object;
    try {
      instance = new cls();
    } catch (err) {
      throw new InvalidArgument(`${cls.name}: its constructor failed while reading its depends() fields: ${(err as Error).message}`, { cause: err });
    }
    const targets = [...dependencies(instance).values()] as ServiceClass[];
    edges.set(
      cls.name,
      targets.map((t) => t.name),
    );
    queue.push(...targets);
  }
  return { entry, services, edges };
}

/** Loads `<module>#<Class>` and the graph under it; errors name the module or class at fault. */
export async function loadGraph(ref: string, cwd = process.cwd()): Promise<ServiceGraph> {
  const { modulePath, className } = parseGraphRef(ref, cwd);
  let mod: Record<string, unknown>;
  try {
    mod = await importGraphModule(modulePath);
  } catch (err) {
    throw new InvalidArgument(`graph module ${modulePath} failed to load: ${(err as Error).message}`, { cause: err });
  }
  const entry = mod[className];
  if (typeof entry !== 'function') {
    const exported = Object.entries(mod)
      .filter(([, v]) => typeof v === 'function')
      .map(([k]) => k);
    throw new InvalidArgument(`graph module ${modulePath} exports no class ${className} (exported: ${exported.join(', ') || 'none'})`);
  }
  try {
    return graphOf(entry as ServiceClass);
  } catch (err) {
    if (err instanceof TypeError) throw new InvalidArgument(err.message, { cause: err });
    throw err;
  }
}
