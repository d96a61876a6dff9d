import type { DistributedRuntime, EventPublisher, EventScope, EventSubscriber, Log } from '@dynamo/runtime';
import type { EnvelopeBuilder } from '@dynamo/runtime/internal';

/** An endpoint's `ns/component/endpoint`. */
export const scopeKey = (scope: EventScope): string => `${scope.namespace}/${scope.component}/${scope.endpoint}`;

/**
 * One event-plane topic on each worker endpoint of a model, as the frontends of a deployment
 * share routing state (stock's `active_sequences_events`, `session_affinity_events`): every
 * endpoint followed is subscribed to, and, when `publishes`, published to. Best effort: before an
 * endpoint's publisher is open, what would go there is dropped.
 */
export class EndpointTopic {
  readonly #runtime: DistributedRuntime;
  readonly #topic: string;
  readonly #publishes: boolean;
  readonly #onEnvelope: (envelope: Uint8Array) => void;
  readonly #log: Log;
  readonly #subscribers = new Map<string, Promise<EventSubscriber | undefined>>();
  readonly #publishers = new Map<string, Promise<EventPublisher | undefined>>();
  readonly #ready = new Map<string, EventPublisher>();
  #closed = false;

  constructor(runtime: DistributedRuntime, topic: string, publishes: boolean, onEnvelope: (envelope: Uint8Array) => void, log: Log) {
    this.#runtime = runtime;
    this.#topic = topic;
    this.#publishes = publishes;
    this.#onEnvelope = onEnvelope;
    this.#log = log;
  }

  /** Subscribes to (and opens a publisher on) the topic of `scope`, once. */
  follow(scope: EventScope): void {
    const key = scopeKey(scope);
    if (this.#subscribers.has(key) || this.#closed) return;
    const warn = (what: string) => (err: unknown) => {
      this.#log.warn({ endpoint: key, topic: this.#topic, err: (err as Error).message }, what);
      return undefined;
    };
    this.#subscribers.set(key, this.#runtime.eventSubscriber(scope, this.#topic, this.#onEnvelope).catch(warn('cannot follow what the other frontends share')));
    if (!this.#publishes) return;
    const opening = this.#runtime.eventPublisher(scope, this.#topic).then((publisher) => {
      if (this.#closed) void publisher.close();
      else this.#ready.set(key, publisher);
      return publisher;
    }, warn('cannot share with the other frontends'));
    this.#publishers.set(key, opening);
  }

  /** Publishes on the endpoint `key` (see {@link scopeKey}) what `build` makes, now. */
  publish(key: string, build: EnvelopeBuilder): void {
    this.#ready.get(key)?.publish(build);
  }

  /** Whether publications go out on the ZMQ plane (stock frames some of them differently there). */
  get zmq(): boolean {
    return this.#runtime.config.eventPlane.plane === 'zmq';
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const sub of this.#subscribers.values()) await (await sub)?.close();
    for (const pub of this.#publishers.values()) await (await pub)?.close();
  }
}
