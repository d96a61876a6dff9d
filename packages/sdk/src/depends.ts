import type { ServiceClient } from './clients.js';

type Class<T = unknown> = abstract new (...args: never[]) => T;

const DEPENDENCY = Symbol.for('dynamo.sdk.dependency');

/** What a `depends()` field holds until the service is served. */
export interface Dependency {
  readonly [DEPENDENCY]: Class;
}

/**
 * Declares that this service calls `target`: as a field (`backend = depends(Backend)`), it
 * becomes a typed client of `target` when the service is served (`this.backend.generate(req)`
 * yields Backend's responses), and `dynamo-serve` starts `target` too. Calling it before then
 * throws.
 */
export function depends<T>(target: Class<T>): ServiceClient<T> {
  if (typeof target !== 'function') throw new TypeError('depends(): give a @service class');
  return new Proxy({ [DEPENDENCY]: target } as Dependency, {
    get(holder, key) {
      if (key === DEPENDENCY) return holder[DEPENDENCY];
      if (typeof key === 'symbol' || key === 'then') return undefined;
      return () => {
        throw new Error(
          `depends(${target.name}).${key}: not connected yet; the client works once the service is served (serveService or dynamo-serve), from @onStart on`,
        );
      };
    },
  }) as unknown as ServiceClient<T>;
}

/** The service a `depends()` field points at, or undefined for any other value. */
export function dependencyTarget(value: unknown): Class | undefined {
  return typeof value === 'object' && value !== null ? ((value as Partial<Dependency>)[DEPENDENCY] ?? undefined) : undefined;
}

/** The `depends()` fields of an instance: field name → target service. */
export function dependencies(instance: object): Map<string, Class> {
  const out = new Map<string, Class>();
  for (const key of Object.keys(instance)) {
    const target = dependencyTarget((instance as Record<string, unknown>)[key]);
    if (target) out.set(key, target);
  }
  return out;
}
