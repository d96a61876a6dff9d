/**
 * The TCP request plane (Dynamo's default, `DYN_REQUEST_PLANE=tcp`).
 *
 * A worker process runs one TCP server for all its endpoints. Each request on a connection is
 * framed, big-endian, as `u16 path_len, path, u16 headers_len, headers JSON, u32 payload_len,
 * payload` (payload = the two-part request envelope). The worker answers every request, in order,
 * with `u32 len, bytes`: empty means accepted, anything else is error text. Connections are
 * persistent and requests are pipelined on them, so the FIFO reply order is the only thing that
 * pairs a reply with its request.
 */

import { createServer, connect, isIPv6, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { CannotConnect, InvalidArgument } from '../errors.js';
import { hexId } from '../json.js';
import { ChunkBuffer, decodeTwoPart } from './envelope.js';
import type { RequestAcceptor, RequestPlaneClient, RequestPlaneServer, Transport } from './request-plane.js';

// ---------------------------------------------------------------------------------------------
// Shared pieces (also used by the response plane)

/**
 * The logging the planes need. A pino logger (or child) fits; the planes log recovered faults
 * (a bad frame, a peer that went away) at `warn`, connection-level detail at `debug`.
 */
export interface PlaneLogger {
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything (the default when none is passed). */
export const silentLogger: PlaneLogger = { warn() {}, debug() {}, error() {} };

/** Dynamo's default cap on one request-plane message (`DYN_TCP_MAX_MESSAGE_SIZE`). */
export const DEFAULT_MAX_MESSAGE_SIZE = 32 * 1024 * 1024;

/** Reply prefix the client classifies as "worker overloaded" (queue full). */
export const SERVER_OVERLOADED = 'Server overloaded: ';
/** Reply prefix the client classifies as "worker unavailable" (unknown endpoint, shutting down). */
export const SERVER_UNAVAILABLE = 'Server unavailable: ';

/** Writes `host:port`, bracketing IPv6 literals the way Rust's `SocketAddr` does. */
export function formatHostPort(host: string, port: number): string {
  return isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Splits `host:port` (or `[v6]:port`); throws `InvalidArgument` when it is not one. */
export function splitHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const port = Number(address.slice(colon + 1));
  let host = address.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (colon <= 0 || host === '' || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new InvalidArgument(`not a HOST:PORT address: '${address}'`);
  }
  return { host, port };
}

/**
 * The host to advertise for a server bound to `bindHost`: `advertiseHost` when set; the bind host
 * unless it is a wildcard (nobody can dial `0.0.0.0`); else this machine's first external IPv4
 * address, falling back to loopback.
 */
export function advertisedHost(bindHost: string, advertiseHost?: string): string {
  if (advertiseHost) return advertiseHost;
  if (bindHost !== '0.0.0.0' && bindHost !== '::' && bindHost !== '') return bindHost;
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** Writes to one socket, batched per tick (see {@link tickBatchedWriter}). */
export interface BatchedWriter {
  /** Queues `chunk`; returns `socket.write`'s back-pressure flag. */
  write(chunk: Uint8Array): boolean;
  /** Sends what is queued now instead of at the end of the tick. */
  flush(): void;
}

/**
 * A writer for `socket` that batches everything written in the same tick (pipelined requests, a
 * burst of stream items) into one `writev` instead of one syscall per write: the first write of a
 * tick corks the socket and a `nextTick` uncorks it.
 */
export function tickBatchedWriter(socket: Socket): BatchedWriter {
  let corked = false;
  const flush = () => {
    if (!corked) return;
    corked = false;
    socket.uncork();
  };
  return {
    write(chunk) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(flush);
      }
      return socket.write(chunk);
    },
    flush,
  };
}

// ---------------------------------------------------------------------------------------------
// Server

const MAX_PATH_BYTES = 1024;
const ACK = Buffer.alloc(4); // u32 0: accepted. Never mutated, so one instance serves all replies.

function errorReply(text: string): Buffer {
  const len = Buffer.byteLength(text, 'utf8');
  const out = Buffer.allocUnsafe(4 + len);
  out.writeUInt32BE(len, 0);
  out.write(text, 4, len, 'utf8');
  return out;
}

function isStringMap(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  for (const v of Object.values(value)) if (typeof v !== 'string') return false;
  return true;
}

/** Options of {@link TcpRequestPlaneServer}; the runtime fills them from `DYN_TCP_RPC_*`. */
export interface TcpRequestPlaneServerOptions {
  /** Bind address (`DYN_TCP_RPC_HOST`); default `127.0.0.1`. */
  host?: string;
  /** Bind port (`DYN_TCP_RPC_PORT`); default 0 = chosen by the OS. */
  port?: number;
  /** Host written into the advertised transport (`DYN_TCP_RPC_ADVERTISE_HOST`); see {@link advertisedHost}. */
  advertiseHost?: string;
  /** Largest accepted request message in bytes (`DYN_TCP_MAX_MESSAGE_SIZE`); default 32 MiB. */
  maxMessageSize?: number;
  log?: PlaneLogger;
}

interface Route {
  endpointKey: string;
  accept: RequestAcceptor;
}

/** What a connection needs from its server. */
interface Dispatcher {
  readonly log: PlaneLogger;
  readonly maxMessageSize: number;
  dispatch(path: string, headers: Record<string, string>, payload: Buffer): string;
}

/**
 * The worker side: one shared TCP server per process serving every endpoint of its instance.
 * Starts listening on the first {@link serve} (or {@link listen}). Bad input from a peer is logged
 * and answered with error text where the framing still allows a reply, else that connection is
 * closed; it never affects other connections or the process.
 */
export class TcpRequestPlaneServer implements RequestPlaneServer, Dispatcher {
  readonly kind = 'tcp' as const;
  readonly log: PlaneLogger;
  readonly maxMessageSize: number;
  readonly #host: string;
  readonly #port: number;
  readonly #advertiseHost: string | undefined;
  readonly #routes = new Map<string, Route>();
  readonly #pathOf = new Map<string, string>();
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  #listening: Promise<{ host: string; port: number }> | undefined;
  #advertised: string | undefined;
  #closing = false;

  constructor(options: TcpRequestPlaneServerOptions = {}) {
    this.#host = options.host ?? '127.0.0.1';
    this.#port = options.port ?? 0;
    this.#advertiseHost = options.advertiseHost;
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    this.log = options.log ?? silentLogger;
  }

  /** The advertised `HOST:PORT`, once listening. */
  get address(): string | undefined {
    return this.#advertised;
  }

  /** Starts listening (idempotent); resolves with the bound host and port. */
  listen(): Promise<{ host: string; port: number }> {
    if (this.#closing) return Promise.reject(new CannotConnect('request plane server is closed'));
    this.#listening ??= new Promise((resolve, reject) => {
      const server = createServer({ noDelay: true }, (socket) => this.#onConnection(socket));
      this.#server = server;
      server.once('error', reject);
      server.listen(this.#port, this.#host, () => {
        server.off('error', reject);
        server.on('error', (err) => this.log.error({ err }, 'tcp request plane server error'));
        const { address, port } = server.address() as { address: string; port: number };
        this.#advertised = formatHostPort(advertisedHost(this.#host, this.#advertiseHost), port);
        this.log.debug({ address: `${address}:${port}`, advertised: this.#advertised }, 'tcp request plane listening');
        resolve({ host: address, port });
      });
    });
    return this.#listening;
  }

  /**
   * Serves `endpoint`; the transport is `{tcp: "HOST:PORT/{instance_id:x}/{ns}/{comp}/{ep}"}`, the
   * path stock Dynamo 1.6 workers advertise (callers send back whatever follows the first `/`).
   */
  async serve(namespace: string, component: string, endpoint: string, instanceId: bigint, accept: RequestAcceptor): Promise<Transport> {
    await this.listen();
    // Checked after the await so that two concurrent serve() calls cannot both pass.
    const endpointKey = `${namespace}/${component}/${endpoint}`;
    if (this.#pathOf.has(endpointKey)) throw new InvalidArgument(`tcp request plane already serves ${endpointKey}`);
    const path = `${hexId(instanceId)}/${endpointKey}`;
    if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
      throw new InvalidArgument(`endpoint path '${path}' is longer than ${MAX_PATH_BYTES} bytes`);
    }
    this.#routes.set(path, { endpointKey, accept });
    this.#pathOf.set(endpointKey, path);
    return { tcp: `${this.#advertised!}/${path}` };
  }

  /** Stops serving one endpoint; its later requests get a `Server unavailable:` reply. */
  async unserve(namespace: string, component: string, endpoint: string): Promise<void> {
    const endpointKey = `${namespace}/${component}/${endpoint}`;
    const path = this.#pathOf.get(endpointKey);
    if (path === undefined) return;
    this.#pathOf.delete(endpointKey);
    this.#routes.delete(path);
  }

  /**
   * Stops listening and closes every connection after flushing replies already written. Requests
   * that arrive meanwhile are refused as unavailable.
   */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    const server = this.#server;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.#sockets) {
      socket.end();
      // A peer that never closes its side must not hold shutdown hostage.
      setTimeout(() => socket.destroy(), 2000).unref();
    }
    await closed;
  }

  /** @internal Resolves one well-framed request to its reply text (`''` = ACK). */
  dispatch(path: string, headers: Record<string, string>, payload: Buffer): string {
    if (this.#closing) return `${SERVER_UNAVAILABLE}worker request plane is shutting down`;
    const route = this.#routes.get(path);
    if (!route) {
      this.log.warn({ path }, 'tcp request for an endpoint this worker does not serve');
      return `${SERVER_UNAVAILABLE}no endpoint '${path}' on this worker`;
    }
    try {
      decodeTwoPart(payload, this.maxMessageSize);
    } catch (err) {
      this.log.warn({ path, err }, 'tcp request with an invalid two-part payload');
      return `Invalid request payload: ${(err as Error).message}`;
    }
    try {
      return route.accept(payload, headers);
    } catch (err) {
      // An acceptor is supposed to answer with text, not throw; refuse rather than crash.
      this.log.error({ path, endpoint: route.endpointKey, err }, 'request acceptor threw');
      return `${SERVER_UNAVAILABLE}endpoint ${route.endpointKey} failed to accept the request: ${(err as Error).message}`;
    }
  }

  #onConnection(socket: Socket): void {
    if (this.#closing) {
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    new ServerConnection(socket, this);
  }
}

/** Reads pipelined requests from one connection and writes their replies in order. */
class ServerConnection {
  readonly #socket: Socket;
  readonly #server: Dispatcher;
  readonly #pending = new ChunkBuffer();
  readonly #peer: string;
  // Bytes needed (from the start of the current message) before parsing can advance.
  #need = 2;
  #dead = false;
  readonly #writer: BatchedWriter;

  constructor(socket: Socket, server: Dispatcher) {
    this.#socket = socket;
    this.#server = server;
    this.#peer = `${socket.remoteAddress}:${socket.remotePort}`;
    this.#writer = tickBatchedWriter(socket);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => {
      if (this.#pending.size > 0 && !this.#dead) {
        this.#server.log.warn(
          { peer: this.#peer, bytes: this.#pending.size },
          'tcp request plane peer closed the connection in the middle of a request (truncated frame); discarded it',
        );
      }
      this.#pending.clear();
    });
    socket.on('error', (err) => this.#server.log.debug({ peer: this.#peer, err }, 'tcp request plane connection error'));
    socket.on('drain', () => socket.resume());
  }

  #reply(bytes: Buffer): void {
    // Stop reading while the peer is not reading our replies, so it cannot grow our buffers.
    if (!this.#writer.write(bytes)) this.#socket.pause();
  }

  /** Framing is lost: answer once with `text`, then close the connection. */
  #fatal(text: string, details: object): void {
    this.#dead = true;
    this.#pending.clear();
    this.#server.log.warn({ peer: this.#peer, ...details }, `tcp request plane closing connection: ${text}`);
    this.#reply(errorReply(text));
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), 2000).unref();
  }

  #onData(chunk: Buffer): void {
    if (this.#dead) return;
    this.#pending.push(chunk);
    if (this.#pending.size < this.#need) return;
    const data = this.#pending.contiguous();
    const max = this.#server.maxMessageSize;
    let off = 0;
    for (;;) {
      const avail = data.length - off;
      if (avail < 2) {
        this.#need = 2;
        break;
      }
      const pathLen = data.readUInt16BE(off);
      if (pathLen === 0 || pathLen > MAX_PATH_BYTES) {
        // Not a Dynamo request (or garbage): no length can be trusted from here on.
        this.#fatal(`Invalid endpoint path: length ${pathLen} is outside 1..${MAX_PATH_BYTES} bytes`, { pathLen });
        return;
      }
      if (avail < pathLen + 4) {
        this.#need = pathLen + 4;
        break;
      }
      const headersLen = data.readUInt16BE(off + 2 + pathLen);
      const fixed = pathLen + headersLen + 8;
      if (avail < fixed) {
        this.#need = fixed;
        break;
      }
      const payloadLen = data.readUInt32BE(off + fixed - 4);
      const total = fixed + payloadLen;
      if (total > max) {
        this.#fatal(`Read error: message of ${total} bytes exceeds the ${max}-byte limit`, { total, max });
        return;
      }
      if (avail < total) {
        this.#need = total;
        break;
      }
      const reply = this.#handle(data, off, pathLen, headersLen, payloadLen);
      this.#reply(reply.length === 0 ? ACK : errorReply(reply));
      off += total;
      this.#need = 2;
    }
    this.#pending.consume(off);
  }

  #handle(data: Buffer, off: number, pathLen: number, headersLen: number, payloadLen: number): string {
    const path = data.toString('utf8', off + 2, off + 2 + pathLen);
    const headersStart = off + 4 + pathLen;
    let headers: Record<string, string> = {};
    if (headersLen > 0) {
      const text = data.toString('utf8', headersStart, headersStart + headersLen);
      if (text !== '{}') {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch (err) {
          this.#server.log.warn({ peer: this.#peer, path, err }, 'tcp request with malformed headers JSON');
          return `Invalid request headers: not JSON: ${(err as Error).message}`;
        }
        if (!isStringMap(parsed)) {
          this.#server.log.warn({ peer: this.#peer, path }, 'tcp request headers are not a string-to-string object');
          return 'Invalid request headers: expected a JSON object of string values';
        }
        headers = parsed;
      }
    }
    const payloadStart = headersStart + headersLen + 4;
    return this.#server.dispatch(path, headers, data.subarray(payloadStart, payloadStart + payloadLen));
  }
}

