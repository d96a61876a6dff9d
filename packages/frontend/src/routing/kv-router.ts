import { KvRouter as CoreKvRouter, type KvRouterOptions } from '@dynamo/core';
import type { ModelDeploymentCard } from '@dynamo/llm';
import { type DistributedRuntime, type EventScope, type EventSubscriber, type Log, WorkerOverloaded } from '@dynamo/runtime';

import type { KvRouterMetrics } from './kv-metrics.js';
import { KvSourceRecovery } from './kv-recovery.js';
import { type Candidate, fresh, type RouteRequest, type Router } from './router.js';

/** The KV router's settings: stock's `--router-*` flags (block size: the card's unless set). */
export type KvRouterSettings = Omit<KvRouterOptions, 'blockSize' | 'loraName'> & { blockSize?: number };

/** What a {@link KvAwareRouter} reads events from and reports to. */
export interface KvRouterDeps {
  runtime: DistributedRuntime;
  metrics: KvRouterMetrics;
  log: Log;
}

/**
 * Stock Dynamo's KV-aware routing for one model: each worker's KV events (and load reports) feed
 * an index of the blocks it caches, and each request goes to the worker whose cached prefix,
 * weighed against the load this router has sent it, makes it cheapest. Without KV events
 * (`useKvEvents: false`) the router assumes a worker caches what it was last sent, for `ttlSecs`.
 * A worker's state is fetched whole from its recovery endpoint when it first appears and when
 * its events skip ids.
 * When every worker is past a busy threshold the request is refused with 529.
 */
export class KvAwareRouter implements Router {
  readonly mode = 'kv';
  readonly #model: string;
  readonly #core: CoreKvRouter;
  readonly #deps: KvRouterDeps;
  readonly #useEvents: boolean;
  readonly #totalBlocks: number | undefined;
  readonly #subscriptions = new Map<string, Promise<EventSubscriber[]>>();
  readonly #recovery: KvSourceRecovery | undefined;
  #closed = false;

  constructor(model: string, card: ModelDeploymentCard, settings: KvRouterSettings, deps: KvRouterDeps) {
    this.#model = model;
    this.#deps = deps;
    this.#useEvents = settings.useKvEvents !== false;
    const total = card.runtime_config.total_kv_blocks;
    this.#totalBlocks = total == null ? undefined : Number(total);
    this.#core = new CoreKvRouter({ ...settings, blockSize: settings.blockSize ?? card.kv_cache_block_size });
    if (this.#useEvents) this.#recovery = new KvSourceRecovery(deps.runtime, (worker, rank, reply) => this.#core.applyRecovery(worker, rank, reply), deps.log);
  }

  /** Follows the KV events and load reports published for `scope` (once per endpoint). */
  addEndpoint(scope: EventScope): void {
    const key = `${scope.namespace}/${scope.component}/${scope.endpoint}`;
    if (this.#subscriptions.has(key) || this.#closed) return;
    const { runtime, log } = this.#deps;
    const subscribe = async () => {
      const subs: EventSubscriber[] = [];
      if (this.#useEvents) subs.push(await runtime.eventSubscriber(scope, 'kv-events', (e) => this.#onEvents(e)));
      subs.push(await runtime.eventSubscriber(scope, 'kv_metrics', (e) => this.#core.applyLoadEnvelope(e)));
      return subs;
    };
    const subscribed = subscribe();
    subscribed.then(
      () => log.info({ model: this.#model, endpoint: key, kv_events: this.#useEvents, event_plane: runtime.config.eventPlane.plane }, 'KV router following the endpoint'),
      (err: unknown) => log.error({ model: this.#model, endpoint: key, err: (err as Error).message }, 'KV router could not subscribe; routing on load alone'),
    );
    this.#subscriptions.set(key, subscribed.catch(() => []));
    this.#recovery?.follow(scope);
  }

  #onEvents(envelope: Uint8Array): void {
    const report = this.#core.applyEventEnvelope(envelope);
    const { log } = this.#deps;
    for (const gap of report.gaps) {
      log.warn({ model: this.#model, worker_id: gap.workerId.toString(16), dp_rank: gap.dpRank, missed: gap.missed }, 'KV events missed; asking the worker for its state');
      this.#recovery?.gap(gap.workerId, gap.dpRank);
    }
    if (report.unknownParent > 0) log.debug({ model: this.#model, events: report.unknownParent }, 'KV stored events with an unknown parent were dropped');
  }

  /** A worker left: forget its cache and load. */
  removeInstance(instanceId: bigint): void {
    const blocks = this.#core.workerBlocks(instanceId);
    this.#core.removeWorker(instanceId);
    this.#deps.log.info({ model: this.#model, worker_id: instanceId.toString(16), cached_blocks: blocks }, 'worker removed from the KV index');
  }

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate {
    const pool = fresh(candidates, request.failed);
    const started = performance.now();
    const decision = this.#core.route(
      request.requestId,
      Uint32Array.from(request.tokenIds ?? []),
      pool.map((c) => ({ workerId: c.instanceId, ...(this.#totalBlocks === undefined ? {} : { totalBlocks: this.#totalBlocks }) })),
      Math.random(),
      Date.now(),
      // An adapter's prompt is hashed under its name, so only that adapter's cached blocks match.
      request.loraName,
    );
    const { metrics, log } = this.#deps;
    const labels = { model: this.#model.toLowerCase() };
    metrics.overheadMs.observe(labels, performance.now() - started);
    if (decision === null) {
      metrics.busyRejections.inc(labels);
      throw new WorkerOverloaded(`every worker of model ${this.#model} is busy; retry later`);
    }
    const chosen = pool.find((c) => c.instanceId === decision.workerId)!;
    const blockSize = this.#core.blockSize;
    metrics.requests.inc(labels);
    metrics.hitRate.observe(labels, decision.requestBlocks === 0 ? 0 : decision.overlapBlocks / decision.requestBlocks);
    metrics.selectedCachedTokens.inc(labels, decision.overlapBlocks * blockSize);
    metrics.bestCachedTokens.inc(labels, decision.bestOverlapBlocks * blockSize);
    log.debug(
      { router_mode: 'kv', request_id: request.requestId, lora_name: request.loraName, worker_id: decision.workerId.toString(16), dp_rank: decision.dpRank, overlap_blocks: decision.overlapBlocks, request_blocks: decision.requestBlocks, logit: decision.logit },
      'Selected worker',
    );
    return chosen;
  }

  firstOutput(requestId: string): void {
    this.#core.prefillDone(requestId);
  }

  finished(requestId: string): void {
    this.#core.free(requestId);
  }

  /** Blocks the index holds for a worker (for tests and diagnostics). */
  cachedBlocks(instanceId: bigint): number {
    return this.#core.workerBlocks(instanceId);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#recovery?.close();
    for (const subs of this.#subscriptions.values()) for (const sub of await subs) await sub.close();
  }
}
