import { resolveShutdownSettings, sendOffThread, ShutdownPlanner } from '@dynamo/core';
import { registerLlm, type RegisteredModel, unregisterLlm } from '@dynamo/llm';
import { KvEventPublisher, LoadPublisher } from '@dynamo/llm/internal';
import {
  CannotConnect,
  DistributedRuntime,
  DynamoException,
  InvalidArgument,
  type Log,
  type Logging,
  type EventScope,
  parseEndpointPath,
  parseOrThrow,
  type ServedEndpoint,
  Unknown,
} from '@dynamo/runtime';
import { z } from 'zod';

import { LLMEngine } from '../engine.js';
import { loggingFromEnv } from '../logging.js';
import { type GenerateChunk, mergeChunks } from '../protocol/chunk.js';
import { type EngineConfig, EngineConfigSchema } from '../protocol/engine-config.js';
import { KvEventSourcesSchema } from '../protocol/kv-events.js';
import { type WorkerConfig, type WorkerConfigInput, workerConfig } from '../protocol/worker-config.js';
import { type WorkerEnvConfig, workerEnvConfig } from '../settings.js';
import { WorkerAdmin } from './admin-routes.js';
import { LoraRoutes } from './lora-routes.js';
import { KV_TRANSFER_ENDPOINT, kvTransferHandler, RuntimeKvTransfer } from './kv-transfer.js';
import { engineHandler } from './engine-handler.js';
import { EngineGate } from './engine-gate.js';
import { resolveHealthCheck } from './health-payload.js';
import { type LifecycleLabels, LifecycleMetrics } from './lifecycle-metrics.js';
import { SnapshotPublisher } from './snapshot-publisher.js';
import { modelRegistration, requireModelPath } from './registration.js';
import { type ShutdownHost, ShutdownRun } from './shutdown-executor.js';

type Env = Readonly<Record<string, string | undefined>>;
type ShutdownSettings = ReturnType<typeof resolveShutdownSettings>['settings'];

/** Options of {@link Worker}. */
export interface WorkerOptions {
  /**
   * A runtime to serve on (several workers in one process, tests). By default the Worker builds
   * one from the config and the environment, and shuts it down at the end.
   */
  runtime?: DistributedRuntime;
  /** Environment for `DYN_*` settings (default `process.env`). */
  env?: Env;
  /** Install SIGTERM/SIGINT handlers (default true); without them call {@link Worker.shutdown}. */
  handleSignals?: boolean;
  /** Ends the process on a hard exit (default `process.exit`). */
  exit?: (code: number) => void;
  /** The engine's name in logs and errors (default its class name). */
  engineName?: string;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Dynamo's snake_case `ShutdownConfig` from the camelCase one of a `WorkerConfig`. */
function shutdownConfig(config: WorkerConfig['shutdown']): Record<string, unknown> {
  return {
    total_secs: config.totalSecs,
    router_grace_secs: config.routerGraceSecs,
    inflight_timeout_secs: config.inflightTimeoutSecs,
    kv_transfer_timeout_secs: config.kvTransferTimeoutSecs,
    cleanup_timeout_secs: config.cleanupTimeoutSecs,
    kv_transfer_fallback: config.kvTransferFallback,
  };
}

/**
 * Serves one {@link LLMEngine} as a Dynamo worker, the way Dynamo's unified-backend Worker does:
 * connect the runtime, `start` the engine (timed as `model_load_time_seconds`), register its model
 * card, serve the endpoint, and on SIGTERM/SIGINT (or the endpoint ending) shut down gracefully in
 * stages under one budget: unregister → router grace → stop admission → in-flight requests →
 * `drain()` / KV quiescence → `cleanup()` once. The stages and their timing come from
 * `@dynamo/core`'s shutdown planner; this class performs what it asks. A shutdown that overruns
 * the budget exits the process with code 911; a second signal exits at once.
 */
export class Worker {
  readonly engine: LLMEngine;
  readonly config: WorkerConfig;
  readonly #options: WorkerOptions;
  readonly #env: Env;
  readonly #envConfig: WorkerEnvConfig;
  readonly #name: string;
  readonly #gate: EngineGate;
  readonly #logging: Logging;
  readonly #log: Log;
  readonly #settings: ShutdownSettings;
  #stopRequested = false;
  #onStop!: () => void;
  readonly #stopped = new Promise<void>((resolve) => (this.#onStop = resolve));
  #deadline: NodeJS.Timeout | undefined;
  /** When the shutdown budget runs out (`performance.now()`), once shutdown was asked for. */
  #deadlineAt: number | undefined;
  #shutdown: ShutdownRun | undefined;
  #signals = 0;
  #ran = false;

