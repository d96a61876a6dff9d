import { randomUUID } from 'node:crypto';
import type { Context } from '../context.js';
import { CannotConnect, ConnectionTimeout, InvalidArgument } from '../errors.js';
import type { Discovery } from '../discovery/discovery.js';
import type { EndpointRecord } from '../discovery/records.js';
import { stringifyJson } from '../json.js';
import type { Log } from '../logger.js';
import type { EndpointPath } from '../names.js';
import { controlHeader, encodeRequestEnvelope } from '../wire/control.js';
import type { RequestPlaneClient } from '../request-plane/request-plane.js';
import type { PendingResponse } from '../response-plane/response-stream.js';
import type { ResponseStreamServer } from '../response-plane/stream-server.js';
import type { StreamReader } from '../response-plane/stream-reader.js';
import { traceHeaders } from '../trace.js';
import { unwrapAnnotated } from './annotated.js';
import { StreamTurns } from './fair-turns.js';

/** What a client needs from its runtime, created on first use. */
export interface ClientPlanes {
  requestClient(): Promise<RequestPlaneClient>;
  responseServer(): Promise<ResponseStreamServer>;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborting kills the stream (the worker stops at once). */
  signal?: AbortSignal;
  /**
   * The request's context: its id becomes the request id; `stopGenerating()` on it sends a graceful
   * `stop` (the worker finishes the stream), `kill()` a `kill`. When it carries a trace, the call
   * continues it: `traceparent` with the same trace id and a new span id, `tracestate` as is.
   */
  context?: Context;
  /** Request-plane headers (e.g. `traceparent`); these win over the ones derived from `context`. */
  headers?: Record<string, string>;
  /** Metadata carried in the control header. */
  metadata?: Record<string, string>;
  /** The endpoint answers with plain items, not `Annotated { data }` ones: yield each as it is. */
  plainItems?: boolean;
  /**
   * Reads the response's socket bytes whole (see {@link StreamReader}): the batches hold the
   * items it produces, and the worker's errors are thrown after them.
   */
  reader?: StreamReader;
}

/** How long a worker that failed a send is left out of routing. */
const TOMBSTONE_MS = 5_000;

/**
 * Calls one endpoint's instances. It follows discovery: instances appear and disappear as their
 * records do, and one that fails a send is skipped for a few seconds.
 */
export class Client {
  readonly path: EndpointPath;
  readonly #discovery: Discovery;
  readonly #planes: ClientPlanes;
  readonly #log: Log;
  readonly #instances = new Map<bigint, EndpointRecord>();
  readonly #down = new Map<bigint, number>();
  readonly #closing = new AbortController();
  #next = 0;
  #changed: Array<() => void> = [];

  /** @internal Use `endpoint.client()`. */
  constructor(path: EndpointPath, discovery: Discovery, planes: ClientPlanes, log: Log) {
    this.path = path;
    this.#discovery = discovery;
    this.#planes = planes;
    this.#log = log;
  }

