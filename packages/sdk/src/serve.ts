import {
  type Component,
  type Context,
  DistributedRuntime,
  type Endpoint,
  InvalidArgument,
  parseOrThrow,
  type RuntimeOptions,
  type ServedEndpoint,
} from '@dynamo/runtime';

import { serviceClient, serviceSpec } from './clients.js';
import { dependencies } from './depends.js';
import { type RoutesListen, type ServedRoutes, serveRoutes } from './http-routes.js';
import type { EndpointSpec } from './metadata.js';

type Class<T = unknown> = new () => T;

/** How {@link serveService} runs a service. */
export interface ServeServiceOptions {
  /** The runtime to serve on (the caller shuts it down); else one is made from `runtimeOptions`. */
  runtime?: DistributedRuntime;
  runtimeOptions?: RuntimeOptions;
  /** Config over the decorator's defaults (what `dynamo-serve` reads from YAML and flags). */
  config?: Record<string, unknown>;
  /**
   * Where `@api` routes listen: default the config's `port` / `host`, else `DYNAMO_PORT` /
   * `DYNAMO_HOST`, else 8000 on 0.0.0.0.
   */
  http?: Partial<RoutesListen>;
}

/** A service being served in this process. */
export interface ServedService<T> {
  readonly instance: T;
  readonly runtime: DistributedRuntime;
  /** The `@api` routes' base URL, when the service has any. */
  readonly httpUrl: string | undefined;
  /** Stops taking requests, lets the ones in flight finish, runs the `@onShutdown` hooks. */
  stop(): Promise<void>;
}

// A registered symbol on the instance rather than a module-local map: the graph module may load
// its own copy of the SDK (through a TypeScript loader) next to the one serving it.
const CONFIG = Symbol.for('dynamo.sdk.config');
const COMPONENT = Symbol.for('dynamo.sdk.component');

/** The config a served service was given: the decorator's defaults with YAML and flags over them. */
export function serviceConfig<C extends Record<string, unknown> = Record<string, unknown>>(instance: object): Readonly<C> {
  const config = (instance as { [CONFIG]?: Readonly<Record<string, unknown>> })[CONFIG];
  if (!config) throw new Error('serviceConfig(): this object is not a served service');
  return config as C;
}

/**
 * The runtime `Endpoint` of a served service's endpoint `name` (Dynamo's name, default the
 * method's): what `registerLlm` takes to register the service as a model.
 */
export function serviceEndpoint(instance: object, name: string): Endpoint {
  const component = (instance as { [COMPONENT]?: Component })[COMPONENT];
  if (!component) throw new Error('serviceEndpoint(): this object is not a served service');
  return component.endpoint(name);
}

/**
 * Serves `cls` in this process: makes one instance, turns its `depends()` fields into clients,
 * runs its `@onStart` hooks, then serves each `@endpoint` method as
 * `namespace/ClassName/endpoint`. Throws naming what is wrong with the class or its options.
 */
export async function serveService<T extends object>(cls: Class<T>, options: ServeServiceOptions = {}): Promise<ServedService<T>> {
  const { spec, endpoints, routes, onStart, onShutdown } = serviceSpec(cls);
  if (endpoints.length === 0 && routes.length === 0) throw new InvalidArgument(`${cls.name}: a service needs at least one @endpoint or @api method`);
  const runtime = options.runtime ?? (await DistributedRuntime.create(options.runtimeOptions));
  const owned = options.runtime === undefined;
  const log = runtime.log('sdk');
  const instance = new cls();
  const config = Object.freeze({ ...spec.config, ...options.config });
  Object.defineProperty(instance, CONFIG, { value: config });
  const component = runtime.namespace(spec.namespace).component(spec.component);
  Object.defineProperty(instance, COMPONENT, { value: component });
  for (const [field, target] of dependencies(instance)) (instance as Record<string, unknown>)[field] = serviceClient(target as Class, runtime);

  const call = (name: string) => (instance as Record<string, () => unknown>)[name]!.call(instance);
  const served: ServedEndpoint[] = [];
  let http: ServedRoutes | undefined;
  try {
    for (const hook of onStart) await call(hook);
    if (endpoints.length > 0) {
      await component.createService();
      for (const ep of endpoints) served.push(await component.endpoint(ep.name).serveEndpoint(handler(cls.name, instance, ep)));
    }
    if (routes.length > 0) http = await serveRoutes(cls.name, instance, routes, routesListen(cls.name, config, options.http), log);
  } catch (err) {
    await Promise.all(served.map((s) => s.stop()));
    if (owned) await runtime.shutdown();
    throw err;
  }
  if (endpoints.length > 0)
    log.info({ service: cls.name, namespace: spec.namespace, endpoints: endpoints.map((e) => e.name) }, `serving ${spec.namespace}/${spec.component}`);

  let stopping: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    await Promise.all([...served.map((s) => s.stop()), http?.close()]);
    for (const hook of onShutdown) {
      try {
        await call(hook);
      } catch (err) {
        log.error({ service: cls.name, hook, err: (err as Error).message }, 'an @onShutdown hook failed');
      }
    }
    if (owned) await runtime.shutdown();
  };
  return { instance, runtime, httpUrl: http?.url, stop: () => (stopping ??= stop()) };
}

/** The routes' port and host: explicit options, then the service's config, then `DYNAMO_PORT` / `DYNAMO_HOST`. */
function routesListen(service: string, config: Readonly<Record<string, unknown>>, given: Partial<RoutesListen> = {}): RoutesListen {
  const port = given.port ?? config.port ?? process.env.DYNAMO_PORT ?? 8000;
  const number = typeof port === 'string' && /^\d+$/.test(port) ? Number(port) : port;
  if (typeof number !== 'number' || !Number.isInteger(number) || number < 0 || number > 65535)
    throw new InvalidArgument(`${service}: port must be an integer from 0 to 65535 (got ${JSON.stringify(port)})`);
  const host = given.host ?? config.host ?? process.env.DYNAMO_HOST ?? '0.0.0.0';
  if (typeof host !== 'string' || host === '') throw new InvalidArgument(`${service}: host must be a non-empty string (got ${JSON.stringify(host)})`);
  return { port: number, host };
}

/** The endpoint handler of one method: the request checked first, each response checked when a schema says so. */
function handler(service: string, instance: object, ep: EndpointSpec) {
  const method = (instance as Record<string, (request: unknown, context: Context) => unknown>)[ep.method];
  if (typeof method !== 'function') throw new InvalidArgument(`${service}.${ep.method}: not a method`);
  return async function* (request: unknown, context: Context): AsyncGenerator<unknown> {
    const parsed = parseOrThrow(ep.request, request, `${service}.${ep.name} request`);
    const output = method.call(instance, parsed, context);
    const items =
      output != null && typeof (output as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ? (output as AsyncIterable<unknown>) : [await output];
    for await (const item of items) yield ep.response ? parseOrThrow(ep.response, item, `${service}.${ep.name} response`) : item;
  };
}
