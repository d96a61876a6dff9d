import { parseArgs } from 'node:util';
import type { RuntimeConfigOverrides } from './config.js';
import { InvalidArgument } from './errors.js';
import { DistributedRuntime, type RuntimeOptions } from './runtime.js';

const flags = {
  'discovery-backend': 'discoveryBackend',
  'request-plane': 'requestPlane',
  'etcd-endpoints': 'etcdEndpoints',
  'nats-server': 'natsServer',
  'file-kv': 'fileKvRoot',
  'system-port': 'systemPort',
} as const satisfies Record<string, keyof RuntimeConfigOverrides>;

/**
 * Reads the runtime's own flags (`--discovery-backend`, `--request-plane`, `--etcd-endpoints`,
 * `--nats-server`, `--file-kv`, `--system-port`) from `argv`, ignoring any other arguments so a
 * program can have flags of its own. Values are validated with the environment's rules.
 */
export function runtimeOverridesFromArgv(argv: readonly string[]): RuntimeConfigOverrides {
  const { values } = parseArgs({
    args: [...argv],
    options: Object.fromEntries(Object.keys(flags).map((f) => [f, { type: 'string' }])) as Record<string, { type: 'string' }>,
    strict: false,
    allowPositionals: true,
  });
  const overrides: Record<string, string | number> = {};
  for (const [flag, key] of Object.entries(flags)) {
    const value = values[flag];
    if (value === undefined) continue;
    if (typeof value !== 'string') throw new InvalidArgument(`--${flag} needs a value`);
    overrides[key] = key === 'systemPort' ? Number(value) : value;
  }
  return overrides as RuntimeConfigOverrides;
}

/** Options of {@link dynamoWorker}. */
export interface WorkerOptions extends RuntimeOptions {
  /** Arguments to read runtime flags from (default `process.argv.slice(2)`). */
  argv?: readonly string[];
  /** How long shutdown waits for in-flight requests (default 30 s). */
  drainTimeoutMs?: number;
}

/**
 * Runs `main` with a {@link DistributedRuntime} built from the environment and flags, the way
 * Dynamo's `@dynamo_worker()` does: SIGINT/SIGTERM start a graceful shutdown (endpoints leave
 * discovery, drain, and `served.closed` promises resolve), a second signal exits at once, and
 * when `main` returns the runtime is shut down.
 *
 * ```ts
 * await dynamoWorker(async (runtime) => {
 *   const endpoint = runtime.namespace('demo').component('echo').endpoint('generate');
 *   await endpoint.component.createService();
 *   const served = await endpoint.serveEndpoint(async function* (request) { yield request; });
 *   await served.closed;
 * });
 * ```
 */
export async function dynamoWorker(main: (runtime: DistributedRuntime) => Promise<void>, options: WorkerOptions = {}): Promise<void> {
  const overrides = { ...runtimeOverridesFromArgv(options.argv ?? process.argv.slice(2)), ...options.overrides };
  const runtime = await DistributedRuntime.create({ ...options, overrides });
  const log = runtime.log('runtime.worker');
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(130);
    }
    log.info({ signal }, `${signal} received; shutting down gracefully`);
    void runtime.shutdown(options.drainTimeoutMs === undefined ? {} : { drainTimeoutMs: options.drainTimeoutMs });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await main(runtime);
  } catch (err) {
    log.error({ err }, 'worker failed');
    throw err;
  } finally {
    await runtime.shutdown(options.drainTimeoutMs === undefined ? {} : { drainTimeoutMs: options.drainTimeoutMs });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
