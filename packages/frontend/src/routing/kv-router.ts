import { KvRouter as CoreKvRouter, type KvRouterOptions, type KvWorkerLoad } from '@dynamo/core';
import type { ModelDeploymentCard } from '@dynamo/llm';
import { CannotConnect, type DistributedRuntime, type EventScope, type EventSubscriber, type Log, WorkerOverloaded } from '@dynamo/runtime';

import type { EffectiveThresholds } from './busy-thresholds.js';
import type { KvRouterMetrics } from './kv-metrics.js';
import { KvSourceRecovery } from './kv-recovery.js';
import { type QueueClass, queueClassFor, type RouterPolicyConfig } from './policy-config.js';
import { ReplicaSync } from './replica-sync.js';
import { RequestQueue } from './request-queue.js';
import { type Candidate, fresh, type RouteRequest, type Router } from './router.js';
import { DEFAULT_MAX_BATCHED_TOKENS } from './busy-thresholds.js';

/**
 * The KV router's settings: stock's `--router-*` flags (block size: the card's unless set),
 * replica sync, and the deprecated queue flags.
 */
export type KvRouterSettings = Omit<KvRouterOptions, 'blockSize' | 'loraName' | 'activeDecodeBlocksThreshold' | 'activePrefillTokensThreshold'> & {
  blockSize?: number;
  /** Share active requests with the model's other frontends (`--router-replica-sync`). */
  replicaSync?: boolean;
  /** Queue while every worker has more prefill than this fraction of its batch (`--router-queue-threshold`). */
  queueThreshold?: number;
  /** The queue's order (`--router-queue-policy`). */
  queuePolicy?: 'fcfs' | 'wspt';
};

/** What a {@link KvAwareRouter} reads events from and reports to. */
export interface KvRouterDeps {
  runtime: DistributedRuntime;
  metrics: KvRouterMetrics;
  log: Log;
  /** Stock's `--router-policy-config`: the models' queue classes. */
  policyConfig?: RouterPolicyConfig;
}

/** How often a waiting queue looks again for room: a worker that joins is no event the router sees. */
const QUEUE_RECHECK_MS = 200;

