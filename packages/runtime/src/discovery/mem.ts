/**
 * The `mem` discovery backend: an in-process map. Nothing reaches the wire, so it only serves
 * single-process setups (a frontend and a worker in one test). Stores that share a
 * {@link MemKvSpace} see each other's keys, the way processes sharing one etcd do.
 */

import { randomBytes } from 'node:crypto';
import { EventEmitter, on } from 'node:events';
import { Disconnected } from '../errors.js';
import { KeyExistsError, type KvEntry, type KvEvent, type KvStore } from './kv-store.js';

interface Slot {
  value: string;
  owner: MemKvStore;
}

/** One bucket-level change, as the space announces it to watchers. */
type SpaceChange = [bucket: string, event: KvEvent];

/**
 * A shared keyspace: the "server" that {@link MemKvStore}s in one process talk to. Give two stores
 * the same space to let them discover each other; give a test its own space to isolate it.
 */
export class MemKvSpace {
  readonly #buckets = new Map<string, Map<string, Slot>>();
  readonly #changes = new EventEmitter();

  constructor() {
    // One listener per active watch; a process may hold many.
    this.#changes.setMaxListeners(0);
  }

  /** @internal */
  bucket(name: string): Map<string, Slot> {
    let bucket = this.#buckets.get(name);
    if (bucket === undefined) {
      bucket = new Map();
      this.#buckets.set(name, bucket);
    }
    return bucket;
  }

  /** @internal */
  announce(bucket: string, event: KvEvent): void {
    this.#changes.emit('change', bucket, event);
  }

  /** @internal */
  buckets(): IterableIterator<[string, Map<string, Slot>]> {
    return this.#buckets.entries();
  }

  /** @internal Subscribes before the caller reads a snapshot, so no change falls in between. */
  subscribe(signal: AbortSignal): AsyncIterableIterator<SpaceChange> {
    return on(this.#changes, 'change', { signal }) as AsyncIterableIterator<SpaceChange>;
  }
}

/** The space a {@link MemKvStore} joins when none is given: one per process. */
export const defaultMemKvSpace = new MemKvSpace();

/** Options for {@link MemKvStore}. */
export interface MemKvStoreOptions {
  /** The keyspace to join (default {@link defaultMemKvSpace}). */
  space?: MemKvSpace;
  /** Fixes the instance id (default: a random u64, as Dynamo draws for `file` and `mem`). */
  instanceId?: bigint;
}

/** A random nonzero u64 from the OS's CSPRNG. */
export function randomInstanceId(): bigint {
  for (;;) {
    const id = randomBytes(8).readBigUInt64BE();
    if (id !== 0n) return id;
  }
}

/**
 * The `mem` {@link KvStore}. Keys belong to the store that last wrote them; `close()` removes them,
 * which is what a watcher in another store sees when "the process" goes away.
 */
export class MemKvStore implements KvStore {
  readonly kind = 'mem';
  readonly instanceId: bigint;
  readonly #space: MemKvSpace;
  readonly #closing = new AbortController();

  constructor(options: MemKvStoreOptions = {}) {
    this.#space = options.space ?? defaultMemKvSpace;
    this.instanceId = options.instanceId ?? randomInstanceId();
  }

  async create(bucket: string, key: string, value: string): Promise<void> {
    this.#assertOpen();
    const slots = this.#space.bucket(bucket);
    if (slots.has(key)) throw new KeyExistsError(bucket, key);
    this.#write(slots, bucket, key, value);
  }

  async put(bucket: string, key: string, value: string): Promise<void> {
    this.#assertOpen();
    this.#write(this.#space.bucket(bucket), bucket, key, value);
  }

  async delete(bucket: string, key: string): Promise<void> {
    this.#assertOpen();
    const slots = this.#space.bucket(bucket);
    if (slots.delete(key)) this.#space.announce(bucket, { type: 'delete', key });
  }

  async list(bucket: string, prefix = ''): Promise<KvEntry[]> {
    this.#assertOpen();
    const entries: KvEntry[] = [];
    for (const [key, slot] of this.#space.bucket(bucket)) {
      if (key.startsWith(prefix)) entries.push({ key, value: slot.value });
    }
    return entries;
  }

  async *watch(bucket: string, prefix: string, signal: AbortSignal): AsyncGenerator<KvEvent> {
    this.#assertOpen();
    const stop = AbortSignal.any([signal, this.#closing.signal]);
    if (stop.aborted) return;
    // Everything here is synchronous, so subscribing first and then reading the snapshot cannot
    // miss or reorder a change.
    const changes = this.#space.subscribe(stop);
    try {
      for (const entry of await this.list(bucket, prefix)) yield { type: 'put', ...entry };
      for await (const [changed, event] of changes) {
        if (changed === bucket && event.key.startsWith(prefix)) yield event;
      }
    } catch (err) {
      if (!stop.aborted) throw err;
    }
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort();
    // Deleting a key is what other stores observe as this "process" going away.
    for (const [name, slots] of this.#space.buckets()) {
      for (const [key, slot] of slots) {
        if (slot.owner !== this) continue;
        slots.delete(key);
        this.#space.announce(name, { type: 'delete', key });
      }
    }
  }

  #write(slots: Map<string, Slot>, bucket: string, key: string, value: string): void {
    slots.set(key, { value, owner: this });
    this.#space.announce(bucket, { type: 'put', key, value });
  }

  #assertOpen(): void {
    if (this.#closing.signal.aborted) throw new Disconnected('mem discovery store is closed');
  }
}
