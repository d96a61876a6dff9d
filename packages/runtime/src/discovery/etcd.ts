/**
 * The `etcd` discovery backend, as stock Dynamo uses etcd: keys `{bucket}/{key}` bound to one
 * primary lease per process, whose id is the process's instance id. A crashed process stops
 * renewing the lease and etcd deletes its keys within the TTL; a graceful one revokes it.
 *
 * Beyond Dynamo (which shuts a worker down when its lease is lost), this store heals: when etcd
 * forgets the lease (restarted without its data, or a partition outlasted the TTL) it asks for a
 * lease with the *same* id and writes its keys again, so peers see the same instance come back.
 */

import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Etcd3, IDuplexStream, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse, IOptions, Watcher } from 'etcd3';

import { CannotConnect, Disconnected, DynamoException, InvalidArgument } from '../errors.js';
import { hexId } from '../json.js';
import { createLogging, type Log } from '../logger.js';
import { KeyExistsError, type KvEntry, type KvEvent, type KvStore } from './kv-store.js';
import { WatchFeed } from './watch-feed.js';

// etcd3 (with grpc-js and protobufjs) costs ~11-28 MB of RSS; load it only when etcd is used.
let lib: typeof import('etcd3');

/**
 * Options for {@link EtcdKvStore.connect}. The fields match the runtime config's `etcd` section
 * (`ETCD_ENDPOINTS`, `ETCD_AUTH_*`, `ETCD_LEASE_TTL`), so that object can be passed as is.
 */
export interface EtcdKvStoreOptions {
  /** Client URLs (default `['http://localhost:2379']`). */
  endpoints?: readonly string[];
  /** User name for etcd auth (`ETCD_AUTH_USERNAME`). */
  username?: string;
  /** Password for etcd auth (`ETCD_AUTH_PASSWORD`); never logged. */
  password?: string;
  /** Path of the CA certificate (PEM) that signed the server's (`ETCD_AUTH_CA`). */
  caCert?: string;
  /** Path of the client certificate (PEM) for mutual TLS (`ETCD_AUTH_CLIENT_CERT`). */
  clientCert?: string;
  /** Path of the client key (PEM) for mutual TLS (`ETCD_AUTH_CLIENT_KEY`). */
  clientKey?: string;
  /** Primary lease TTL in seconds (default 10; etcd counts whole seconds). */
  leaseTtlSecs?: number;
  /** How long to keep trying to reach etcd at startup (default 120 s, Dynamo's). */
  connectTimeoutSecs?: number;
  /** Deadline of each unary etcd call (default 5000 ms). */
  callTimeoutMs?: number;
  /** Where lifecycle messages and warnings go (default: a `runtime.discovery.etcd` logger). */
  log?: Log;
  /**
   * Called once if the lease is gone for good: etcd refused to grant a lease with the same id, so
   * this process can no longer keep its identity. Dynamo shuts a worker down in that case.
   */
  onLeaseLost?: (err: DynamoException) => void;
}

type FaultHandling = NonNullable<IOptions['faultHandling']>;
type HostPolicy = ReturnType<NonNullable<FaultHandling['host']>>;
type Backoff = NonNullable<FaultHandling['watchBackoff']>;
type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

// etcd3 puts a circuit breaker in front of every host that refuses calls for 5 s after three
// failures. With one etcd that turns a 1 s restart into 5+ s of refused keep-alives and
// re-registrations; we retry on our own schedule instead.
const passThroughPolicy = {
  execute: <T>(fn: (context: { signal: AbortSignal }) => PromiseLike<T> | T) => Promise.resolve().then(() => fn({ signal: new AbortController().signal })),
} as unknown as HostPolicy;

// Watch streams reconnect after 100 ms, backing off to at most 1 s, so watchers resync quickly
// after etcd comes back (etcd3's default backs off to 30 s).
function watchBackoff(ms: number): Backoff {
  return { duration: ms, next: () => watchBackoff(Math.min(ms * 2, 1000)) };
}

/** `http://user:secret@host:2379` → `http://host:2379`: endpoints go into messages, secrets must not. */
function redactEndpoint(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    if (url.username === '' && url.password === '') return endpoint;
    url.username = '';
    url.password = '';
    return url.toString().replace(/\/$/, '');
  } catch {
    return endpoint.replace(/\/\/[^@/]*@/, '//');
  }
}

function isConnectionError(err: unknown): boolean {
  return (
    err instanceof Error &&
    (lib.isRecoverableError(err) ||
      err instanceof lib.GRPCUnavailableError ||
      err instanceof lib.GRPCDeadlineExceededError ||
      err.name === 'BrokenCircuitError')
  );
}

