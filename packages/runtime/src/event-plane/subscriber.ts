import type { Subscriber as ZmqSubscriber } from 'zeromq';
import type { KvStore } from '../discovery/kv-store.js';
import type { Log } from '../logger.js';
import type { NatsConnection } from '../wire/nats-connection.js';
import type { EventPlane } from './publisher.js';
import { decodeEventChannelRecord, EVENT_CHANNELS_BUCKET } from './records.js';
import { type EventScope, eventRecordPrefix, eventSubject } from './subject.js';
import { loadZmq } from './zmq.js';
import { parseZmqFrames } from './zmq-frames.js';

/** What an {@link EventSubscriber} needs. */
export interface EventSubscriberOptions {
  plane: EventPlane;
  scope: EventScope;
  topic: string;
  store: KvStore;
  nats?: () => Promise<NatsConnection>;
  /** Called with each publication's msgpack envelope. */
  onEnvelope: (envelope: Uint8Array) => void;
  log: Log;
}

/**
 * Receives one topic of one endpoint from every publisher of it. Over NATS, one subscription to
 * the topic's subject; over ZMQ, a SUB socket per publisher found in `v1/event_channels`,
 * connected when its record appears and closed when it goes. Malformed messages are logged and
 * dropped; the stream goes on.
 */
export class EventSubscriber {
  readonly #options: EventSubscriberOptions;
  readonly #abort = new AbortController();
  readonly #sockets = new Map<string, ZmqSubscriber>();
  #unsubscribe: (() => void) | undefined;
  #ready: Promise<void> | undefined;
  /** zeromq's socket class, once the ZMQ plane is started. */
  #Subscriber: typeof ZmqSubscriber | undefined;

  private constructor(options: EventSubscriberOptions) {
    this.#options = options;
  }

  /** Starts receiving; resolves once the publishers already advertised are connected. */
  static async create(options: EventSubscriberOptions): Promise<EventSubscriber> {
    const subscriber = new EventSubscriber(options);
    await subscriber.#start();
    return subscriber;
  }

  async #start(): Promise<void> {
    const { plane, scope, topic, log } = this.#options;
    if (plane === 'nats') {
      if (!this.#options.nats) throw new TypeError('the NATS event plane needs a NATS connection');
      const sub = (await this.#options.nats()).subscribe(eventSubject(scope, topic), {
        callback: (err, msg) => {
          if (err) log.warn({ topic, err: err.message }, 'event subscription failed');
          else this.#deliver(msg.data);
        },
      });
      this.#unsubscribe = () => sub.unsubscribe();
      return;
    }
    this.#Subscriber = (await loadZmq()).Subscriber;
    const existing = await this.#options.store.list(EVENT_CHANNELS_BUCKET, eventRecordPrefix(scope, topic));
    for (const entry of existing) this.#connect(entry.key, entry.value);
    this.#ready = this.#watch();
  }

  async #watch(): Promise<void> {
    const { scope, topic, store, log } = this.#options;
    try {
      for await (const event of store.watch(EVENT_CHANNELS_BUCKET, eventRecordPrefix(scope, topic), this.#abort.signal)) {
        if (event.type === 'put') this.#connect(event.key, event.value);
        else this.#disconnect(event.key);
      }
    } catch (err) {
      if (!this.#abort.signal.aborted) log.error({ topic, err: (err as Error).message }, 'event channel watch ended');
    }
  }

  #connect(key: string, value: string): void {
    const { topic, log } = this.#options;
    if (this.#sockets.has(key)) return;
    let endpoint: string;
    try {
      const record = decodeEventChannelRecord(value);
      if (record.transport.kind !== 'Zmq') {
        log.warn({ key, transport: record.transport.kind }, 'event publisher is not on the ZMQ plane; start both sides with the same --event-plane');
        return;
      }
      endpoint = record.transport.config.endpoint;
    } catch (err) {
      log.warn({ key, err: (err as Error).message }, 'ignoring malformed event channel record');
      return;
    }
    const socket = new this.#Subscriber!({ receiveHighWaterMark: 100_000, linger: 0 });
    socket.connect(endpoint);
    socket.subscribe(topic);
    this.#sockets.set(key, socket);
    log.debug({ topic, endpoint }, 'connected to event publisher');
    void this.#read(socket, endpoint);
  }

  async #read(socket: ZmqSubscriber, endpoint: string): Promise<void> {
    const { topic, log } = this.#options;
    try {
      for await (const frames of socket) {
        const message = parseZmqFrames(frames, topic);
        if (message.ok) this.#deliver(message.envelope);
        else log.warn({ topic, endpoint, reason: message.reason }, 'dropping malformed event-plane message');
      }
    } catch (err) {
      if (!socket.closed) log.warn({ topic, endpoint, err: (err as Error).message }, 'event subscription failed');
    }
  }

  #deliver(envelope: Uint8Array): void {
    try {
      this.#options.onEnvelope(envelope);
    } catch (err) {
      this.#options.log.warn({ topic: this.#options.topic, err: (err as Error).message }, 'dropping event-plane message');
    }
  }

  #disconnect(key: string): void {
    const socket = this.#sockets.get(key);
    this.#sockets.delete(key);
    socket?.close();
  }

  /** Publishers this subscriber is connected to (ZMQ plane). */
  get connections(): number {
    return this.#sockets.size;
  }

  async close(): Promise<void> {
    this.#abort.abort();
    this.#unsubscribe?.();
    for (const key of [...this.#sockets.keys()]) this.#disconnect(key);
    await this.#ready;
  }
}
