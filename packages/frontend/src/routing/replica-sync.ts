import type { KvRouter as CoreKvRouter } from '@dynamo/core';
import type { DistributedRuntime, EventPublisher, EventScope, EventSubscriber, Log } from '@dynamo/runtime';

/** Stock 1.6.1's topic for what each KV router placed (`--router-replica-sync`). */
export const ACTIVE_SEQUENCES_TOPIC = 'active_sequences_events';

const keyOf = (scope: EventScope) => `${scope.namespace}/${scope.component}/${scope.endpoint}`;

/**
 * Shares a KV router's active requests with the model's other frontends, as stock 1.6.1's
 * replica sync does on each worker endpoint's `active_sequences_events`: a placed request, its
 * prefill done, its end. Peers' events are always applied as far as stock does without sync
 * (workers' own prefill-done marks); with `enabled`, all of them, and this router's are
 * published. `onApplied` runs after a peer's events changed the loads.
 */
export class ReplicaSync {
  readonly #core: CoreKvRouter;
  readonly #runtime: DistributedRuntime;
  readonly #enabled: boolean;
  readonly #routerId: bigint;
  readonly #log: Log;
  readonly #onApplied: () => void;
  readonly #publishers = new Map<string, Promise<EventPublisher | undefined>>();
  readonly #ready = new Map<string, EventPublisher>();
  readonly #subscribers = new Map<string, Promise<EventSubscriber | undefined>>();
  /** Request → the endpoint its worker is on (where its events go). */
  readonly #placed = new Map<string, string>();
  #closed = false;

  constructor(core: CoreKvRouter, runtime: DistributedRuntime, enabled: boolean, log: Log, onApplied: () => void) {
    this.#core = core;
    this.#runtime = runtime;
    this.#enabled = enabled;
    this.#routerId = runtime.discovery.instanceId;
    this.#log = log;
    this.#onApplied = onApplied;
  }

  /** Follows (and with sync on, publishes to) the endpoint's topic. */
  follow(scope: EventScope): void {
    const key = keyOf(scope);
    if (this.#subscribers.has(key) || this.#closed) return;
    const warn = (what: string) => (err: unknown) => {
      this.#log.warn({ endpoint: key, err: (err as Error).message }, what);
      return undefined;
    };
    this.#subscribers.set(key, this.#runtime.eventSubscriber(scope, ACTIVE_SEQUENCES_TOPIC, (envelope) => this.#apply(envelope)).catch(warn('cannot follow the other routers\' active requests')));
    if (!this.#enabled) return;
    const opening = this.#runtime.eventPublisher(scope, ACTIVE_SEQUENCES_TOPIC).then((publisher) => {
      if (this.#closed) void publisher.close();
      else this.#ready.set(key, publisher);
      return publisher;
    }, warn('cannot publish active requests to the other routers'));
    this.#publishers.set(key, opening);
  }

  #apply(envelope: Uint8Array): void {
    try {
      const report = this.#core.applyReplicaEnvelope(envelope, this.#routerId, this.#enabled);
      if (report.applied > 0) this.#onApplied();
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'a replica sync event did not decode; ignored');
    }
  }

  /** The router placed `requestId` on a worker of `scope`. */
  placed(requestId: string, scope: EventScope): void {
    if (!this.#enabled) return;
    this.#placed.set(requestId, keyOf(scope));
    this.#publish(requestId, 'add');
  }

  /** The request's prompt is prefilled. */
  prefillDone(requestId: string): void {
    this.#publish(requestId, 'prefill_done');
  }

  /** The request ended: call before the router forgets it (the event describes it). */
  ending(requestId: string): void {
    this.#publish(requestId, 'free');
    this.#placed.delete(requestId);
  }

  #publish(requestId: string, kind: 'add' | 'free' | 'prefill_done'): void {
    const key = this.#placed.get(requestId);
    const publisher = key === undefined ? undefined : this.#ready.get(key);
    // Best effort, as in stock: before its publisher is open, an endpoint's events are not sent.
    if (!publisher) return;
    // ZMQ carries stock's batch framing, NATS one event per message.
    const batch = this.#runtime.config.eventPlane.plane === 'zmq';
    publisher.publish((pid, seq) => this.#core.replicaEventEnvelope(pid, seq, Date.now(), this.#routerId, requestId, kind, batch));
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const sub of this.#subscribers.values()) await (await sub)?.close();
    for (const pub of this.#publishers.values()) await (await pub)?.close();
  }
}