  constructor(engine: LLMEngine, config: WorkerConfig | WorkerConfigInput = {}, options: WorkerOptions = {}) {
    if (!(engine instanceof LLMEngine)) throw new InvalidArgument('Worker: engine must be an instance of an LLMEngine subclass');
    this.engine = engine;
    this.config = workerConfig(config);
    this.#options = options;
    this.#env = options.env ?? process.env;
    this.#envConfig = workerEnvConfig(this.#env);
    this.#name = options.engineName ?? engine.constructor.name;
    this.#gate = new EngineGate(engine, this.#name);
    this.#logging = options.runtime?.logging ?? loggingFromEnv(this.#env);
    this.#log = this.#logging.child('backend.worker');
    const resolved = resolveShutdownSettings(shutdownConfig(this.config.shutdown), { ...this.#env });
    for (const warning of resolved.warnings) this.#log.warn(warning);
    this.#settings = resolved.settings;
  }

  /** Starts a graceful shutdown, as SIGTERM does. */
  shutdown(): void {
    if (this.#stopRequested) return;
    this.#stopRequested = true;
    // The budget runs from the request, even while `start` is still loading the model.
    this.#deadlineAt = performance.now() + this.#settings.total_ms;
    this.#deadline = setTimeout(() => this.#hardExit(), this.#settings.total_ms);
    this.#deadline.unref();
    this.#onStop();
  }

  /**
   * Runs the worker until it has shut down. Resolves when shutdown completed; rejects with a Dynamo
   * error (naming the engine when it failed) after cleaning the engine up.
   */
  async run(): Promise<void> {
    if (this.#ran) throw new InvalidArgument('Worker.run() may be called only once');
    this.#ran = true;
    this.#validate();
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.#signals++ > 0) {
        this.#log.warn({ signal }, `${signal} received again; exiting without waiting`);
        this.#exit(130);
        return;
      }
      this.#log.info({ signal }, `${signal} received`);
      this.shutdown();
    };
    const signals = this.#options.handleSignals !== false;
    if (signals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    try {
      const runtime = this.#options.runtime ?? (await this.#connect());
      try {
        await this.#serve(runtime);
      } finally {
        // Safety net: a no-op unless something failed between `start` and the shutdown stages.
        await this.#gate.cleanup(this.#settings.cleanup_timeout_ms);
        if (!this.#options.runtime) await runtime.shutdown({ drainTimeoutMs: 0 });
      }
    } finally {
      clearTimeout(this.#deadline);
      if (signals) {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    }
  }

  #validate(): void {
    requireModelPath(this.config);
    const { modelInput, routeToEncoder, disaggregationMode } = this.config;
    if (modelInput !== 'Tokens')
      throw new InvalidArgument(`an LLMEngine takes Tokens input (preprocessed requests), but WorkerConfig.modelInput is '${modelInput}'`);
    if (routeToEncoder && disaggregationMode !== 'agg' && disaggregationMode !== 'prefill') {
      throw new InvalidArgument(`routeToEncoder is allowed only for agg and prefill workers, not '${disaggregationMode}'`);
    }
  }

  async #connect(): Promise<DistributedRuntime> {
    try {
      return await DistributedRuntime.create({
        env: this.#env,
        logging: this.#logging,
        overrides: {
          discoveryBackend: this.config.discoveryBackend as 'file',
          requestPlane: this.config.requestPlane,
          ...(this.config.eventPlane === undefined ? {} : { eventPlane: this.config.eventPlane }),
        },
      });
    } catch (err) {
      if (err instanceof DynamoException) throw err;
      throw new CannotConnect(`distributed runtime: ${message(err)}`, { cause: err });
    }
  }

  async #serve(runtime: DistributedRuntime): Promise<void> {
    const log = this.#log;
    if (this.#stopRequested) {
      log.info('Shutdown signal observed before engine.start(); exiting cleanly');
      this.#gate.shutdownBeforeStart();
      return;
    }
    const began = performance.now();
    const engineConfig = this.#checkEngineConfig(await this.#gate.start(runtime.instanceId));
    const loadSecs = (performance.now() - began) / 1000;
    const registration = modelRegistration(engineConfig, this.config);
    const { namespace, component, endpoint: endpointName } = this.config;
    const metrics = new LifecycleMetrics(runtime, {
      dynamo_namespace: namespace,
      dynamo_component: component,
      dynamo_endpoint: endpointName,
      model: engineConfig.model,
      model_name: registration.servedName,
    });
    metrics.modelLoaded(loadSecs);
    // The engine's own registerPrometheus metrics carry the worker's labels too (empty ones left out, as stock does).
    runtime.metrics.engineLabels = Object.fromEntries(Object.entries(metrics.labels).filter(([, v]) => v !== ''));
    const kvScope = this.#kvScope();
    const load = await this.#componentMetrics(runtime, metrics.labels, kvScope);
    log.info({ engine: this.#name, model: engineConfig.model, seconds: Number(loadSecs.toFixed(3)) }, 'engine started');
    if (this.#stopRequested) {
      log.info('Shutdown signal observed during engine.start(); running orchestrator');
      return this.#orchestrate(undefined, metrics);
    }

    const endpoint = runtime.namespace(namespace).component(component).endpoint(endpointName);
    let registered: RegisteredModel;
    try {
      registered = await registerLlm(registration.modelInput, registration.modelType, endpoint, registration.modelPath, registration.options);
    } catch (err) {
      if (err instanceof DynamoException) throw err;
      throw new Unknown(`model attach: ${message(err)}`, { cause: err });
    }
    let kvEvents: KvEventPublisher[] = [];
    try {
      if (this.config.enableKvRouting)
        kvEvents = await this.#kvEvents(runtime, kvScope, registered.card.kv_cache_block_size, registered.card.runtime_config.enable_local_indexer);
    } catch (err) {
      await registered.unregister().catch(() => {});
      throw err;
    }
    let transfer: { kv: RuntimeKvTransfer; served?: ServedEndpoint } | undefined;
    try {
      transfer = await this.#kvTransfer(runtime);
    } catch (err) {
      await Promise.all([registered.unregister().catch(() => {}), ...kvEvents.map((p) => p.close())]);
      throw err;
    }
    const healthCheck = await resolveHealthCheck(this.engine, this.config.healthCheckPayload ?? this.#envConfig.health.payload, log);
    const handler = engineHandler(this.engine, { log: runtime.log('backend.engine'), engineName: this.#name });
    let served: ServedEndpoint;
    try {
      // Token chunks an engine yields in one turn of the event loop leave as one frame; a
      // stream's first leaves from a helper thread (see ServeOptions.offThreadSend).
      const mergeItems = (held: unknown, next: unknown) => mergeChunks(held as GenerateChunk, next as GenerateChunk);
      served = await endpoint.serveEndpoint(handler, { mergeItems, offThreadSend: sendOffThread, ...(healthCheck && { healthCheck }) });
    } catch (err) {
      await Promise.all([registered.unregister().catch(() => {}), transfer?.served?.stop({ drainTimeoutMs: 0 })]);
      throw new Unknown(`serve: ${message(err)}`, { cause: err });
    }
    log.info(
      { model: registration.servedName, endpoint: `${namespace}.${component}.${endpointName}`, instance_id: runtime.instanceId.toString(16) },
      `Serving ${registration.servedName} on ${namespace}.${component}.${endpointName}`,
    );
    let admin: WorkerAdmin | undefined;
    let loras: LoraRoutes | undefined;
    try {
      const times = { graceMs: this.#settings.router_grace_ms, inflightTimeoutMs: this.#settings.inflight_timeout_ms };
      admin = runtime.systemStatus && WorkerAdmin.serve(this.engine, this.#name, runtime.systemStatus, served, runtime.log('backend.admin'), times);
      if (runtime.systemStatus && this.engine.loadLora !== LLMEngine.prototype.loadLora) {
        const cards = {
          register: async (name: string) => {
            await registerLlm(registration.modelInput, registration.modelType, endpoint, registration.modelPath, {
              ...registration.options,
              checkTokenizer: false,
              lora: { name },
            });
          },
          unregister: (name: string) => unregisterLlm(endpoint, name),
        };
        const { enabled, cacheDir } = this.#envConfig.lora;
        loras = new LoraRoutes(this.engine, runtime.systemStatus, cards, runtime.log('backend.lora'), enabled, {
          env: this.#env,
          ...(cacheDir && { cacheDir }),
        });
      }
    } catch (err) {
      await served.stop({ drainTimeoutMs: 0 });
      throw new InvalidArgument(message(err), { cause: err });
    }

    const why = await Promise.race([served.closed.then(() => 'endpoint' as const), this.#stopped.then(() => 'signal' as const)]);
    log.info(why === 'signal' ? 'Received shutdown signal; running graceful orchestration' : 'Endpoint completed gracefully; running shutdown orchestration');
    admin?.beginShutdown();
    await this.#orchestrate(served, metrics);
    admin?.close();
    loras?.close();
    await served.stop({ drainTimeoutMs: 0 });
    await transfer?.served?.stop({ drainTimeoutMs: 0 });
    await Promise.all([...kvEvents.map((p) => p.close()), load?.close(), transfer?.kv.close()]);
  }

  /**
   * A prefill or decode worker's KV transfer, handed to the engine; a prefill worker whose engine
   * exports states also serves them on the `kv_transfer` endpoint, up to the end of its shutdown
   * (decode workers still pull what it prefilled while it drains).
   */
  async #kvTransfer(runtime: DistributedRuntime): Promise<{ kv: RuntimeKvTransfer; served?: ServedEndpoint } | undefined> {
    const { disaggregationMode, namespace, component } = this.config;
    if (disaggregationMode !== 'prefill' && disaggregationMode !== 'decode') return undefined;
    const { maxBytes } = this.#envConfig.kvTransfer;
    const kv = new RuntimeKvTransfer(runtime, { namespace, component }, maxBytes);
    this.engine.attachKvTransfer(kv);
    if (disaggregationMode === 'decode' || this.engine.exportKvState === LLMEngine.prototype.exportKvState) return { kv };
    const endpoint = runtime.namespace(namespace).component(component).endpoint(KV_TRANSFER_ENDPOINT);
    return { kv, served: await endpoint.serveEndpoint(kvTransferHandler(this.engine, maxBytes)) };
  }

  /** Where the router keeps this worker's KV state: `kvStateEndpoint` when set, else the serving endpoint. */
  #kvScope(): EventScope {
    const { namespace, component, endpoint, kvStateEndpoint } = this.config;
    return kvStateEndpoint === undefined ? { namespace, component, endpoint } : parseEndpointPath(kvStateEndpoint);
  }

  /**
   * A KV event publisher per source the engine names, handed to it (push) or fed from its socket
   * (zmq); with the card's local indexer on, each also serves stock routers' recovery queries.
   */
  async #kvEvents(runtime: DistributedRuntime, scope: EventScope, blockSize: number, localIndexer: boolean): Promise<KvEventPublisher[]> {
    let sources;
    try {
      sources = parseOrThrow(KvEventSourcesSchema, await this.engine.kvEventSources(), 'kvEventSources()');
    } catch (err) {
      throw new InvalidArgument(`engine ${this.#name}: ${message(err)}`, { cause: err });
    }
    const publishers: KvEventPublisher[] = [];
    for (const source of sources) {
      const recovery = localIndexer ? { recovery: { namespace: this.config.namespace, component: this.config.component } } : {};
      const publisher = await KvEventPublisher.create(runtime, { scope, dpRank: source.dpRank ?? 0, blockSize, ...recovery });
      publishers.push(publisher);
      if (source.kind === 'push') source.onReady(publisher.events);
      else publisher.relayFrom(source.endpoint, source.topic ?? '');
    }
    if (publishers.length > 0)
      this.#log.info({ sources: publishers.length, block_size: blockSize, event_plane: runtime.config.eventPlane.plane }, 'publishing KV events');
    return publishers;
  }

  /**
   * The per-rank KV cache gauges, when the engine reports ranks. With KV routing on, the engine
   * gets their publisher and each snapshot's used blocks go to routers as load (the returned
   * publisher, to close at the end).
   */
  async #componentMetrics(runtime: DistributedRuntime, labels: LifecycleLabels, scope: EventScope): Promise<LoadPublisher | undefined> {
    let ranks: number[];
    try {
      ranks = parseOrThrow(z.array(z.uint32()), this.engine.componentMetricsDpRanks(), 'componentMetricsDpRanks()');
    } catch (err) {
      throw new InvalidArgument(`engine ${this.#name}: ${message(err)}`, { cause: err });
    }
    if (ranks.length === 0) return undefined;
    if (!this.config.enableKvRouting) {
      // The gauges still exist (seeded at 0, as stock does); nobody publishes to them.
      new SnapshotPublisher(runtime, labels, ranks);
      return undefined;
    }
    const load = await LoadPublisher.create(runtime, scope);
    this.engine.attachSnapshotPublisher(new SnapshotPublisher(runtime, labels, ranks, (rank, used) => load.update(rank, { kvUsedBlocks: used })));
    return load;
  }

  #checkEngineConfig(config: unknown): EngineConfig {
    try {
      return parseOrThrow(EngineConfigSchema, config, 'EngineConfig');
    } catch (err) {
      throw new InvalidArgument(`engine ${this.#name}: start() returned an invalid EngineConfig: ${message(err)}`, { cause: err });
    }
  }

  /** Runs the shutdown stages; `served` is undefined when shutdown came before serving. */
  async #orchestrate(served: ServedEndpoint | undefined, metrics: LifecycleMetrics): Promise<void> {
    if (!this.#stopRequested) this.shutdown();
    const planner = new ShutdownPlanner(this.#settings, {
      served: served !== undefined,
      prefill: this.config.disaggregationMode === 'prefill',
      engine_kv_transfer_fallback: this.config.shutdown.kvTransferFallback ?? null,
      drain: this.engine.drain !== LLMEngine.prototype.drain,
    });
    this.#shutdown = new ShutdownRun(planner, this.#host(served, metrics));
    this.#shutdown.begin();
    await this.#shutdown.done;
  }

  #host(served: ServedEndpoint | undefined, metrics: LifecycleMetrics | undefined): ShutdownHost {
    const log = this.#log;
    const engine = this.engine;
    return {
      unregister: async () => served?.unregister(),
      stopAdmission: () => served?.stopAdmission(),
      waitInflight: async (timeoutMs) => {
        const left = served ? await served.drain(timeoutMs) : 0;
        // Requests still running when the whole budget is spent is the overrun the hard exit is
        // for; its timer and this wait's end fall in the same millisecond, and either may fire first.
        if (left > 0 && this.#deadlineAt !== undefined && performance.now() >= this.#deadlineAt - 1) this.#hardExit();
        return left;
      },
      drain: () => engine.drain(),
      isQuiescent: () => engine.isQuiescent(),
      cleanup: (timeoutMs) => this.#gate.cleanup(timeoutMs),
      record: (o) => {
        metrics?.stage(o.stage, o.reason, o.elapsed_ms / 1000);
        log.info(
          { stage: o.stage, reason: o.reason, elapsed_ms: o.elapsed_ms, remaining_ms: o.remaining_total_ms, ...(o.detail && { detail: o.detail }) },
          `shutdown stage ${o.stage}: ${o.reason}`,
        );
        if (o.stage === 'cleanup' && o.reason === 'completed') log.info({ engine: this.#name }, 'Engine cleanup complete');
      },
      log: (level, text) => log[level](text),
      exit: (code) => this.#exit(code),
    };
  }

  /** The budget ran out: the planner records the stage in progress, logs, and asks to exit. */
  #hardExit(): void {
    const run = this.#shutdown ?? new ShutdownRun(new ShutdownPlanner(this.#settings, {}), this.#host(undefined, undefined));
    run.deadline();
  }

  #exit(code: number): void {
    (this.#options.exit ?? ((c: number) => process.exit(c)))(code);
  }
}