function isAuthError(err: unknown): boolean {
  return err instanceof lib.EtcdAuthenticationFailedError || err instanceof lib.EtcdPermissionDeniedError || err instanceof lib.GRPCUnauthenticatedError;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function readPem(path: string | undefined, what: string): Promise<Buffer | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readFile(path);
  } catch (err) {
    throw new InvalidArgument(`etcd TLS: cannot read the ${what} at ${path}: ${(err as { code?: string }).code ?? message(err)}`, { cause: err });
  }
}

/**
 * The `etcd` {@link KvStore}. Open it with {@link EtcdKvStore.connect}, which grants the primary
 * lease; `instanceId` is that lease's id for the life of the store.
 */
export class EtcdKvStore implements KvStore {
  readonly kind = 'etcd';
  readonly instanceId: bigint;
  /** The endpoints, as given but without any user info. */
  readonly endpoints: readonly string[];
  readonly #client: Etcd3;
  /** The lease id in the decimal form etcd3 speaks. */
  readonly #leaseId: string;
  readonly #ttlSecs: number;
  readonly #callTimeoutMs: number;
  readonly #log: Log;
  readonly #onLeaseLost: ((err: DynamoException) => void) | undefined;
  /** Every key this store wrote and has not deleted (full key → value): re-put after lease loss. */
  readonly #owned = new Map<string, string>();
  readonly #closing = new AbortController();
  readonly #watchCancels = new Set<Promise<void>>();
  readonly #keepAliveTimer: NodeJS.Timeout;
  #keepAlive: KeepAliveStream | undefined;
  #lastAck = Date.now();
  #recovering: Promise<void> | undefined;
  #ticking = false;
  #fatal: DynamoException | undefined;

  private constructor(
    client: Etcd3,
    leaseId: string,
    ttlSecs: number,
    callTimeoutMs: number,
    endpoints: readonly string[],
    log: Log,
    onLeaseLost: EtcdKvStoreOptions['onLeaseLost'],
  ) {
    this.#client = client;
    this.#leaseId = leaseId;
    // etcd lease ids are positive int64s; Dynamo reads them as u64.
    this.instanceId = BigInt.asUintN(64, BigInt(leaseId));
    this.#ttlSecs = ttlSecs;
    this.#callTimeoutMs = callTimeoutMs;
    this.endpoints = endpoints;
    this.#log = log;
    this.#onLeaseLost = onLeaseLost;
    // Three renewals per TTL (etcd's own clients' cadence): one lost renewal still leaves a second
    // chance before the lease expires.
    this.#keepAliveTimer = setInterval(() => void this.#keepAliveTick(), (ttlSecs * 1000) / 3);
    this.#keepAliveTimer.unref();
    void this.#keepAliveTick();
  }

  /**
   * Connects to etcd and grants this process's primary lease, retrying until `connectTimeoutSecs`
   * passes. Throws `CannotConnect` naming the endpoints (never the credentials) if etcd cannot be
   * reached or refuses the credentials, `InvalidArgument` for unreadable TLS files.
   */
  static async connect(options: EtcdKvStoreOptions = {}): Promise<EtcdKvStore> {
    const endpoints = options.endpoints?.length ? [...options.endpoints] : ['http://localhost:2379'];
    const shown = endpoints.map(redactEndpoint);
    const ttlSecs = Math.max(1, Math.ceil(options.leaseTtlSecs ?? 10));
    const callTimeoutMs = options.callTimeoutMs ?? 5000;
    const log = options.log ?? createLogging().child('runtime.discovery.etcd');
    const [ca, cert, key] = await Promise.all([
      readPem(options.caCert, 'CA certificate'),
      readPem(options.clientCert, 'client certificate'),
      readPem(options.clientKey, 'client key'),
    ]);
    const tls = ca !== undefined || cert !== undefined || key !== undefined;
    lib ??= await import('etcd3');
    const client = new lib.Etcd3({
      // User info in a URL is not how etcd auth works (ETCD_AUTH_* is); keep it out of the client.
      hosts: shown,
      ...(options.username !== undefined ? { auth: { username: options.username, password: options.password ?? '' } } : {}),
      // etcd3 types the CA as required, but grpc falls back to the system roots without one.
      ...(tls ? { credentials: { rootCertificate: ca as Buffer, privateKey: key, certChain: cert } } : {}),
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
      grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 1000 },
      faultHandling: { host: () => passThroughPolicy, watchBackoff: watchBackoff(100) },
    });

