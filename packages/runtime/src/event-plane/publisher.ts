import { randomBytes } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Publisher as ZmqPublisher } from 'zeromq';
import type { KvStore } from '../discovery/kv-store.js';
import type { Log } from '../logger.js';
import type { NatsConnection } from '../wire/nats-connection.js';
import { resolveHost } from '../wire/host-address.js';
import { formatHostPort } from '../wire/socket-helpers.js';
import { EVENT_CHANNELS_BUCKET, eventChannelRecord, type EventTransport } from './records.js';
import { type EventScope, eventRecordKey, eventSubject } from './subject.js';
import { loadZmq } from './zmq.js';
import { zmqFrames } from './zmq-frames.js';

/** Which event plane carries events: stock 1.6.1 defaults to ZMQ. */
export type EventPlane = 'zmq' | 'nats';

/** What an {@link EventPublisher} needs. */
export interface EventPublisherOptions {
  plane: EventPlane;
  scope: EventScope;
  topic: string;
  store: KvStore;
  /** The NATS connection (NATS plane only). */
  nats?: () => Promise<NatsConnection>;
  /** The address advertised for the ZMQ socket (`DYN_EVENT_PLANE_HOST`); else this host's routable address. */
  host?: string;
  log: Log;
}

/** Builds the envelope of the next publication from the publisher's id and sequence. */
export type EnvelopeBuilder = (publisherId: bigint, sequence: bigint) => Uint8Array | null;

/** A random 53-bit id, as stock gives each publisher (it must survive JSON). */
function newPublisherId(): bigint {
  return randomBytes(8).readBigUInt64BE() & ((1n << 53n) - 1n);
}

/**
 * Publishes one topic of one endpoint on the event plane, as stock Dynamo does: over ZMQ, a PUB
 * socket of its own advertised in `v1/event_channels`; over NATS, a core publish to the topic's
 * subject (advertised too). Publications are numbered from 0. Sends never block the caller: a
 * ZMQ send waits its turn behind the previous one, and what a slow subscriber cannot take past
 * the high-water mark is dropped, as stock's zero send timeout does.
 */
export class EventPublisher {
  readonly publisherId = newPublisherId();
  readonly topic: string;
  readonly #options: EventPublisherOptions;
  #sequence = 0n;
  #zmq: ZmqPublisher | undefined;
  #nats: NatsConnection | undefined;
  #subject = '';
  #queue: Buffer[][] = [];
  #sending = false;
  #dropped = 0;
  #closed = false;

  private constructor(options: EventPublisherOptions) {
    this.#options = options;
    this.topic = options.topic;
  }

  /** Opens the transport and advertises it. */
  static async create(options: EventPublisherOptions): Promise<EventPublisher> {
    const publisher = new EventPublisher(options);
    await publisher.#open();
    return publisher;
  }

  async #open(): Promise<void> {
    const { plane, scope, topic, store } = this.#options;
    let transport: EventTransport;
    if (plane === 'zmq') {
      const { Publisher } = await loadZmq();
      this.#zmq = new Publisher({ sendHighWaterMark: 100_000, sendTimeout: 0, linger: 0 });
      // As stock: bound on every address of the advertised one's family.
      const advertised = this.#options.host ?? resolveHost(undefined, 'DYN_EVENT_PLANE_HOST').advertise;
      await this.#zmq.bind(isIPv6(advertised) ? 'tcp://[::]:0' : 'tcp://0.0.0.0:0');
      const port = new URL(this.#zmq.lastEndpoint!.replace('tcp://', 'http://')).port;
      transport = { kind: 'Zmq', config: { endpoint: `tcp://${formatHostPort(advertised, Number(port))}` } };
    } else {
      if (!this.#options.nats) throw new TypeError('the NATS event plane needs a NATS connection');
      this.#nats = await this.#options.nats();
      this.#subject = eventSubject(scope, topic);
      transport = { kind: 'Nats', config: { subject_prefix: this.#subject.slice(0, -(topic.length + 1)) } };
    }
    await store.put(EVENT_CHANNELS_BUCKET, eventRecordKey(scope, topic, this.publisherId), eventChannelRecord(scope, topic, this.publisherId, transport));
    this.#options.log.debug({ topic, publisher_id: this.publisherId.toString(16), transport }, 'event publisher ready');
  }

  /** Publications lost to a full ZMQ queue so far. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Publishes the envelope `build` makes for the next sequence number (nothing when it returns null). */
  publish(build: EnvelopeBuilder): void {
    if (this.#closed) return;
    const envelope = build(this.publisherId, this.#sequence);
    if (envelope === null) return;
    const sequence = this.#sequence;
    this.#sequence += 1n;
    if (this.#nats) {
      this.#nats.publish(this.#subject, envelope);
      return;
    }
    this.#queue.push(zmqFrames(this.topic, this.publisherId, sequence, envelope));
    if (!this.#sending) void this.#pump();
  }

  async #pump(): Promise<void> {
    this.#sending = true;
    while (this.#queue.length > 0 && this.#zmq && !this.#closed) {
      const frames = this.#queue.shift()!;
      try {
        await this.#zmq.send(frames);
      } catch (err) {
        this.#dropped += 1;
        if (this.#dropped === 1 || this.#dropped % 1000 === 0)
          this.#options.log.warn({ topic: this.topic, dropped: this.#dropped, err: (err as Error).message }, 'event plane send failed; publication dropped');
      }
    }
    this.#sending = false;
  }

  /** Withdraws the advertisement and closes the socket. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const { scope, topic, store } = this.#options;
    await store.delete(EVENT_CHANNELS_BUCKET, eventRecordKey(scope, topic, this.publisherId)).catch(() => undefined);
    this.#zmq?.close();
  }
}
