import type { Log } from '../logger.js';
import type { Transport } from '../request-plane/request-plane.js';
import { KeyExistsError, type KvStore } from './kv-store.js';
import {
  decodeEndpointRecord,
  decodeModelRecord,
  encodeRecord,
  endpointPrefix,
  type EndpointRecord,
  INSTANCES_BUCKET,
  instanceKey,
  MDC_BUCKET,
  type ModelRecord,
} from './records.js';

/** A change to the set of instances of one endpoint. */
export type InstanceEvent = { type: 'added'; record: EndpointRecord } | { type: 'removed'; instanceId: bigint };

/** A change to the model cards in discovery; `key` identifies the record (instance and suffix). */
export type ModelEvent = { type: 'added'; key: string; record: ModelRecord } | { type: 'removed'; key: string };

/**
 * Registration and lookup of endpoint instances and model cards, in Dynamo's layout, over any
 * {@link KvStore} backend.
 */
export class Discovery {
  readonly store: KvStore;
  readonly #log: Log;

  constructor(store: KvStore, log: Log) {
    this.store = store;
    this.#log = log;
  }

  /** This process's instance id. */
  get instanceId(): bigint {
    return this.store.instanceId;
  }

  /** Publishes this process's `Endpoint` record for `ns/comp/ep` (create, or overwrite our own). */
  async registerEndpoint(namespace: string, component: string, endpoint: string, transport: Transport): Promise<EndpointRecord> {
    // Field order as stock Dynamo writes it, so records are byte-identical.
    // We only speak JSON bodies; saying so makes stock callers send `payload_codec: "json"`.
    const record: EndpointRecord = { type: 'Endpoint', component, endpoint, namespace, instance_id: this.instanceId, transport, request_plane_codec: 'json' };
    await this.#write(INSTANCES_BUCKET, instanceKey(namespace, component, endpoint, this.instanceId), encodeRecord(record));
    this.#log.info({ namespace, component, endpoint, instance_id: this.instanceId.toString(16), transport }, 'registered endpoint instance');
    return record;
  }

  /** Removes this process's `Endpoint` record, so routers stop picking it. */
  async unregisterEndpoint(namespace: string, component: string, endpoint: string): Promise<void> {
    await this.store.delete(INSTANCES_BUCKET, instanceKey(namespace, component, endpoint, this.instanceId));
  }

  /** Publishes a `Model` record (model deployment card) for an endpoint of this process. */
  async registerModel(namespace: string, component: string, endpoint: string, card: Record<string, unknown>, suffix?: string): Promise<void> {
    const record: ModelRecord = {
      type: 'Model',
      component,
      endpoint,
      namespace,
      instance_id: this.instanceId,
      card_json: card,
      ...(suffix === undefined ? {} : { model_suffix: suffix }),
    };
    const key = instanceKey(namespace, component, endpoint, this.instanceId) + (suffix === undefined ? '' : `/${suffix}`);
    await this.#write(MDC_BUCKET, key, encodeRecord(record));
  }

  /** Removes this process's `Model` record for an endpoint (the one with `suffix`, if given). */
  async unregisterModel(namespace: string, component: string, endpoint: string, suffix?: string): Promise<void> {
    const key = instanceKey(namespace, component, endpoint, this.instanceId) + (suffix === undefined ? '' : `/${suffix}`);
    await this.store.delete(MDC_BUCKET, key);
  }

  /** The live instances of an endpoint. Records that fail to parse are logged and skipped. */
  async listInstances(namespace: string, component: string, endpoint: string): Promise<EndpointRecord[]> {
    const entries = await this.store.list(INSTANCES_BUCKET, endpointPrefix(namespace, component, endpoint));
    return entries.flatMap((entry) => this.#decode(entry.key, entry.value) ?? []);
  }

  /** The current instances as `added`, then every change, until `signal` aborts. */
  async *watchInstances(namespace: string, component: string, endpoint: string, signal: AbortSignal): AsyncGenerator<InstanceEvent> {
    const byKey = new Map<string, bigint>();
    for await (const event of this.store.watch(INSTANCES_BUCKET, endpointPrefix(namespace, component, endpoint), signal)) {
      if (event.type === 'put') {
        const record = this.#decode(event.key, event.value);
        if (record === undefined) continue;
        byKey.set(event.key, record.instance_id);
        yield { type: 'added', record };
      } else {
        const id = byKey.get(event.key);
        byKey.delete(event.key);
        if (id !== undefined) yield { type: 'removed', instanceId: id };
      }
    }
  }

  /**
   * The current model records (cards) under `namespace` (every namespace when omitted) as
   * `added`, then every change, until `signal` aborts. A key rewritten with a new card is `added`
   * again; a record that fails to parse is logged and reported as `removed` (no model there).
   */
  async *watchModels(signal: AbortSignal, namespace?: string): AsyncGenerator<ModelEvent> {
    const known = new Set<string>();
    for await (const event of this.store.watch(MDC_BUCKET, namespace === undefined ? '' : `${namespace}/`, signal)) {
      if (event.type === 'delete') {
        if (known.delete(event.key)) yield { type: 'removed', key: event.key };
        continue;
      }
      let record: ModelRecord;
      try {
        record = decodeModelRecord(event.value);
      } catch (err) {
        this.#log.warn({ key: event.key, err: (err as Error).message }, 'ignoring malformed model record');
        known.delete(event.key);
        yield { type: 'removed', key: event.key };
        continue;
      }
      known.add(event.key);
      yield { type: 'added', key: event.key, record };
    }
  }

  async #write(bucket: string, key: string, value: string): Promise<void> {
    try {
      await this.store.create(bucket, key, value);
    } catch (err) {
      // Our own key from an earlier registration of the same endpoint: overwrite it.
      if (!(err instanceof KeyExistsError)) throw err;
      await this.store.put(bucket, key, value);
    }
  }

  #decode(key: string, value: string): EndpointRecord | undefined {
    try {
      return decodeEndpointRecord(value);
    } catch (err) {
      this.#log.warn({ key, err: (err as Error).message }, 'ignoring malformed discovery record');
      return undefined;
    }
  }
}
