import { DistributedRuntime, type RuntimeOptions } from '@dynamo/runtime';

let current: Promise<DistributedRuntime> | undefined;

/**
 * The process's Dynamo runtime, for code outside a service (a client script, a test): the one
 * `dynamo-serve` serves on in a service process, else one made on first call from the
 * environment (`DYN_DISCOVERY_BACKEND`, `ETCD_ENDPOINTS`, `NATS_SERVER`, ...) and `options`.
 * Later calls return the same runtime; shut it down with `runtime.shutdown()`.
 */
export function getRuntime(options?: RuntimeOptions): Promise<DistributedRuntime> {
  current ??= DistributedRuntime.create(options).catch((err: unknown) => {
    current = undefined;
    throw err;
  });
  return current;
}

/** Makes `runtime` what {@link getRuntime} returns in this process. */
export function setRuntime(runtime: DistributedRuntime): void {
  current = Promise.resolve(runtime);
}
