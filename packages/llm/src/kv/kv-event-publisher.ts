import { KvEventBatcher } from '@dynamo/core';
import { type DistributedRuntime, type EventPublisher, type EventScope, InvalidArgument, type Log, type ServedEndpoint } from '@dynamo/runtime';
import { EVENT_SOURCES_BUCKET, eventRecordKey, eventSourceRecord, loadZmq, parseJson, stringifyJson } from '@dynamo/runtime/internal';
import type { Subscriber as ZmqSubscriber } from 'zeromq';

/** The topic stock routers read KV cache events from. */
export const KV_EVENTS_TOPIC = 'kv-events';

/**
 * What an engine reports its KV cache changes through (the publisher a `push` KV event source
 * receives). Block ids are the engine's own (any u64 that names the block until it is removed);
 * the router matches prompts on the hash of each block's tokens, computed here.
 */
export interface KvCacheEvents {
  /**
   * Full blocks now cached: `tokenIds` holds `blockIds.length × kvCacheBlockSize` tokens in
   * order; `parentId` is the block they follow (null or absent for a prompt's first block).
   * Throws `InvalidArgument` when the tokens do not fill the blocks. `loraName` is the LoRA adapter
   * the blocks were computed under (default: the publisher's `loraName`, usually none): its name
   * seeds their hashes as routers seed that adapter's prompts, so base and adapter blocks never match.
   */
  stored(event: { tokenIds: ArrayLike<number>; blockIds: readonly bigint[] | BigUint64Array; parentId?: bigint | null; loraName?: string }): void;
  /** Blocks evicted. */
  removed(blockIds: readonly bigint[] | BigUint64Array): void;
  /** Every block of this rank dropped (a cache reset). */
  cleared(): void;
}

/** What a {@link KvEventPublisher} speaks for. */
export interface KvEventPublisherOptions {
  /** The endpoint whose router reads the events (the serving endpoint, or `kvStateEndpoint`). */
  scope: EventScope;
  /** The data-parallel rank the events describe. */
  dpRank: number;
  /** The card's `kv_cache_block_size`. */
  blockSize: number;
  /** A LoRA adapter scoping the block hashes of every event that names none. */
  loraName?: string;
  /**
   * Serve the recovery endpoint stock routers query after missing events
   * (`worker_kv_query_source_{publisher id:x}`, on this component of the worker's namespace),
   * and name it in the event source (the card's `enable_local_indexer`). Without it the source
   * is live-only.
   */
  recovery?: { namespace: string; component: string };
}

const toU64s = (ids: readonly bigint[] | BigUint64Array) => (ids instanceof BigUint64Array ? ids : BigUint64Array.from(ids));

/**
 * Publishes one worker rank's KV cache events as stock Dynamo does: batches of `RouterEvent`s in
 * the event-plane envelope on `kv-events`, event ids from 1, plus the `v1/event_sources` record
 * stock routers require before they accept a publisher's batches. Events queued in one tick go
 * out as one batch.
 */
export class KvEventPublisher {
  readonly #publisher: EventPublisher;
  readonly #batcher: KvEventBatcher;
  readonly #options: KvEventPublisherOptions;
  readonly #runtime: DistributedRuntime;
  readonly #log: Log;
  #scheduled = false;
  #relays: ZmqSubscriber[] = [];
  /** zeromq's SUB socket class, for {@link relayFrom}. */
  readonly #Subscriber: typeof ZmqSubscriber;
  #recovery: ServedEndpoint | undefined;
  #closed = false;

