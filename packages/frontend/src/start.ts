import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { modelParsers } from '@dynamo/llm/internal';
import { type Context, DistributedRuntime, InvalidArgument, runtimeOverridesOf } from '@dynamo/runtime';

import { createHttpServer } from './server.js';
import { FrontendMetrics } from './metrics.js';
import { CardFiles } from './models/card-files.js';
import { ModelRegistry } from './models/registry.js';
import { type FrontendOptions, frontendConfig } from './settings.js';
import { KvRouterMetrics } from './routing/kv-metrics.js';
import { ModelRouting, type ModelRoutingOptions } from './routing/model-routing.js';
import { RouterPolicyConfig } from './routing/policy-config.js';
import type { KvRouterSettings } from './routing/kv-router.js';
import { routerFactory } from './routing/router-factory.js';

/** A running frontend. */
export interface Frontend {
  /** `http(s)://host:port` it listens on (a wildcard host shows as 127.0.0.1). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly runtime: DistributedRuntime;
  readonly metrics: FrontendMetrics;
  /** Names of the models it serves now (ready or loading). */
  models(): string[];
  /**
   * Graceful shutdown: stop accepting connections, let in-flight responses finish within
   * `gracefulShutdownMs`, cut off the rest, stop following discovery. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Starts the OpenAI-compatible frontend: follows discovery for model cards and worker instances,
 * and serves `/v1/chat/completions`, `/v1/completions`, `/v1/models`, `/health`, `/live` and
 * `/metrics`. Resolves once it listens and the models registered now are known.
 *
 * ```ts
 * const frontend = await startFrontend({ port: 8000 });
 * // ... POST http://127.0.0.1:8000/v1/chat/completions
 * await frontend.close();
 * ```
 *
 * Throws `InvalidArgument` naming a bad option, `CannotConnect` when discovery is unreachable.
 */
export async function startFrontend(options: FrontendOptions = {}): Promise<Frontend> {
  const { router, runtime: given, runtimeOptions, ...settings } = options;
  const { http, routing, kvRouter, busyThresholds, migration, models, runtime: planes } = frontendConfig(settings);
  if ((http.tlsCertPath === undefined) !== (http.tlsKeyPath === undefined)) {
    throw new InvalidArgument('options: tlsCertPath and tlsKeyPath go together; give both or neither');
  }
  const unknownParsers = modelParsers({ toolCallParser: models.toolCallParser, reasoningParser: models.reasoningParser }).problems;
  if (unknownParsers.length > 0) throw new InvalidArgument(`options: ${unknownParsers.join('; ')}`);
  const tls = http.tlsCertPath && http.tlsKeyPath ? await readTls(http.tlsCertPath, http.tlsKeyPath) : undefined;
  const policyConfig = routing.policyConfig === undefined ? undefined : RouterPolicyConfig.load(routing.policyConfig);
  const overrides = runtimeOverridesOf(planes);
  const runtime = given ?? (await DistributedRuntime.create({ ...runtimeOptions, overrides: { ...overrides, ...runtimeOptions?.overrides } }));
  const log = runtime.log('frontend');
  const metrics = new FrontendMetrics(http.metricsPrefix);
  const routerLog = runtime.log('frontend.router');
  const kvDeps = { runtime, metrics: new KvRouterMetrics(metrics.registry), log: routerLog, ...(policyConfig ? { policyConfig } : {}) };
  const kvSettings = Object.fromEntries(Object.entries(kvRouter).filter(([, value]) => value !== undefined)) as KvRouterSettings;
  const routerOf = router ?? routerFactory(routing.mode, { settings: kvSettings, deps: kvDeps });
  const routingOptions: ModelRoutingOptions = {
    runtime,
    log: routerLog,
    thresholds: {
      active_decode_blocks_threshold: busyThresholds.active_decode_blocks_threshold ?? null,
      active_prefill_tokens_threshold: busyThresholds.active_prefill_tokens_threshold ?? null,
      active_prefill_tokens_threshold_frac: busyThresholds.active_prefill_tokens_threshold_frac ?? null,
    },
    ...(routing.sessionAffinityTtlSecs === undefined ? {} : { affinity: { ttlSecs: routing.sessionAffinityTtlSecs, mode: routing.sessionAffinityMode } }),
  };
  if (routing.mode !== 'kv' && !router && (kvRouter.replicaSync || kvRouter.queueThreshold !== undefined || policyConfig)) {
    log.warn({ router_mode: routing.mode }, 'replica sync and the router queue apply in router mode kv only; ignored');
  }
  const thresholdsOn = Object.values(busyThresholds).some((v) => v !== undefined);
  log.info({ ...busyThresholds }, thresholdsOn ? 'busy-worker rejection enabled' : 'busy-worker rejection disabled: no threshold is set');
  const registry = new ModelRegistry({
    runtime,
    ...(models.namespace === undefined ? {} : { namespace: models.namespace }),
    routing: (name, card) => new ModelRouting(name, card, routerOf(name, card), routingOptions),
    cardFiles: new CardFiles({
      ...(models.modelPath === undefined ? {} : { fallbackModelPath: models.modelPath }),
      ...(runtimeOptions?.env ? { env: runtimeOptions.env } : {}),
    }),
    defaultParsers: { toolCallParser: models.toolCallParser, reasoningParser: models.reasoningParser },
    log: runtime.log('frontend.models'),
  });
  const inflight = new Set<Context>();
  let shuttingDown = false;
  const app = createHttpServer({ registry, metrics, log, inflight, http, migration, ...(tls ? { tls } : {}), shuttingDown: () => shuttingDown });
  try {
    await registry.start();
    await app.listen({ host: http.host, port: http.port });
  } catch (err) {
    await registry.close();
    if (!given) await runtime.shutdown();
    throw err;
  }
  const address = app.server.address() as AddressInfo;
  const shownHost = http.host === '0.0.0.0' || http.host === '::' ? '127.0.0.1' : http.host;
  const url = `${tls ? 'https' : 'http'}://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${address.port}`;
  log.info({ url, router: router ? 'custom' : routing.mode, models: registry.all().map((m) => m.name) }, 'frontend listening');

  let closing: Promise<void> | undefined;
  const close = async () => {
    shuttingDown = true;
    const serverClosed = app.close();
    const deadline = Date.now() + http.gracefulShutdownMs;
    while (inflight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    if (inflight.size > 0) log.warn({ requests: inflight.size }, 'graceful shutdown timed out; cutting off in-flight requests');
    for (const context of inflight) context.kill();
    app.server.closeAllConnections();
    await serverClosed;
    await registry.close();
    if (!given) await runtime.shutdown();
    log.info('frontend stopped');
  };
  return {
    url,
    host: http.host,
    port: address.port,
    runtime,
    metrics,
    models: () => registry.all().map((m) => m.name),
    close: () => (closing ??= close()),
  };
}

async function readTls(certPath: string, keyPath: string): Promise<{ cert: Buffer; key: Buffer }> {
  const read = async (path: string, what: string) => {
    try {
      return await readFile(path);
    } catch (err) {
      throw new InvalidArgument(`options.${what}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  return { cert: await read(certPath, 'tlsCertPath'), key: await read(keyPath, 'tlsKeyPath') };
}