// ---------------------------------------------------------------------------------------------
// Client

/** Options of {@link TcpRequestPlaneClient}; the runtime fills them from `DYN_TCP_*`. */
export interface TcpRequestPlaneClientOptions {
  /** Connect timeout (`DYN_TCP_CONNECT_TIMEOUT`); default 5000 ms. */
  connectTimeoutMs?: number;
  /** How long to wait for a worker's acknowledgement (`DYN_TCP_REQUEST_TIMEOUT`); default 5000 ms. */
  requestTimeoutMs?: number;
  /** Most connections kept per worker address (`DYN_TCP_POOL_SIZE`); default 100. */
  poolSize?: number;
  /** Largest request message this client sends (`DYN_TCP_MAX_MESSAGE_SIZE`); default 32 MiB. */
  maxMessageSize?: number;
  log?: PlaneLogger;
}

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
  deadline: number;
}

// Replies are empty or short error texts; anything this large means the stream is not replies.
const MAX_REPLY_BYTES = 1024 * 1024;

/** Unacknowledged requests on one connection before another is opened. */
const PIPELINE_DEPTH = 16;

/** One persistent, pipelined connection to a worker. */
class ClientConnection {
  readonly address: string;
  readonly #socket: Socket;
  readonly #requestTimeoutMs: number;
  readonly #onGone: (conn: ClientConnection) => void;
  readonly #replies = new ChunkBuffer();
  #waiters: Waiter[] = [];
  #head = 0;
  #ackTimer: NodeJS.Timeout | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  readonly #writer: BatchedWriter;
  #failed: CannotConnect | undefined;

