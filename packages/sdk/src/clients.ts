import { CannotConnect, type Client, type DistributedRuntime } from '@dynamo/runtime';

import { classMetadata, type EndpointSpec, type RouteSpec, type ServiceSpec } from './metadata.js';

type Class<T = unknown> = abstract new (...args: never[]) => T;

/** The endpoint methods of a service type, as a client calls them: each yields the service's responses. */
export type ServiceClient<T> = {
  [K in keyof T as T[K] extends (request: never, ...rest: never[]) => AsyncIterable<unknown> | Promise<unknown> ? K : never]: T[K] extends (
    request: infer Req,
    ...rest: never[]
  ) => AsyncIterable<infer Res> | Promise<infer Res>
    ? (request: Req) => AsyncIterable<Res>
    : never;
};

/** How long a first call waits for the other service to have an instance. */
const FIRST_CALL_WAIT_MS = 30_000;

/** The recorded service spec of a class; throws naming the class when it is not a `@service`. */
export function serviceSpec(cls: Class): { spec: ServiceSpec; endpoints: EndpointSpec[]; routes: RouteSpec[]; onStart: string[]; onShutdown: string[] } {
  const meta = classMetadata(cls);
  if (!meta?.service) throw new TypeError(`${cls.name || 'this class'} is not a Dynamo service: decorate it with @service({ dynamo: { namespace } })`);
  return { spec: meta.service, endpoints: meta.endpoints ?? [], routes: meta.routes ?? [], onStart: meta.onStart ?? [], onShutdown: meta.onShutdown ?? [] };
}

/**
 * A typed client of service `cls` on `runtime`: `client.generate(request)` streams the responses
 * of `namespace/class/generate` from one of its instances, in turn. The first call of each
 * endpoint waits up to 30 s for an instance to appear.
 */
export function serviceClient<T>(cls: Class<T>, runtime: DistributedRuntime): ServiceClient<T> {
  const { spec, endpoints } = serviceSpec(cls);
  const component = runtime.namespace(spec.namespace).component(spec.component);
  const client: Record<string, (request: unknown) => AsyncIterable<unknown>> = {};
  for (const ep of endpoints) {
    let connected: Promise<Client> | undefined;
    const connect = async (): Promise<Client> => {
      const c = await component.endpoint(ep.name).client();
      await c.waitForInstances({ timeoutMs: FIRST_CALL_WAIT_MS }).catch((err: Error) => {
        throw new CannotConnect(`${spec.namespace}/${spec.component}/${ep.name}: no instance appeared within ${FIRST_CALL_WAIT_MS / 1000} s (${err.message})`, {
          cause: err,
        });
      });
      return c;
    };
    client[ep.method] = (request: unknown) =>
      (async function* () {
        connected ??= connect();
        const c = await connected.catch((err: unknown) => {
          connected = undefined;
          throw err;
        });
        yield* c.generate(request);
      })();
  }
  return client as ServiceClient<T>;
}