    const deadline = Date.now() + (options.connectTimeoutSecs ?? 120) * 1000;
    let warned = false;
    for (;;) {
      try {
        const granted = await client.leaseClient.leaseGrant({ TTL: ttlSecs, ID: 0 });
        const store = new EtcdKvStore(client, granted.ID, ttlSecs, callTimeoutMs, shown, log, options.onLeaseLost);
        log.info({ endpoints: shown, lease: hexId(store.instanceId), ttl_secs: ttlSecs }, 'connected to etcd; primary lease granted');
        return store;
      } catch (err) {
        const fatal = isAuthError(err) || !isConnectionError(err) || Date.now() >= deadline;
        if (fatal) {
          client.close();
          throw new CannotConnect(`cannot connect to etcd at ${shown.join(',')}: ${message(err)}`, { cause: err });
        }
        if (!warned) {
          warned = true;
          log.warn({ endpoints: shown, err: message(err) }, 'etcd not reachable yet; retrying');
        }
        await sleep(Math.min(500, Math.max(0, deadline - Date.now())));
      }
    }
  }

  async create(bucket: string, key: string, value: string): Promise<void> {
    const full = this.#fullKey(bucket, key);
    await this.#withLease(async () => {
      const result = await this.#client.if(full, 'Version', '==', 0).then(this.#client.put(full).value(value).lease(this.#leaseId)).commit();
      if (!result.succeeded) throw new KeyExistsError(bucket, key);
    });
    this.#owned.set(full, value);
  }

  async put(bucket: string, key: string, value: string): Promise<void> {
    const full = this.#fullKey(bucket, key);
    await this.#withLease(() => this.#client.put(full).value(value).lease(this.#leaseId).exec());
    this.#owned.set(full, value);
  }

  async delete(bucket: string, key: string): Promise<void> {
    const full = this.#fullKey(bucket, key);
    this.#owned.delete(full);
    await this.#call(() => this.#client.delete().key(full).exec());
  }

  async list(bucket: string, prefix = ''): Promise<KvEntry[]> {
    const { entries } = await this.#range(bucket, prefix);
    return entries;
  }

  async *watch(bucket: string, prefix: string, signal: AbortSignal): AsyncGenerator<KvEvent> {
    this.#assertOpen();
    const stop = AbortSignal.any([signal, this.#closing.signal]);
    if (stop.aborted) return;
    const full = this.#fullKey(bucket, prefix);
    const strip = bucket.length + 1;

    const feed = new WatchFeed(stop);
    const apply = (key: string, value: string | undefined) => feed.apply(key, value);

    // Each (re)attach lists the prefix, reports the difference to what the consumer has seen, and
    // watches from the next revision, so list + watch cover every change once. Events from a
    // superseded watcher are dropped by generation.
    let generation = 0;
    let watcher: Watcher | undefined;
    const attach = async (): Promise<void> => {
      const mine = ++generation;
      const { entries, revision } = await this.#range(bucket, prefix);
      if (mine !== generation || stop.aborted) return;
      const seen = new Set<string>();
      for (const entry of entries) {
        seen.add(entry.key);
        apply(entry.key, entry.value);
      }
      feed.retainOnly(seen);
      // A namespace of its own gives this watcher its own stream, opened now with the current auth
      // token. etcd3 shares one stream per namespace and never refreshes the token a stream was
      // opened with, so after an etcd restart with auth on, re-attaching on the old stream fails.
      const next = await this.#client
        .namespace('')
        .watch()
        .prefix(full)
        .startRevision((revision + 1n).toString())
        .create();
      let dropped = false;
      // An 'error' listener must stay attached for good: an EventEmitter throws unheard errors.
      next.on('error', (err) => {
        if (mine !== generation) return;
        this.#log.warn({ bucket, prefix, err: message(err) }, 'etcd watch cancelled by the server; resyncing');
        // etcd already dropped this watcher; a cancel request for it would never be answered.
        if (watcher === next) watcher = undefined;
        resync();
      });
      if (mine !== generation || stop.aborted) {
        this.#cancelWatcher(next);
        return;
      }
      watcher = next;
      next.on('put', (kv) => mine === generation && apply(kv.key.toString().slice(strip), kv.value.toString()));
      next.on('delete', (kv) => mine === generation && apply(kv.key.toString().slice(strip), undefined));
      next.on('disconnected', (err: unknown) => {
        if (!dropped) this.#log.debug({ bucket, prefix, err: message(err) }, 'etcd watch disconnected; will resync when it reconnects');
        dropped = true;
      });
      // etcd3 resumes from the last revision it saw, which is wrong if etcd lost its data (the
      // revision went backwards) or compacted it: start over from a fresh list instead.
      next.on('connected', () => {
        if (dropped && mine === generation) resync();
      });
    };

    let resyncing = false;
    let again = false;
    const resync = () => {
      if (stop.aborted) return;
      if (resyncing) {
        // Something broke while we were re-attaching: go round once more when this pass ends.
        again = true;
        return;
      }
      resyncing = true;
      void (async () => {
        let delay = 100;
        while (!stop.aborted) {
          if (watcher !== undefined) this.#cancelWatcher(watcher);
          watcher = undefined;
          again = false;
          try {
            await attach();
            if (!again) break;
          } catch (err) {
            this.#log.debug({ bucket, prefix, err: message(err) }, 'etcd watch resync failed; retrying');
            await sleep(delay, undefined, { signal: stop, ref: false }).catch(() => undefined);
            delay = Math.min(delay * 2, 1000);
          }
        }
        resyncing = false;
      })();
    };

    const detach = () => {
      generation = -1;
      if (watcher !== undefined) this.#cancelWatcher(watcher);
      watcher = undefined;
    };
    stop.addEventListener('abort', detach, { once: true });
    try {
      try {
        await attach();
      } catch (err) {
        throw this.#classify(err);
      }
      for await (const [event] of feed.events) yield event;
    } catch (err) {
      if (!stop.aborted) throw err;
    } finally {
      stop.removeEventListener('abort', detach);
      detach();
    }
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort();
    clearInterval(this.#keepAliveTimer);
    this.#keepAlive?.end();
    this.#keepAlive = undefined;
    // Let watch cancellations reach etcd before the connection goes, but never hang on them.
    await Promise.race([Promise.all(this.#watchCancels), sleep(1000, undefined, { ref: false })]);
    await this.#recovering;
    try {
      // Revoking deletes every key on the lease at once: peers see this instance leave now.
      await this.#client.leaseClient.leaseRevoke({ ID: this.#leaseId }, { deadline: Date.now() + 2000 });
      this.#log.info({ lease: hexId(this.instanceId) }, 'etcd lease revoked');
    } catch (err) {
      if (!(err instanceof lib.EtcdLeaseInvalidError)) {
        this.#log.warn({ lease: hexId(this.instanceId), err: message(err) }, 'could not revoke the etcd lease; its keys expire within the TTL');
      }
    }
    this.#owned.clear();
    this.#client.close();
  }

  #fullKey(bucket: string, key: string): string {
    return `${bucket}/${key}`;
  }

  async #range(bucket: string, prefix: string): Promise<{ entries: KvEntry[]; revision: bigint }> {
    const strip = bucket.length + 1;
    const res = await this.#call(() => this.#client.getAll().prefix(this.#fullKey(bucket, prefix)).exec());
    return {
      entries: res.kvs.map((kv) => ({ key: kv.key.toString().slice(strip), value: kv.value.toString() })),
      revision: BigInt(res.header.revision),
    };
  }

  #cancelWatcher(watcher: Watcher): void {
    const cancelled = watcher.cancel().catch(() => undefined);
    this.#watchCancels.add(cancelled);
    void cancelled.finally(() => this.#watchCancels.delete(cancelled));
  }

  /** Runs an etcd call, turning connection failures into `CannotConnect`. */
  async #call<T>(fn: () => Promise<T>): Promise<T> {
    this.#assertOpen();
    try {
      return await fn();
    } catch (err) {
      throw this.#classify(err);
    }
  }

  /** Runs a write that attaches the lease; if etcd no longer knows the lease, heals it and retries once. */
  async #withLease<T>(fn: () => Promise<T>): Promise<T> {
    this.#assertOpen();
    if (this.#recovering) await this.#awaitRecovery();
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof lib.EtcdLeaseInvalidError)) throw this.#classify(err);
      void this.#recover('a write found the lease gone');
      await this.#awaitRecovery();
      return this.#call(fn);
    }
  }

  /** Waits for a lease re-grant, but no longer than one call's deadline: writes fail rather than hang. */
  async #awaitRecovery(): Promise<void> {
    const recovering = this.#recovering;
    if (recovering === undefined) return;
    const timedOut = Symbol('timed out');
    const outcome = await Promise.race([recovering, sleep(this.#callTimeoutMs, timedOut, { ref: false })]);
    if (outcome === timedOut) {
      throw new CannotConnect(`etcd at ${this.endpoints.join(',')}: lease ${hexId(this.instanceId)} is being restored; try again`);
    }
  }

  #classify(err: unknown): unknown {
    if (err instanceof KeyExistsError || err instanceof DynamoException) return err;
    if (isConnectionError(err) || isAuthError(err)) {
      return new CannotConnect(`etcd at ${this.endpoints.join(',')}: ${message(err)}`, { cause: err });
    }
    return err;
  }

  #assertOpen(): void {
    if (this.#fatal) throw this.#fatal;
    if (this.#closing.signal.aborted) throw new Disconnected('etcd discovery store is closed');
  }

  /** One renewal; also notices a silent connection or an expired lease and starts recovery. */
  async #keepAliveTick(): Promise<void> {
    if (this.#closing.signal.aborted || this.#recovering || this.#fatal || this.#ticking) return;
    this.#ticking = true;
    try {
      await this.#renew();
    } finally {
      this.#ticking = false;
    }
  }

  async #renew(): Promise<void> {
    const ttlMs = this.#ttlSecs * 1000;
    const silentMs = Date.now() - this.#lastAck;
    if (silentMs > ttlMs) {
      // No answer for a whole TTL: etcd may have expired the lease meanwhile.
      void this.#recover(`no keep-alive answer for ${Math.round(silentMs)} ms`);
      return;
    }
    if (this.#keepAlive !== undefined && silentMs > (2 * ttlMs) / 3) {
      // Two renewals unanswered on an open stream: assume it is dead without an error and reopen.
      this.#keepAlive.end();
      this.#keepAlive = undefined;
    }
    try {
      this.#keepAlive ??= await this.#openKeepAlive();
      this.#keepAlive.write({ ID: this.#leaseId });
    } catch (err) {
      this.#keepAlive = undefined;
      this.#log.debug({ err: message(err) }, 'etcd keep-alive failed; will retry');
    }
  }

  async #openKeepAlive(): Promise<KeepAliveStream> {
    const stream = await this.#client.leaseClient.leaseKeepAlive();
    stream.on('data', (res: ILeaseKeepAliveResponse) => {
      if (Number(res.TTL) > 0) {
        this.#lastAck = Date.now();
      } else if (!this.#closing.signal.aborted) {
        void this.#recover('etcd no longer knows the lease');
      }
    });
    const drop = (err?: unknown) => {
      if (this.#keepAlive === stream) this.#keepAlive = undefined;
      if (err !== undefined) this.#log.debug({ err: message(err) }, 'etcd keep-alive stream closed');
    };
    stream.on('error', drop);
    stream.on('end', () => drop());
    return stream;
  }

  #recover(reason: string): Promise<void> {
    this.#recovering ??= this.#regrant(reason).finally(() => {
      this.#recovering = undefined;
    });
    return this.#recovering;
  }

  /** Asks etcd for a lease with our id until it agrees (or says it still has it), then re-puts our keys. */
  async #regrant(reason: string): Promise<void> {
    const lease = hexId(this.instanceId);
    this.#log.warn({ lease, reason }, 'etcd lease may be lost; re-granting it with the same id');
    this.#keepAlive?.end();
    this.#keepAlive = undefined;
    let delay = 100;
    while (!this.#closing.signal.aborted) {
      try {
        await this.#client.leaseClient.leaseGrant({ TTL: this.#ttlSecs, ID: this.#leaseId });
        for (const [key, value] of [...this.#owned]) {
          await this.#client.put(key).value(value).lease(this.#leaseId).exec();
        }
        this.#lastAck = Date.now();
        this.#log.info({ lease, keys: this.#owned.size }, 'etcd lease re-granted with the same id; keys re-registered');
        return;
      } catch (err) {
        if (message(err).includes('lease already exists')) {
          // etcd still has it (we were cut off, not forgotten): its keys are intact.
          this.#lastAck = Date.now();
          this.#log.info({ lease }, 'etcd lease still alive');
          return;
        }
        if (!isConnectionError(err) && !(err instanceof lib.EtcdLeaseInvalidError)) {
          const fatal = new CannotConnect(`etcd at ${this.endpoints.join(',')} refused to restore lease ${lease}: ${message(err)}`, { cause: err });
          this.#fatal = fatal;
          this.#log.error({ lease, err: message(err) }, 'etcd lease lost for good; this instance is no longer registered');
          this.#onLeaseLost?.(fatal);
          return;
        }
        this.#log.debug({ lease, err: message(err) }, 'etcd lease re-grant failed; retrying');
        await sleep(delay, undefined, { signal: this.#closing.signal, ref: false }).catch(() => undefined);
        delay = Math.min(delay * 2, 1000);
      }
    }
  }
}