  private constructor(runtime: DistributedRuntime, publisher: EventPublisher, options: KvEventPublisherOptions, Subscriber: typeof ZmqSubscriber) {
    this.#runtime = runtime;
    this.#Subscriber = Subscriber;
    this.#publisher = publisher;
    this.#options = options;
    this.#batcher = new KvEventBatcher({
      workerId: runtime.instanceId,
      blockSize: options.blockSize,
      ...(options.loraName === undefined ? {} : { loraName: options.loraName }),
    });
    this.#log = runtime.log('llm.kv-events');
  }

  /** Opens the publisher, serves the recovery endpoint when asked, and registers the event source. */
  static async create(runtime: DistributedRuntime, options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const publisher = await runtime.eventPublisher(options.scope, KV_EVENTS_TOPIC);
    const self = new KvEventPublisher(runtime, publisher, options, (await loadZmq()).Subscriber);
    if (options.recovery) {
      const { namespace, component } = options.recovery;
      const endpoint = runtime
        .namespace(namespace)
        .component(component)
        .endpoint(`worker_kv_query_source_${publisher.publisherId.toString(16)}`);
      const batcher = self.#batcher;
      self.#recovery = await endpoint.serveEndpoint(
        async function* (request: unknown) {
          // The router's WorkerKvQueryRequest, answered in one reply (stock's shape, not Annotated).
          yield parseJson(batcher.query(options.dpRank, stringifyJson(request)));
        },
        { plainItems: true },
      );
    }
    await runtime.discovery.store.put(
      EVENT_SOURCES_BUCKET,
      eventRecordKey(options.scope, KV_EVENTS_TOPIC, publisher.publisherId),
      eventSourceRecord(options.scope, KV_EVENTS_TOPIC, publisher.publisherId, runtime.instanceId, options.dpRank, self.#recovery?.record),
    );
    return self;
  }

  /** The envelope's publisher id. */
  get publisherId(): bigint {
    return this.#publisher.publisherId;
  }

  /** The push interface for the engine. */
  readonly events: KvCacheEvents = {
    stored: ({ tokenIds, blockIds, parentId, loraName }) => {
      try {
        this.#batcher.stored(this.#options.dpRank, Uint32Array.from(tokenIds), toU64s(blockIds), parentId ?? undefined, loraName);
      } catch (err) {
        throw new InvalidArgument(`KV event stored: ${(err as Error).message}`, { cause: err });
      }
      this.#schedule();
    },
    removed: (blockIds) => {
      this.#batcher.removed(this.#options.dpRank, toU64s(blockIds));
      this.#schedule();
    },
    cleared: () => {
      this.#batcher.cleared(this.#options.dpRank);
      this.#schedule();
    },
  };

  /**
   * Relays the vLLM-format batches an engine publishes on its own ZMQ PUB socket at `endpoint`
   * (topic `topic`, empty for all). A batch that does not decode is logged and skipped.
   */
  relayFrom(endpoint: string, topic = ''): void {
    const socket = new this.#Subscriber({ receiveHighWaterMark: 100_000, linger: 0 });
    socket.connect(endpoint);
    socket.subscribe(topic);
    this.#relays.push(socket);
    void (async () => {
      try {
        for await (const frames of socket) {
          // vLLM sends [topic, sequence, payload]; the payload is always last.
          const payload = frames[frames.length - 1];
          if (frames.length < 2 || !payload) {
            this.#log.warn({ endpoint, frames: frames.length }, 'dropping a KV event message without a payload frame');
            continue;
          }
          try {
            if (this.#batcher.relayVllm(this.#options.dpRank, payload) > 0) this.#schedule();
          } catch (err) {
            this.#log.warn({ endpoint, err: (err as Error).message }, 'dropping a KV event batch the engine sent');
          }
        }
      } catch (err) {
        if (!socket.closed) this.#log.warn({ endpoint, err: (err as Error).message }, 'KV event relay stopped');
      }
    })();
    this.#log.info({ endpoint, topic, dp_rank: this.#options.dpRank }, 'relaying engine KV events');
  }

  #schedule(): void {
    if (this.#scheduled || this.#closed) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.flush();
    });
  }

  /** Sends what is queued now. */
  flush(): void {
    this.#publisher.publish((publisherId, sequence) => this.#batcher.flush(publisherId, sequence, Date.now()));
  }

  /** Sends what is queued, then withdraws the event source and closes. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    for (const relay of this.#relays) relay.close();
    await this.#recovery?.stop({ drainTimeoutMs: 1000 });
    const key = eventRecordKey(this.#options.scope, KV_EVENTS_TOPIC, this.#publisher.publisherId);
    await this.#runtime.discovery.store.delete(EVENT_SOURCES_BUCKET, key).catch(() => undefined);
    await this.#publisher.close();
  }
}