  /** @internal Seeds the instance set and starts following discovery. */
  async start(): Promise<void> {
    const { namespace, component, endpoint } = this.path;
    for (const record of await this.#discovery.listInstances(namespace, component, endpoint)) this.#instances.set(record.instance_id, record);
    void this.#follow();
  }

  async #follow(): Promise<void> {
    const { namespace, component, endpoint } = this.path;
    try {
      for await (const event of this.#discovery.watchInstances(namespace, component, endpoint, this.#closing.signal)) {
        if (event.type === 'added') this.#instances.set(event.record.instance_id, event.record);
        else this.#instances.delete(event.instanceId);
        for (const notify of this.#changed.splice(0)) notify();
      }
    } catch (err) {
      if (!this.#closing.signal.aborted) this.#log.error({ err: (err as Error).message }, 'discovery watch ended; the instance list is frozen');
    }
  }

  /** Ids of the instances currently known, ascending. */
  instanceIds(): bigint[] {
    return [...this.#instances.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Resolves with the instance ids once at least one instance exists. */
  async waitForInstances(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<bigint[]> {
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    while (this.#instances.size === 0) {
      options.signal?.throwIfAborted();
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) throw new ConnectionTimeout(`no instance of ${this.#name()} appeared within ${options.timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = left === undefined ? undefined : setTimeout(resolve, left);
        this.#changed.push(() => {
          if (timer) clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.instanceIds();
  }

  /** Sends to the next instance in turn (the default routing). */
  generate<Res = unknown>(request: unknown, options: CallOptions = {}): AsyncIterable<Res> {
    return this.roundRobin<Res>(request, options);
  }

  /** Sends to the next routable instance in turn. */
  roundRobin<Res = unknown>(request: unknown, options: CallOptions = {}): AsyncIterable<Res> {
    return this.#stream<Res>(
      () => {
        const ids = this.#routable();
        return ids[this.#next++ % ids.length]!;
      },
      request,
      options,
    );
  }

  /** Sends to a random routable instance. */
  random<Res = unknown>(request: unknown, options: CallOptions = {}): AsyncIterable<Res> {
    return this.#stream<Res>(
      () => {
        const ids = this.#routable();
        return ids[Math.floor(Math.random() * ids.length)]!;
      },
      request,
      options,
    );
  }

  /** Sends to one chosen instance. */
  direct<Res = unknown>(request: unknown, instanceId: bigint, options: CallOptions = {}): AsyncIterable<Res> {
    return this.#stream<Res>(this.#known(instanceId), request, options);
  }

  /**
   * Sends to one chosen instance and reads the response in batches: each batch holds every item
   * that had arrived when the reader asked (at least one), so a reader that falls behind a fast
   * worker catches up in one step instead of one per item.
   */
  directBatches<Res = unknown>(request: unknown, instanceId: bigint, options: CallOptions = {}): AsyncIterable<Res[]> {
    return this.#batches<Res>(this.#known(instanceId), request, options);
  }

  #known(instanceId: bigint): () => bigint {
    return () => {
      if (!this.#instances.has(instanceId)) throw new CannotConnect(`instance ${instanceId.toString(16)} of ${this.#name()} is not known to discovery`);
      return instanceId;
    };
  }

  /** Stops following discovery. */
  close(): void {
    this.#closing.abort();
  }

  /** The discovery records of the instances currently known. */
  records(): EndpointRecord[] {
    return [...this.#instances.values()];
  }

  /** Ids of the instances that can take a request now: known, and no send to them failed lately. */
  availableIds(): bigint[] {
    const now = Date.now();
    return this.instanceIds().filter((id) => (this.#down.get(id) ?? 0) <= now);
  }

  #routable(): bigint[] {
    const ids = this.availableIds();
    if (ids.length === 0) {
      throw new CannotConnect(this.#instances.size === 0 ? `no instances of ${this.#name()}` : `every instance of ${this.#name()} failed recently`);
    }
    return ids;
  }

  async *#stream<Res>(pick: () => bigint, request: unknown, options: CallOptions): AsyncGenerator<Res> {
    const call = await this.#send(pick, request, options);
    try {
      for await (const item of call.pending.stream) {
        if (options.plainItems) {
          yield item as Res;
          continue;
        }
        const unwrapped = unwrapAnnotated(item);
        if (unwrapped.kind === 'error') throw unwrapped.error;
        if (unwrapped.kind === 'data') yield unwrapped.data as Res;
      }
    } finally {
      call.release();
    }
  }

  async *#batches<Res>(pick: () => bigint, request: unknown, options: CallOptions): AsyncGenerator<Res[]> {
    const call = await this.#send(pick, request, options);
    // Streams whose frames are already read take turns with the rest of the loop: a fast
    // worker's backlogs, handled in one go, kept new requests' call-home connections and first
    // tokens waiting (TTFT p50 at c64, zero delay: ~205 -> ~110 ms, with MAX_BATCH).
    const turns = new StreamTurns();
    try {
      for await (const items of call.pending.batches) {
        const wait = turns.take();
        if (wait) await wait;
        if (options.reader) {
          yield items as Res[];
          continue;
        }
        const data: Res[] = [];
        for (const item of items) {
          const unwrapped = unwrapAnnotated(item);
          if (unwrapped.kind === 'error') {
            if (data.length > 0) yield data;
            throw unwrapped.error;
          }
          if (unwrapped.kind === 'data') data.push(unwrapped.data as Res);
        }
        if (data.length > 0) yield data;
      }
    } finally {
      call.release();
    }
  }

  /** Sends `request` to the picked instance; the caller reads `pending`, then calls `release`. */
  async #send(pick: () => bigint, request: unknown, options: CallOptions): Promise<{ pending: PendingResponse; release(): void }> {
    const id = pick();
    const record = this.#instances.get(id);
    if (record === undefined) throw new CannotConnect(`instance ${id.toString(16)} of ${this.#name()} vanished`);
    let body: Buffer;
    try {
      body = Buffer.from(stringifyJson(request), 'utf8');
    } catch (err) {
      throw new InvalidArgument(`request is not JSON-serializable: ${(err as Error).message}`, { cause: err });
    }
    const [requestClient, responseServer] = await Promise.all([this.#planes.requestClient(), this.#planes.responseServer()]);
    const contextId = options.context?.id() ?? randomUUID();
    const pending = responseServer.register(contextId, {
      ...(options.signal && { signal: options.signal }),
      ...(options.reader && { reader: options.reader }),
    });
    const context = options.context;
    const forward = () => (context?.isKilled() ? pending.kill() : pending.stop());
    context?.signal.addEventListener('abort', forward, { once: true });
    const release = () => context?.signal.removeEventListener('abort', forward);
    try {
      const envelope = encodeRequestEnvelope(controlHeader(contextId, pending.connectionInfo, options.metadata), body);
      const headers = context?.trace ? { ...traceHeaders(context.trace), ...options.headers } : (options.headers ?? {});
      try {
        await requestClient.send(record.transport, envelope, headers);
      } catch (err) {
        this.#down.set(id, Date.now() + TOMBSTONE_MS);
        pending.cancel(err as Error);
        this.#log.warn({ instance_id: id.toString(16), err: (err as Error).message }, 'send failed; instance skipped for a while');
        throw err;
      }
    } catch (err) {
      release();
      throw err;
    }
    return { pending, release };
  }

  #name(): string {
    return `${this.path.namespace}.${this.path.component}.${this.path.endpoint}`;
  }
}
