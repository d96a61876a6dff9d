import { decodeSessionBinding, encodeSessionBinding } from '@dynamo/core';
import type { ModelDeploymentCard } from '@dynamo/llm';
import { type DistributedRuntime, type EventScope, InvalidArgument, type Log, WorkerOverloaded } from '@dynamo/runtime';

import type { AgentSession } from './agent-session.js';
import { BusyMonitor } from './busy-monitor.js';
import { BusyThresholds, type BusyThresholdValues } from './busy-thresholds.js';
import { EndpointTopic, scopeKey } from './endpoint-topic.js';
import type { Candidate, RouteRequest, Router } from './router.js';
import { type AffinityMode, SessionAffinity, type SharedBinding } from './session-affinity.js';

/** Stock 1.6.1's topic of session bindings, shared by the frontends whenever affinity is on. */
export const SESSION_AFFINITY_TOPIC = 'session_affinity_events';

/** What every model's routing shares: the runtime, and the frontend's busy and affinity settings. */
export interface ModelRoutingOptions {
  runtime: DistributedRuntime;
  log: Log;
  /** The busy thresholds a model starts with (`--active-*-threshold*`). */
  thresholds: Partial<BusyThresholdValues>;
  /** Session affinity (`--router-session-affinity-ttl-secs`, `--router-session-affinity-mode`); off when absent. */
  affinity?: { ttlSecs: number; mode: AffinityMode };
}

/** The message stock answers with when every worker is busy. */
const ALL_BUSY = 'All workers are busy, please retry later';

/**
 * How one model's requests are placed, in stock 1.6.1's order: a request naming its instance
 * goes there; a session bound to a worker goes to it (see {@link SessionAffinity}); any other
 * request goes where the router chooses among the workers that are not busy (see
 * {@link BusyMonitor}), and 529s when all of them are.
 */
export class ModelRouting {
  readonly router: Router;
  /** The model's busy thresholds, changeable at run time (`/busy_threshold`). */
  readonly thresholds: BusyThresholds;
  readonly #monitor: BusyMonitor;
  readonly #affinity: SessionAffinity | undefined;
  /** Where bindings are shared with the model's other frontends (with affinity on). */
  readonly #bindingTopic: EndpointTopic | undefined;
  /** Requests holding a lease on a session binding → its key. */
  readonly #leases = new Map<string, string>();
  /** The instances serving the model now: a peer's binding to another is ignored. */
  readonly #instances = new Set<bigint>();
  readonly #writer: bigint;
  readonly #log: Log;

  constructor(model: string, card: ModelDeploymentCard, router: Router, options: ModelRoutingOptions) {
    this.router = router;
    this.thresholds = new BusyThresholds(options.thresholds);
    this.#monitor = new BusyMonitor(model, card, this.thresholds, options.runtime, options.log);
    this.#writer = options.runtime.discovery.instanceId;
    this.#log = options.log;
    if (options.affinity) {
      this.#affinity = new SessionAffinity(options.affinity.ttlSecs, options.affinity.mode, this.#writer, (key, binding) => this.#shareBinding(key, binding));
      this.#bindingTopic = new EndpointTopic(options.runtime, SESSION_AFFINITY_TOPIC, true, (envelope) => this.#applyBinding(envelope), options.log);
    }
    const { setBusyThresholds } = router;
    if (setBusyThresholds) {
      const batched = card.runtime_config.max_num_batched_tokens;
      const push = () => setBusyThresholds.call(router, this.thresholds.effective(batched == null ? null : Number(batched)));
      push();
      this.thresholds.onChange(push);
    }
  }

  /** An endpoint now serves the model. */
  addEndpoint(scope: EventScope): void {
    this.router.addEndpoint?.(scope);
    this.#monitor.addEndpoint(scope);
    this.#bindingTopic?.follow(scope);
  }

  /** An instance now serves the model. */
  addInstance(instanceId: bigint): void {
    this.#instances.add(instanceId);
  }

  /** An instance no longer serves the model. */
  removeInstance(instanceId: bigint): void {
    this.#instances.delete(instanceId);
    this.router.removeInstance?.(instanceId);
    this.#monitor.removeInstance(instanceId);
  }

