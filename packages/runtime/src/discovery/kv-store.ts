/**
 * The key-value store discovery is built on. Dynamo lays discovery out as buckets
 * (`v1/instances`, `v1/mdc`, ...) of keys whose values are JSON text; each backend (etcd, file,
 * mem) stores them its own way but with the same semantics, described here.
 */

/** One stored key and its value (JSON text). */
export interface KvEntry {
  key: string;
  value: string;
}

/** A change seen by a watch. */
export type KvEvent = { type: 'put'; key: string; value: string } | { type: 'delete'; key: string };

/** Thrown by {@link KvStore.create} when the key already exists. */
export class KeyExistsError extends Error {
  constructor(bucket: string, key: string) {
    super(`key already exists: ${bucket}/${key}`);
    this.name = 'KeyExistsError';
  }
}

/**
 * A discovery backend's storage. Every key this process writes is bound to its liveness (etcd:
 * the primary lease; file: an mtime refreshed by the owner; mem: the process), so a crashed
 * process's keys disappear within the TTL.
 */
export interface KvStore {
  /** Backend name: `etcd`, `file` or `mem`. */
  readonly kind: string;
  /** This process's instance id: the etcd lease id, or a random u64 for file and mem. */
  readonly instanceId: bigint;
  /** Creates `key` if absent; throws {@link KeyExistsError} if it exists. */
  create(bucket: string, key: string, value: string): Promise<void>;
  /** Creates or overwrites `key`. */
  put(bucket: string, key: string, value: string): Promise<void>;
  /** Removes `key` (no error if absent). */
  delete(bucket: string, key: string): Promise<void>;
  /** Live entries of `bucket` whose key starts with `prefix`. */
  list(bucket: string, prefix?: string): Promise<KvEntry[]>;
  /**
   * The current entries under `prefix` as `put` events, then every change, until `signal` aborts.
   * Keeps going across backend restarts (resyncing with puts/deletes for what changed meanwhile).
   */
  watch(bucket: string, prefix: string, signal: AbortSignal): AsyncIterable<KvEvent>;
  /** Removes this process's keys (revokes the lease / deletes its files) and releases resources. */
  close(): Promise<void>;
}
