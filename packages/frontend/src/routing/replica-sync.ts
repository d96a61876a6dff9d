import type { KvRouter as CoreKvRouter } from '@dynamo/core';
import type { DistributedRuntime, EventScope, Log } from '@dynamo/runtime';

import { EndpointTopic, scopeKey } from './endpoint-topic.js';

/** Stock 1.6.1's topic for what each KV router placed (`--router-replica-sync`). */
export const ACTIVE_SEQUENCES_TOPIC = 'active_sequences_events';

/**
 * Shares a KV router's active requests with the model's other frontends, as stock 1.6.1's
 * replica sync does on each worker endpoint's `active_sequences_events`: a placed request, its
 * prefill done, its end. Peers' events are always applied as far as stock does without sync
 * (workers' own prefill-done marks); with `enabled`, all of them, and this router's are
 * published. `onApplied` runs after a peer's events changed the loads.
 */
export class ReplicaSync {
  readonly #core: CoreKvRouter;
  readonly #enabled: boolean;
  readonly #routerId: bigint;
  readonly #log: Log;
  readonly #onApplied: () => void;
  readonly #topic: EndpointTopic;
  /** Request → the endpoint its worker is on (where its events go). */
  readonly #placed = new Map<string, string>();

  constructor(core: CoreKvRouter, runtime: DistributedRuntime, enabled: boolean, log: Log, onApplied: () => void) {
    this.#core = core;
    this.#enabled = enabled;
    this.#routerId = runtime.discovery.instanceId;
    this.#log = log;
    this.#onApplied = onApplied;
    this.#topic = new EndpointTopic(runtime, ACTIVE_SEQUENCES_TOPIC, enabled, (envelope) => this.#apply(envelope), log);
  }

  /** Follows (and with sync on, publishes to) the endpoint's topic. */
  follow(scope: EventScope): void {
    this.#topic.follow(scope);
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
    this.#placed.set(requestId, scopeKey(scope));
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
    if (key === undefined) return;
    // ZMQ carries stock's batch framing, NATS one event per message.
    const batch = this.#topic.zmq;
    this.#topic.publish(key, (pid, seq) => this.#core.replicaEventEnvelope(pid, seq, Date.now(), this.#routerId, requestId, kind, batch));
  }

  close(): Promise<void> {
    return this.#topic.close();
  }
}