/**
 * Stock Dynamo's KV-aware routing for one model: each worker's KV events (and load reports) feed
 * an index of the blocks it caches, and each request goes to the worker whose cached prefix,
 * weighed against the load this router has sent it, makes it cheapest. Without KV events
 * (`useKvEvents: false`) the router assumes a worker caches what it was last sent, for `ttlSecs`.
 * A worker's state is fetched whole from its recovery endpoint when it first appears and when
 * its events skip ids.
 * A worker past a busy threshold by this router's own count gets no request; when every worker
 * is, the request is refused with 529.
 *
 * With a queue class (`--router-queue-threshold`, `--router-policy-config`) a request waits while
 * every worker has more prompt tokens in prefill than the class allows, and leaves in the class's
 * order as prefills finish. With replica sync, the frontends of a model share what each placed.
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
  readonly #replicas: ReplicaSync;
  readonly #queueClass: QueueClass | undefined;
  readonly #queue: RequestQueue<Candidate> | undefined;
  readonly #maxBatched: number;
  readonly #unlist: () => void;
  /** The instances of the latest request, for the queue's room check. */
  #lastPool: readonly Candidate[] = [];
  #recheck: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(model: string, card: ModelDeploymentCard, settings: KvRouterSettings, deps: KvRouterDeps) {
    this.#model = model;
    this.#deps = deps;
    this.#useEvents = settings.useKvEvents !== false;
    const total = card.runtime_config.total_kv_blocks;
    this.#totalBlocks = total == null ? undefined : Number(total);
    const { replicaSync, queueThreshold, queuePolicy, ...core } = settings;
    this.#core = new CoreKvRouter({ ...core, blockSize: settings.blockSize ?? card.kv_cache_block_size });
    if (this.#useEvents) this.#recovery = new KvSourceRecovery(deps.runtime, (worker, rank, reply) => this.#core.applyRecovery(worker, rank, reply), deps.log);
    this.#replicas = new ReplicaSync(this.#core, deps.runtime, replicaSync === true, deps.log, () => this.#drain());
    const batched = card.runtime_config.max_num_batched_tokens;
    this.#maxBatched = batched == null ? DEFAULT_MAX_BATCHED_TOKENS : Number(batched);
    this.#queueClass = queueClassFor(model, deps.policyConfig, queueThreshold, queuePolicy ?? 'fcfs');
    const labels = { model: model.toLowerCase(), worker_type: 'decode', policy_class: this.#queueClass?.name ?? 'default' };
    if (this.#queueClass) {
      this.#queue = new RequestQueue<Candidate>(this.#queueClass.policy, this.#queueClass.name, this.#queueClass.limits, (pending, isl) => {
        deps.metrics.queuePending.set(labels, pending);
        deps.metrics.queuePendingIslTokens.set(labels, isl);
      });
      deps.metrics.queuePending.set(labels, 0);
    }
    this.#unlist = deps.metrics.addLoadSource(() => this.#core.workerLoads());
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
      () =>
        log.info(
          { model: this.#model, endpoint: key, kv_events: this.#useEvents, event_plane: runtime.config.eventPlane.plane },
          'KV router following the endpoint',
        ),
      (err: unknown) => log.error({ model: this.#model, endpoint: key, err: (err as Error).message }, 'KV router could not subscribe; routing on load alone'),
    );
    this.#subscriptions.set(
      key,
      subscribed.catch(() => []),
    );
    this.#recovery?.follow(scope);
    this.#replicas.follow(scope);
  }

  #onEvents(envelope: Uint8Array): void {
    const report = this.#core.applyEventEnvelope(envelope);
    const { log } = this.#deps;
    for (const gap of report.gaps) {
      log.warn(
        { model: this.#model, worker_id: gap.workerId.toString(16), dp_rank: gap.dpRank, missed: gap.missed },
        'KV events missed; asking the worker for its state',
      );
      this.#recovery?.gap(gap.workerId, gap.dpRank);
    }
    if (report.unknownParent > 0) log.debug({ model: this.#model, events: report.unknownParent }, 'KV stored events with an unknown parent were dropped');
  }

  /** A worker left: forget its cache and load. */
  removeInstance(instanceId: bigint): void {
    const blocks = this.#core.workerBlocks(instanceId);
    this.#core.removeWorker(instanceId);
    this.#drain();
    this.#deps.log.info({ model: this.#model, worker_id: instanceId.toString(16), cached_blocks: blocks }, 'worker removed from the KV index');
  }

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate | Promise<Candidate> {
    const pool = fresh(candidates, request.failed);
    this.#lastPool = pool;
    const queue = this.#queue;
    if (!queue || (queue.size === 0 && this.#hasRoom(pool))) return this.#route(pool, request);
    const isl = request.tokenIds?.length ?? 0;
    try {
      const waiting = queue.push(isl, pool.length, request.signal, () => {
        // The workers may have changed while it waited.
        const now = request.current ? fresh(request.current(), request.failed) : pool;
        if (now.length === 0) throw new CannotConnect(`no instance of model ${this.#model} is available`);
        this.#lastPool = now;
        return this.#route(now, request);
      });
      this.#startRecheck();
      return waiting;
    } catch (err) {
      this.#deps.metrics.queueBackpressure.inc({
        model: this.#model.toLowerCase(),
        worker_type: 'decode',
        policy_class: queue.policyClass,
        reason: (err as { details?: { limit_kind: string } }).details?.limit_kind === 'raw_isl_tokens' ? 'raw_isl_token_limit' : 'request_limit',
      });
      throw err;
    }
  }

  /**
   * A request that named its worker (or whose session is bound there) is counted on it, as
   * stock's kv mode does; 529 (`WorkerOverloaded`) when that worker is past a busy threshold.
   */
  book(candidate: Candidate, request: RouteRequest): void {
    try {
      this.#route([candidate], request);
    } catch (err) {
      if (err instanceof WorkerOverloaded) throw new WorkerOverloaded(`worker ${candidate.instanceId} of model ${this.#model} is busy; retry later`);
      throw err;
    }
  }

  /** Whether a worker of `pool` has room by the queue class: its prompt tokens in prefill at or under the threshold. */
  #hasRoom(pool: readonly Candidate[]): boolean {
    const c = this.#queueClass;
    if (!c) return true;
    const prefill = new Map<bigint, number>();
    for (const load of this.#core.workerLoads()) prefill.set(load.workerId, Math.max(prefill.get(load.workerId) ?? 0, load.prefillTokens));
    return pool.some((candidate) => {
      const tokens = prefill.get(candidate.instanceId) ?? 0;
      const busy =
        (c.prefillBusyThreshold !== undefined && tokens > c.prefillBusyThreshold) ||
        (c.prefillBusyThresholdFrac !== undefined && tokens > c.prefillBusyThresholdFrac * this.#maxBatched);
      return !busy;
    });
  }

  /** Lets queued requests go while a worker has room. */
  #drain(): void {
    this.#queue?.drain(() => this.#hasRoom(this.#lastPool));
  }

  #startRecheck(): void {
    if (this.#recheck) return;
    this.#recheck = setInterval(() => {
      this.#drain();
      if ((this.#queue?.size ?? 0) === 0) {
        clearInterval(this.#recheck);
        this.#recheck = undefined;
      }
    }, QUEUE_RECHECK_MS).unref();
  }

  #route(pool: readonly Candidate[], request: RouteRequest): Candidate {
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
      throw new WorkerOverloaded(`every worker of model ${this.#model} is busy; retry later`);
    }
    const chosen = pool.find((c) => c.instanceId === decision.workerId)!;
    this.#replicas.placed(request.requestId, chosen.client.path);
    const blockSize = this.#core.blockSize;
    metrics.requests.inc(labels);
    metrics.hitRate.observe(labels, decision.requestBlocks === 0 ? 0 : decision.overlapBlocks / decision.requestBlocks);
    metrics.selectedCachedTokens.inc(labels, decision.overlapBlocks * blockSize);
    metrics.bestCachedTokens.inc(labels, decision.bestOverlapBlocks * blockSize);
    log.debug(
      {
        router_mode: 'kv',
        request_id: request.requestId,
        lora_name: request.loraName,
        worker_id: decision.workerId.toString(16),
        dp_rank: decision.dpRank,
        overlap_blocks: decision.overlapBlocks,
        request_blocks: decision.requestBlocks,
        logit: decision.logit,
      },
      'Selected worker',
    );
    return chosen;
  }

  setBusyThresholds(thresholds: EffectiveThresholds): void {
    this.#core.setBusyThresholds(thresholds);
  }

  firstOutput(requestId: string): void {
    this.#core.prefillDone(requestId);
    this.#replicas.prefillDone(requestId);
    this.#drain();
  }

  finished(requestId: string): void {
    this.#replicas.ending(requestId);
    this.#core.free(requestId);
    this.#drain();
  }

  /** What this router counts on each worker rank: its own requests and, with replica sync, its peers'. */
  workerLoads(): KvWorkerLoad[] {
    return this.#core.workerLoads();
  }

  /** Blocks the index holds for a worker (for tests and diagnostics). */
  cachedBlocks(instanceId: bigint): number {
    return this.#core.workerBlocks(instanceId);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#recheck);
    this.#queue?.clear(new CannotConnect(`model ${this.#model} is no longer served`));
    this.#unlist();
    await this.#replicas.close();
    await this.#recovery?.close();
    for (const subs of this.#subscriptions.values()) for (const sub of await subs) await sub.close();
  }
}