  #shareBinding(key: string, binding: SharedBinding): void {
    if (binding.endpoint === undefined) return;
    const { instanceId: workerId, version } = binding;
    this.#bindingTopic?.publish(binding.endpoint, (pid, seq) =>
      encodeSessionBinding(pid, seq, Date.now(), { sessionId: key, workerId, sequence: version.sequence, writerId: version.writer }),
    );
  }

  #applyBinding(envelope: Uint8Array): void {
    let received: ReturnType<typeof decodeSessionBinding>;
    try {
      received = decodeSessionBinding(envelope);
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'a shared session binding did not decode; ignored');
      return;
    }
    const { sessionId, workerId, sequence, writerId } = received.binding;
    // Our own writes come back from the plane; bindings to workers this frontend does not know wait for their next use.
    if (writerId === this.#writer || !this.#instances.has(workerId)) return;
    this.#affinity?.applyShared(sessionId, workerId, { sequence, writer: writerId });
  }

  /**
   * The instance for `request` among `candidates` (never empty): its session's worker, else
   * the router's choice among the free ones (a promise when the router queues it). Throws
   * `WorkerOverloaded` when all are busy.
   */
  place(candidates: readonly Candidate[], request: RouteRequest, session: AgentSession | undefined): Candidate | Promise<Candidate> {
    const affinity = this.#affinity;
    const key = affinity && session ? SessionAffinity.key(session, false) : undefined;
    if (affinity && key !== undefined) {
      const bound = affinity.bound(key);
      if (bound !== undefined) {
        const at = request.failed.has(bound) ? undefined : candidates.find((c) => c.instanceId === bound);
        if (at && (affinity.mode === 'hard' || !this.#monitor.isBusy(bound))) {
          this.router.book?.(at, request);
          this.#lease(key, request.requestId, at);
          return at;
        }
        // Its worker left (or failed this request): the session starts over where it lands next.
        if (!at) affinity.invalidate(key);
      }
    }
    const { current } = request;
    const chosen = this.router.select(this.#free(candidates), { ...request, ...(current ? { current: () => this.#free(current()) } : {}) });
    if (key === undefined) return chosen;
    const bind = (c: Candidate) => {
      this.#lease(key, request.requestId, c);
      return c;
    };
    return chosen instanceof Promise ? chosen.then(bind) : bind(chosen);
  }

  /** The candidates that are not busy; throws `WorkerOverloaded` when none is. */
  #free(candidates: readonly Candidate[]): Candidate[] {
    const free = candidates.filter((c) => !this.#monitor.isBusy(c.instanceId));
    if (free.length === 0) throw new WorkerOverloaded(ALL_BUSY);
    return free;
  }

  /**
   * A request that names its instance goes to `candidate`; its session binds there. Throws
   * `InvalidArgument` when, in hard mode, its session is bound to another worker.
   */
  pin(candidate: Candidate, request: RouteRequest, session: AgentSession | undefined): Candidate {
    const { requestId } = request;
    const affinity = this.#affinity;
    const key = affinity && session ? SessionAffinity.key(session, true) : undefined;
    if (affinity && key !== undefined) {
      const bound = affinity.bound(key);
      if (affinity.mode === 'hard' && bound !== undefined && bound !== candidate.instanceId) {
        throw new InvalidArgument(`session ${session!.sessionId} is bound to worker ${bound}, not ${candidate.instanceId}`);
      }
      this.#lease(key, requestId, candidate);
    }
    this.router.book?.(candidate, request);
    return candidate;
  }

  #lease(key: string, requestId: string, at: Candidate): void {
    this.#affinity!.commit(key, at.instanceId, !this.#leases.has(requestId), scopeKey(at.client.path));
    this.#leases.set(requestId, key);
  }

  /** The worker answered that it has no room: it counts as busy for a moment. */
  overloaded(instanceId: bigint): void {
    this.#monitor.overloaded(instanceId);
  }

  /** The request's first output arrived. */
  firstOutput(requestId: string): void {
    this.router.firstOutput?.(requestId);
  }

  /** The request ended, however it ended. */
  finished(requestId: string): void {
    this.router.finished?.(requestId);
    const key = this.#leases.get(requestId);
    if (key === undefined) return;
    this.#leases.delete(requestId);
    this.#affinity?.release(key);
  }

  /** Sessions bound now (0 without affinity). */
  get sessions(): number {
    return this.#affinity?.size ?? 0;
  }

  /** The model is no longer served. */
  async close(): Promise<void> {
    this.#affinity?.close();
    await Promise.all([this.router.close?.(), this.#monitor.close(), this.#bindingTopic?.close()]);
  }
}
