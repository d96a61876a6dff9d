/**
 * The NATS request plane (`DYN_REQUEST_PLANE=nats`), wire-compatible with stock Dynamo: each
 * endpoint of an instance is the subject `{ns}_{comp}.{ep}-{instance_id:x}`, subscribed with the
 * queue group `{ns}_{comp}`; a caller sends the two-part envelope as a NATS request with headers
 * and the worker answers at once with an empty payload (ack) or an error text. Responses travel
 * over the call-home response plane, not NATS.
 *
 * Both sides borrow a connection from {@link connectNats}; closing a plane leaves it open.
 */
import { performance } from 'node:perf_hooks';
import type { Msg, MsgHdrs, NatsConnection, Subscription } from '@nats-io/transport-node';
import { z } from 'zod';
import { CannotConnect, InvalidArgument } from '../errors.js';
import { hexId } from '../json.js';
import { parseOrThrow } from '../validate.js';
import type { RequestAcceptor, RequestPlaneClient, RequestPlaneServer, Transport } from './request-plane.js';
import type { Log } from '../logger.js';
import { natsClient, natsOnline } from '../wire/nats-connection.js';
import { setPeerTimeout } from '../wire/socket-helpers.js';

/** async-nats's request timeout, which stock Dynamo uses when `DYN_NATS_REQUEST_TIMEOUT_SECS` is unset. */
export const DEFAULT_NATS_REQUEST_TIMEOUT_MS = 10_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A name that can sit inside one NATS subject token: no dots, wildcards or whitespace. */
function checkToken(what: string, value: string): void {
  if (value === '' || /[\s.*>]/.test(value)) {
    throw new InvalidArgument(`${what} '${value}' cannot be part of a NATS subject (empty, or contains '.', '*', '>' or whitespace)`);
  }
}

/** Dynamo's NATS service name of a component: `{ns}_{comp}`; also the endpoints' queue group. */
export function natsServiceName(namespace: string, component: string): string {
  return `${namespace}_${component}`;
}

/** The request subject of one instance's endpoint: `{ns}_{comp}.{ep}-{instance_id:x}`. */
export function natsEndpointSubject(namespace: string, component: string, endpoint: string, instanceId: bigint): string {
  return `${natsServiceName(namespace, component)}.${endpoint}-${hexId(instanceId)}`;
}

/** Dynamo's slug rule: lowercase, `[a-z0-9_-]` kept, anything else `_`, no leading `_`. */
function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .replace(/^_+/, '');
}

/** NATS headers as a plain object; repeated keys are joined with `, `. */
function headersToObject(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  for (const [key, values] of h) out[key] = values.join(', ');
  return out;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message || err.name : String(err);
}

interface EndpointStats {
  requests: number;
  errors: number;
  lastError: string;
  processingNs: bigint;
}

interface Served {
  readonly service: string;
  readonly endpointName: string;
  readonly subject: string;
  readonly sub: Subscription;
  readonly stats: EndpointStats;
}

/** One `$SRV` service (a namespace/component of this process) and its discovery subscriptions. */
interface Service {
  readonly name: string;
  readonly id: string;
  readonly started: string;
  readonly subs: Subscription[];
  readonly endpoints: Set<Served>;
}

/** Options of {@link NatsRequestPlaneServer}. */
export interface NatsRequestPlaneServerOptions {
  /** Where accept failures and malformed requests are reported. */
  log: Log;
  /** Answer the NATS service-discovery subjects `$SRV.PING/INFO/STATS` (default true). */
  serviceDiscovery?: boolean;
  /** Version reported in `$SRV` answers (default `0.1.0`). */
  version?: string;
}

/**
 * The worker side of the NATS request plane. Each served endpoint is one queue subscription; every
 * request is handed to its acceptor synchronously and answered at once with an empty payload (ack)
 * or the acceptor's error text. A request the acceptor throws on is answered with the error text
 * and logged; nothing a caller sends stops the subscription.
 */