  constructor(address: string, options: Required<Pick<TcpRequestPlaneClientOptions, 'connectTimeoutMs' | 'requestTimeoutMs'>>, onGone: (conn: ClientConnection) => void) {
    this.address = address;
    this.#requestTimeoutMs = options.requestTimeoutMs;
    this.#onGone = onGone;
    const { host, port } = splitHostPort(address);
    const socket = connect({ host, port, noDelay: true });
    this.#socket = socket;
    this.#writer = tickBatchedWriter(socket);
    this.#connectTimer = setTimeout(
      () => this.fail(new CannotConnect(`cannot connect to ${address}: no connection within ${options.connectTimeoutMs} ms`)),
      options.connectTimeoutMs,
    );
    socket.once('connect', () => {
      clearTimeout(this.#connectTimer);
      this.#connectTimer = undefined;
    });
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) => {
      const connecting = this.#connectTimer !== undefined;
      this.fail(
        new CannotConnect(connecting ? `cannot connect to ${address}: ${err.message}` : `connection to ${address} failed: ${err.message}`, {
          cause: err,
        }),
      );
    });
    socket.on('close', () => this.fail(new CannotConnect(`connection to ${address} closed before the worker acknowledged the request`)));
  }

  /** Requests sent and not yet acknowledged. */
  get inflight(): number {
    return this.#waiters.length - this.#head;
  }

  get usable(): boolean {
    return this.#failed === undefined;
  }

  send(prefix: Buffer, envelope: Uint8Array): Promise<void> {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + this.#requestTimeoutMs;
      this.#waiters.push({ resolve, reject, deadline });
      if (this.inflight === 1) {
        this.#socket.ref();
        this.#armAckTimer(this.#requestTimeoutMs);
      }
      // Both writes leave in one writev (see tickBatchedWriter), without copying the envelope.
      this.#writer.write(prefix);
      this.#writer.write(envelope);
    });
  }

  /** Fails every outstanding request with `err` and drops the connection; idempotent. */
  fail(err: CannotConnect): void {
    if (this.#failed) return;
    this.#failed = err;
    clearTimeout(this.#connectTimer);
    clearTimeout(this.#ackTimer);
    const waiters = this.#waiters.slice(this.#head);
    this.#waiters = [];
    this.#head = 0;
    this.#socket.destroy();
    this.#onGone(this);
    for (const w of waiters) w.reject(err);
  }

  // One timer per connection instead of one per request: replies are FIFO, so only the oldest
  // outstanding request can be the first to time out.
  #armAckTimer(ms: number): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = setTimeout(() => this.#checkAck(), ms);
  }

  #checkAck(): void {
    const head = this.#waiters[this.#head];
    if (!head) return;
    const left = head.deadline - Date.now();
    if (left > 0) {
      this.#armAckTimer(left);
      return;
    }
    // The late reply would be paired with the wrong request, so the connection is unusable.
    this.fail(new CannotConnect(`worker at ${this.address} did not acknowledge the request within ${this.#requestTimeoutMs} ms`));
  }

  #onData(chunk: Buffer): void {
    this.#replies.push(chunk);
    if (this.#replies.size < 4) return;
    const data = this.#replies.contiguous();
    let off = 0;
    while (data.length - off >= 4) {
      const len = data.readUInt32BE(off);
      if (len > MAX_REPLY_BYTES) {
        this.fail(new CannotConnect(`worker at ${this.address} sent a ${len}-byte reply; not a Dynamo TCP request plane`));
        return;
      }
      if (data.length - off < 4 + len) break;
      const text = len === 0 ? '' : data.toString('utf8', off + 4, off + 4 + len);
      off += 4 + len;
      const waiter = this.#waiters[this.#head];
      if (!waiter) {
        this.fail(new CannotConnect(`worker at ${this.address} sent a reply to no request`));
        return;
      }
      this.#waiters[this.#head++] = undefined as unknown as Waiter;
      if (text === '') waiter.resolve();
      else waiter.reject(new CannotConnect(`worker at ${this.address} refused the request: ${text}`));
    }
    this.#replies.consume(off);
    if (this.inflight === 0) {
      this.#waiters = [];
      this.#head = 0;
      clearTimeout(this.#ackTimer);
      // Idle pooled connections must not keep the process alive.
      this.#socket.unref();
    } else if (this.#head > 1024) {
      this.#waiters = this.#waiters.slice(this.#head);
      this.#head = 0;
    }
  }
}

/**
 * The caller side: sends envelopes to workers over pooled, persistent, pipelined connections.
 * Every failure (unreachable, connect or ack timeout, an error reply) rejects with
 * {@link CannotConnect} whose message carries the cause or the worker's text, so the caller can
 * pick another instance.
 */
export class TcpRequestPlaneClient implements RequestPlaneClient {
  readonly kind = 'tcp' as const;
  readonly #options: Required<Omit<TcpRequestPlaneClientOptions, 'log'>>;
  readonly #log: PlaneLogger;
  readonly #pools = new Map<string, ClientConnection[]>();
  #closed = false;

  constructor(options: TcpRequestPlaneClientOptions = {}) {
    this.#options = {
      connectTimeoutMs: options.connectTimeoutMs ?? 5000,
      requestTimeoutMs: options.requestTimeoutMs ?? 5000,
      poolSize: Math.max(1, options.poolSize ?? 100),
      maxMessageSize: options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE,
    };
    this.#log = options.log ?? silentLogger;
  }

  async send(transport: Transport, envelope: Uint8Array, headers: Record<string, string>): Promise<void> {
    if (this.#closed) throw new CannotConnect('tcp request plane client is closed');
    if (!('tcp' in transport)) {
      throw new CannotConnect(
        `instance advertises ${JSON.stringify(transport)}, not a tcp transport; start caller and worker with the same DYN_REQUEST_PLANE`,
      );
    }
    const slash = transport.tcp.indexOf('/');
    if (slash <= 0 || slash === transport.tcp.length - 1) {
      throw new CannotConnect(`malformed tcp transport '${transport.tcp}': expected HOST:PORT/PATH`);
    }
    const address = transport.tcp.slice(0, slash);
    const prefix = this.#prefix(transport.tcp.slice(slash + 1), headers, envelope.length);
    return this.#connection(address).send(prefix, envelope);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const conns = [...this.#pools.values()].flat();
    this.#pools.clear();
    for (const c of conns) c.fail(new CannotConnect('tcp request plane client closed'));
  }

  /** Everything of the request message before the envelope, in one buffer. */
  #prefix(path: string, headers: Record<string, string>, payloadLen: number): Buffer {
    const pathLen = Buffer.byteLength(path, 'utf8');
    if (pathLen > MAX_PATH_BYTES) throw new InvalidArgument(`endpoint path is ${pathLen} bytes, over ${MAX_PATH_BYTES}`);
    const headersText = JSON.stringify(headers);
    const headersLen = Buffer.byteLength(headersText, 'utf8');
    if (headersLen > 0xffff) throw new InvalidArgument(`request headers are ${headersLen} bytes of JSON, over 65535`);
    const fixed = pathLen + headersLen + 8;
    if (fixed + payloadLen > this.#options.maxMessageSize) {
      throw new InvalidArgument(`request message of ${fixed + payloadLen} bytes exceeds the ${this.#options.maxMessageSize}-byte limit`);
    }
    const out = Buffer.allocUnsafe(fixed);
    out.writeUInt16BE(pathLen, 0);
    out.write(path, 2, pathLen, 'utf8');
    out.writeUInt16BE(headersLen, 2 + pathLen);
    out.write(headersText, 4 + pathLen, headersLen, 'utf8');
    out.writeUInt32BE(payloadLen, fixed - 4);
    return out;
  }

  /** An idle pooled connection, a new one while the pool has room, else the least loaded. */
  #connection(address: string): ClientConnection {
    let pool = this.#pools.get(address);
    if (!pool) {
      try {
        splitHostPort(address);
      } catch (err) {
        throw new CannotConnect(`malformed tcp transport address '${address}': ${(err as Error).message}`, { cause: err });
      }
      pool = [];
      this.#pools.set(address, pool);
    }
    // Pipeline on the least-loaded connection until it has PIPELINE_DEPTH unacknowledged
    // requests; only then open another. Requests sent in the same tick leave in one writev and
    // the worker acknowledges them in one, instead of one connection, read and write per request.
    let best: ClientConnection | undefined;
    for (const c of pool) {
      if (!c.usable) continue;
      if (!best || c.inflight < best.inflight) best = c;
    }
    if (best && (best.inflight < PIPELINE_DEPTH || pool.length >= this.#options.poolSize)) return best;
    const conn = new ClientConnection(address, this.#options, (gone) => {
      const list = this.#pools.get(address);
      const i = list?.indexOf(gone) ?? -1;
      if (i >= 0) list!.splice(i, 1);
      if (list && list.length === 0 && this.#pools.get(address) === list) this.#pools.delete(address);
      this.#log.debug({ address }, 'tcp request plane connection dropped');
    });
    pool.push(conn);
    return conn;
  }
}
