import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { modelParsers } from '@dynamo/llm/internal';
import { type Context, DistributedRuntime, InvalidArgument, parseOrThrow } from '@dynamo/runtime';

import { createHttpServer } from './server.js';
import { FrontendMetrics } from './metrics.js';
import { CardFiles } from './models/card-files.js';
import { ModelRegistry } from './models/registry.js';
import { type FrontendOptions, FrontendSettingsSchema } from './options.js';
import { KvRouterMetrics } from './routing/kv-metrics.js';
import { ModelRouting, type ModelRoutingOptions } from './routing/model-routing.js';
import { RouterPolicyConfig } from './routing/policy-config.js';
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
  const { router, runtime: given, runtimeOptions, ...plain } = options;
  const settings = parseOrThrow(FrontendSettingsSchema, plain, 'options');
  if ((settings.tlsCertPath === undefined) !== (settings.tlsKeyPath === undefined)) {
    throw new InvalidArgument('options: tlsCertPath and tlsKeyPath go together; give both or neither');
  }
  const unknownParsers = modelParsers({ toolCallParser: settings.toolCallParser, reasoningParser: settings.reasoningParser }).problems;
  if (unknownParsers.length > 0) throw new InvalidArgument(`options: ${unknownParsers.join('; ')}`);
  const tls = settings.tlsCertPath && settings.tlsKeyPath ? await readTls(settings.tlsCertPath, settings.tlsKeyPath) : undefined;
  const { policyConfig: policyPath, ...kvSettings } = settings.kvRouter;
  const policyConfig = policyPath === undefined ? undefined : RouterPolicyConfig.load(policyPath);
  const runtime = given ?? (await DistributedRuntime.create(runtimeOptions));
  const log = runtime.log('frontend');
  const metrics = new FrontendMetrics(settings.metricsPrefix);
  const routerLog = runtime.log('frontend.router');
  const kvDeps = { runtime, metrics: new KvRouterMetrics(metrics.registry), log: routerLog, ...(policyConfig ? { policyConfig } : {}) };
  const routerOf = router ?? routerFactory(settings.routerMode, { settings: kvSettings, deps: kvDeps });
  const { activeDecodeBlocksThreshold: decode, activePrefillTokensThreshold: tokens, activePrefillTokensThresholdFrac: frac } = settings.busyThresholds;
  const routingOptions: ModelRoutingOptions = {
    runtime,
    log: routerLog,
    thresholds: {
      active_decode_blocks_threshold: decode ?? null,
      active_prefill_tokens_threshold: tokens ?? null,
      active_prefill_tokens_threshold_frac: frac ?? null,
    },
    ...(settings.sessionAffinity ? { affinity: settings.sessionAffinity } : {}),
  };
  if (settings.routerMode !== 'kv' && !router && (kvSettings.replicaSync || kvSettings.queueThreshold !== undefined || policyConfig)) {
    log.warn({ router_mode: settings.routerMode }, 'replica sync and the router queue apply in router mode kv only; ignored');
  }
  const thresholdsOn = Object.values(settings.busyThresholds).filter((v) => v !== undefined).length > 0;
  log.info({ ...settings.busyThresholds }, thresholdsOn ? 'busy-worker rejection enabled' : 'busy-worker rejection disabled: no threshold is set');
  const registry = new ModelRegistry({
    runtime,
    ...(settings.namespace === undefined ? {} : { namespace: settings.namespace }),
    routing: (name, card) => new ModelRouting(name, card, routerOf(name, card), routingOptions),
    cardFiles: new CardFiles({
      ...(settings.modelPath === undefined ? {} : { fallbackModelPath: settings.modelPath }),
      ...(runtimeOptions?.env ? { env: runtimeOptions.env } : {}),
    }),
    defaultParsers: { toolCallParser: settings.toolCallParser, reasoningParser: settings.reasoningParser },
    log: runtime.log('frontend.models'),
  });
  const inflight = new Set<Context>();
  let shuttingDown = false;
  const app = createHttpServer({
    registry,
    metrics,
    log,
    inflight,
    migrationLimit: settings.migrationLimit,
    migrationMaxSeqLen: settings.migrationMaxSeqLen,
    backendStreamTimeoutMs: settings.backendStreamTimeoutMs,
    forceIncludeUsage: settings.forceIncludeUsage,
    ignoreUnknownFields: settings.ignoreUnknownFields,
    reasoningField: settings.reasoningFieldName,
    overloadStatus: settings.overloadStatus,
    anthropicApi: settings.enableAnthropicApi,
    anthropicPrompt: { stripPreamble: settings.stripAnthropicPreamble },
    adminApi: settings.adminApi,
    keepAliveMs: settings.sseKeepAliveMs,
    maxDataUrlBytes: settings.maxDataUrlBytes,
    bodyLimitBytes: settings.bodyLimitBytes,
    requestTimeoutMs: settings.requestTimeoutMs,
    keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
    connections: { headersTimeoutMs: settings.headersTimeoutMs, maxConnections: settings.maxConnections, maxConnectionsPerIp: settings.maxConnectionsPerIp },
    ...(tls ? { tls } : {}),
    shuttingDown: () => shuttingDown,
  });
  try {
    await registry.start();
    await app.listen({ host: settings.host, port: settings.port });
  } catch (err) {
    await registry.close();
    if (!given) await runtime.shutdown();
    throw err;
  }
  const address = app.server.address() as AddressInfo;
  const shownHost = settings.host === '0.0.0.0' || settings.host === '::' ? '127.0.0.1' : settings.host;
  const url = `${tls ? 'https' : 'http'}://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${address.port}`;
  log.info({ url, router: router ? 'custom' : settings.routerMode, models: registry.all().map((m) => m.name) }, 'frontend listening');

  let closing: Promise<void> | undefined;
  const close = async () => {
    shuttingDown = true;
    const serverClosed = app.close();
    const deadline = Date.now() + settings.gracefulShutdownMs;
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
    host: settings.host,
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