export class NatsRequestPlaneServer implements RequestPlaneServer {
  readonly kind = 'nats' as const;
  readonly #nc: NatsConnection;
  /** The client library, loaded by the `connectNats` that made the connection. */
  readonly #nats = natsClient();
  readonly #log: Log;
  readonly #discovery: boolean;
  readonly #version: string;
  readonly #served = new Map<string, Served>();
  readonly #services = new Map<string, Service>();
  #closed = false;

  constructor(nc: NatsConnection, options: NatsRequestPlaneServerOptions) {
    this.#nc = nc;
    this.#log = options.log;
    this.#discovery = options.serviceDiscovery ?? true;
    this.#version = options.version ?? '0.1.0';
  }

  async serve(namespace: string, component: string, endpoint: string, instanceId: bigint, accept: RequestAcceptor): Promise<Transport> {
    if (this.#closed) throw new InvalidArgument('the NATS request-plane server is closed');
    checkToken('namespace', namespace);
    checkToken('component', component);
    checkToken('endpoint', endpoint);
    if (instanceId < 0n || instanceId >= 1n << 64n) throw new InvalidArgument(`instance id ${instanceId} is not a u64`);
    const key = `${namespace}/${component}/${endpoint}`;
    if (this.#served.has(key)) throw new InvalidArgument(`endpoint ${key} is already served on the NATS request plane`);

    const service = natsServiceName(namespace, component);
    const subject = natsEndpointSubject(namespace, component, endpoint, instanceId);
    const stats: EndpointStats = { requests: 0, errors: 0, lastError: '', processingNs: 0n };
    const sub = this.#nc.subscribe(subject, {
      queue: service,
      callback: (err, msg) => {
        if (err) {
          this.#log.warn({ subject, err: message(err) }, 'NATS request-plane subscription error');
          return;
        }
        this.#handle(subject, msg, accept, stats);
      },
    });
    const served: Served = { service, endpointName: `${endpoint}-${hexId(instanceId)}`, subject, sub, stats };
    this.#served.set(key, served);
    if (this.#discovery) this.#serviceFor(service).endpoints.add(served);
    await this.#flush();
    this.#log.info({ subject, queue: service }, 'serving endpoint on the NATS request plane');
    return { nats_tcp: subject };
  }

  async unserve(namespace: string, component: string, endpoint: string): Promise<void> {
    const key = `${namespace}/${component}/${endpoint}`;
    const served = this.#served.get(key);
    if (!served) return;
    this.#served.delete(key);
    this.#drop(served);
    await this.#flush();
    this.#log.info({ subject: served.subject }, 'stopped serving endpoint on the NATS request plane');
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const served of this.#served.values()) this.#drop(served);
    this.#served.clear();
    await this.#flush();
  }

  #drop(served: Served): void {
    if (!this.#nc.isClosed()) served.sub.unsubscribe();
    const service = this.#services.get(served.service);
    if (!service) return;
    service.endpoints.delete(served);
    if (service.endpoints.size === 0) {
      if (!this.#nc.isClosed()) for (const s of service.subs) s.unsubscribe();
      this.#services.delete(served.service);
    }
  }

  /** Makes sure the server has seen our (un)subscriptions; bounded, since a disconnected client resends them on reconnect. */
  async #flush(): Promise<void> {
    if (this.#nc.isClosed()) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), 5_000);
    });
    try {
      const result = await Promise.race([this.#nc.flush().then(() => 'ok' as const), timeout]);
      if (result === 'timeout') this.#log.warn({}, 'NATS flush timed out; subscriptions will be sent once the connection is back');
    } catch (err) {
      this.#log.warn({ err: message(err) }, 'NATS flush failed');
    } finally {
      clearTimeout(timer);
    }
  }

  #handle(subject: string, msg: Msg, accept: RequestAcceptor, stats: EndpointStats): void {
    const started = process.hrtime.bigint();
    let reply: string;
    try {
      reply = accept(msg.data, headersToObject(msg.headers));
      if (typeof reply !== 'string') reply = `invalid request: acceptor returned ${typeof reply}`;
    } catch (err) {
      reply = `invalid request: ${message(err)}`;
      this.#log.warn({ subject, bytes: msg.data.length, err: message(err) }, 'rejected a malformed NATS request');
    }
    stats.requests += 1;
    stats.processingNs += process.hrtime.bigint() - started;
    if (reply !== '') {
      stats.errors += 1;
      stats.lastError = reply;
    }
    if (!msg.reply) {
      this.#log.warn({ subject, bytes: msg.data.length }, 'NATS request without a reply subject; nobody can be acknowledged');
      return;
    }
    try {
      msg.respond(reply === '' ? this.#nats.Empty : encoder.encode(reply));
    } catch (err) {
      this.#log.warn({ subject, err: message(err) }, 'could not answer a NATS request');
    }
  }

  #serviceFor(name: string): Service {
    const existing = this.#services.get(name);
    if (existing) return existing;
    const service: Service = { name: slug(name), id: this.#nats.nuid.next(), started: new Date().toISOString(), subs: [], endpoints: new Set() };
    const respond = (verb: 'PING' | 'INFO' | 'STATS') => (err: Error | null, msg: Msg) => {
      if (err || !msg.reply) return;
      try {
        msg.respond(encoder.encode(JSON.stringify(this.#describe(service, verb))));
      } catch (e) {
        this.#log.debug({ err: message(e) }, 'could not answer a $SRV request');
      }
    };
    for (const verb of ['PING', 'INFO', 'STATS'] as const) {
      for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${service.name}`, `$SRV.${verb}.${service.name}.${service.id}`]) {
        service.subs.push(this.#nc.subscribe(subject, { callback: respond(verb) }));
      }
    }
    this.#services.set(name, service);
    return service;
  }

  /** The micro-service protocol's `io.nats.micro.v1.*_response` documents. */
  #describe(service: Service, verb: 'PING' | 'INFO' | 'STATS'): Record<string, unknown> {
    const base = { name: service.name, id: service.id, version: this.#version, metadata: {} };
    const endpoints = [...service.endpoints];
    if (verb === 'PING') return { type: 'io.nats.micro.v1.ping_response', ...base };
    if (verb === 'INFO') {
      return {
        type: 'io.nats.micro.v1.info_response',
        ...base,
        description: '',
        endpoints: endpoints.map((e) => ({ name: e.endpointName, subject: e.subject, queue_group: e.service, metadata: {} })),
      };
    }
    return {
      type: 'io.nats.micro.v1.stats_response',
      ...base,
      started: service.started,
      endpoints: endpoints.map((e) => ({
        name: e.endpointName,
        subject: e.subject,
        queue_group: e.service,
        num_requests: e.stats.requests,
        num_errors: e.stats.errors,
        last_error: e.stats.lastError,
        processing_time: Number(e.stats.processingNs),
        average_processing_time: e.stats.requests === 0 ? 0 : Number(e.stats.processingNs / BigInt(e.stats.requests)),
      })),
    };
  }
}

const clientOptionsSchema = z.object({
  /** Ack timeout (`DYN_NATS_REQUEST_TIMEOUT_SECS` × 1000); default 10 s. */
  requestTimeoutMs: z.number().positive().finite().default(DEFAULT_NATS_REQUEST_TIMEOUT_MS),
  batchWindowMs: z.number().min(0).max(100).default(1),
});

/** Options of {@link NatsRequestPlaneClient}. */
export interface NatsRequestPlaneClientOptions {
  /** How long to wait for the worker's ack (`DYN_NATS_REQUEST_TIMEOUT_SECS` × 1000); default 10 000. */
  requestTimeoutMs?: number;
  /**
   * Under load, publish requests at most once per this many milliseconds, together (default 1; 0
   * = once per event-loop turn). A request that comes after a quiet spell leaves at once; under
   * load, fewer and larger writes save the caller, the NATS server and the worker a syscall and a
   * wake-up per request, for at most this much added latency.
   */
  batchWindowMs?: number;
  /** Where per-request failures are reported (debug level). */
  log?: Log;
}

/** A request waiting for its ack. */
interface PendingAck {
  readonly subject: string;
  readonly deadline: number;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
}

/** A request waiting for the next tick's batched publish. */
interface QueuedPublish {
  readonly subject: string;
  readonly envelope: Uint8Array;
  readonly reply: string;
  readonly headers: MsgHdrs | undefined;
}

/**
 * The caller side of the NATS request plane: one NATS request per envelope, resolved by the
 * worker's empty ack. Rejects with `CannotConnect` when nobody serves the subject, the ack does
 * not arrive in time, the connection is closed, or the worker answers with an error text (the
 * message is that text); with `InvalidArgument` when the envelope exceeds the server's
 * `max_payload` or the transport is not a NATS one.
 *
 * Acks come back on one wildcard inbox subscription (`_INBOX.{nuid}.*`), matched by the last
 * token, and requests are published in batches (see `batchWindowMs`): this is the hot path of
 * every request, and nats.js's `request()` costs a timer, two promises and an Error object per
 * call. All requests share one timeout, so they expire in the order they were sent.
 */
export class NatsRequestPlaneClient implements RequestPlaneClient {
  readonly kind = 'nats' as const;
  readonly #nc: NatsConnection;
  readonly #timeoutMs: number;
  readonly #batchWindowMs: number;
  readonly #log: Log | undefined;
  #inbox: string | undefined;
  #sub: Subscription | undefined;
  /** The client library (`connectNats` loaded it to make the connection). */
  readonly #nats = natsClient();
  #seq = 0;
  /** Insertion order is deadline order (one timeout for all). */
  readonly #pending = new Map<string, PendingAck>();
  #queue: QueuedPublish[] = [];
  #lastFlush = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(nc: NatsConnection, options: NatsRequestPlaneClientOptions = {}) {
    this.#nc = nc;
    const parsed = parseOrThrow(
      clientOptionsSchema,
      { requestTimeoutMs: options.requestTimeoutMs, batchWindowMs: options.batchWindowMs },
      'nats request plane',
    );
    this.#timeoutMs = parsed.requestTimeoutMs;
    this.#batchWindowMs = parsed.batchWindowMs;
    this.#log = options.log;
  }

  send(transport: Transport, envelope: Uint8Array, headers: Record<string, string>): Promise<void> {
    if (!('nats_tcp' in transport) || typeof transport.nats_tcp !== 'string' || transport.nats_tcp === '') {
      return Promise.reject(
        new InvalidArgument(`instance transport ${JSON.stringify(transport)} is not a NATS subject; frontend and workers must use the same DYN_REQUEST_PLANE`),
      );
    }
    const subject = transport.nats_tcp;
    let hdrs: MsgHdrs | undefined;
    let headerBytes = 0;
    for (const key in headers) {
      hdrs ??= this.#nats.headers();
      const value = headers[key]!;
      try {
        hdrs.set(key, value);
      } catch (err) {
        return Promise.reject(new InvalidArgument(`request headers cannot be sent over NATS: ${message(err)}`, { cause: err }));
      }
      headerBytes += key.length + value.length + 4;
    }
    const maxPayload = this.#nc.info?.max_payload;
    if (maxPayload !== undefined && envelope.length + headerBytes > maxPayload) {
      return Promise.reject(
        new InvalidArgument(
          `request of ${envelope.length} bytes (plus ${headerBytes} bytes of headers) exceeds the NATS server's max_payload of ${maxPayload} bytes (subject '${subject}')`,
        ),
      );
    }
    if (this.#closed) return Promise.reject(new CannotConnect(`the NATS request-plane client is closed; cannot send to '${subject}'`));
    if (this.#nc.isClosed() || this.#nc.isDraining()) {
      return Promise.reject(new CannotConnect(`NATS connection is closed; cannot send to '${subject}'`));
    }
    if (!natsOnline(this.#nc)) {
      return Promise.reject(new CannotConnect(`NATS connection lost (reconnecting); cannot send to '${subject}'`));
    }
    const inbox = this.#inbox ?? this.#subscribe();
    const token = (this.#seq++).toString(36);
    return new Promise<void>((resolve, reject) => {
      this.#pending.set(token, { subject, deadline: performance.now() + this.#timeoutMs, resolve, reject });
      this.#timer ??= setPeerTimeout(this.#expire, this.#timeoutMs).unref();
      if (this.#queue.push({ subject, envelope, reply: inbox + token, headers: hdrs }) === 1) this.#scheduleFlush();
    });
  }

  /** Stops listening for acks; requests still waiting fail with `CannotConnect`. The connection stays open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#sub && !this.#nc.isClosed()) this.#sub.unsubscribe();
    this.#failAll('the NATS request-plane client was closed');
  }

  #subscribe(): string {
    const inbox = `${this.#nats.createInbox()}.`;
    this.#inbox = inbox;
    this.#sub = this.#nc.subscribe(`${inbox}*`, {
      callback: (err, msg) => {
        if (err) this.#failAll(`NATS ack subscription failed: ${message(err)}`);
        else this.#onAck(msg);
      },
    });
    void this.#nc.closed().then(() => this.#failAll('NATS connection is closed'));
    return inbox;
  }

  #scheduleFlush(): void {
    const since = performance.now() - this.#lastFlush;
    if (since >= this.#batchWindowMs) setImmediate(this.#flush);
    else setTimeout(this.#flush, this.#batchWindowMs - since);
  }

  readonly #flush = (): void => {
    this.#lastFlush = performance.now();
    const queue = this.#queue;
    this.#queue = [];
    // Published in one synchronous run, nats.js writes them to the socket together.
    for (const q of queue) {
      try {
        this.#nc.publish(q.subject, q.envelope, { reply: q.reply, ...(q.headers ? { headers: q.headers } : {}) });
      } catch (err) {
        const token = q.reply.slice(this.#inbox!.length);
        const pending = this.#pending.get(token);
        if (!pending) continue;
        this.#pending.delete(token);
        const mapped = this.#mapError(q.subject, err);
        this.#log?.debug({ subject: q.subject, err: mapped.message }, 'NATS request failed');
        pending.reject(mapped);
      }
    }
  };

  #onAck(msg: Msg): void {
    const token = msg.subject.slice(this.#inbox!.length);
    const pending = this.#pending.get(token);
    if (!pending) return; // late ack of a request that already timed out
    this.#pending.delete(token);
    const status = msg.headers;
    if (status?.hasError) {
      pending.reject(
        status.code === 503
          ? new CannotConnect(`no responders on NATS subject '${pending.subject}': the instance is not serving (stopped or not registered yet)`)
          : new CannotConnect(`NATS answered '${pending.subject}' with status ${status.code} ${status.description}`.trim()),
      );
    } else if (msg.data.length > 0) {
      pending.reject(new CannotConnect(decoder.decode(msg.data)));
    } else {
      pending.resolve();
    }
  }

  readonly #expire = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    for (const [token, pending] of this.#pending) {
      if (pending.deadline > now) {
        this.#timer = setPeerTimeout(this.#expire, Math.max(1, pending.deadline - now)).unref();
        return;
      }
      this.#pending.delete(token);
      this.#log?.debug({ subject: pending.subject, ms: this.#timeoutMs }, 'NATS request timed out');
      pending.reject(new CannotConnect(`no acknowledgement from '${pending.subject}' within ${this.#timeoutMs} ms (NATS request timed out)`));
    }
  };

  #failAll(reason: string): void {
    for (const pending of this.#pending.values()) pending.reject(new CannotConnect(`${reason}; cannot send to '${pending.subject}'`));
    this.#pending.clear();
    this.#queue = [];
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #mapError(subject: string, err: unknown): Error {
    const cause = { cause: err };
    const { errors: natsErrors } = this.#nats;
    if (err instanceof natsErrors.InvalidArgumentError && /max_payload/.test(err.message)) {
      return new InvalidArgument(`request exceeds the NATS server's max_payload (subject '${subject}'): ${err.message}`, cause);
    }
    if (err instanceof natsErrors.ClosedConnectionError || err instanceof natsErrors.DrainingConnectionError) {
      return new CannotConnect(`NATS connection is closed; cannot send to '${subject}'`, cause);
    }
    return new CannotConnect(`NATS request to '${subject}' failed: ${message(err)}`, cause);
  }
}
