// The client side of the TCP request plane (framing in tcp-server.ts): pooled, pipelined
// connections to each worker, a request acknowledged when the worker's empty reply comes back.

import { connect, type Socket } from 'node:net';
import { CannotConnect, InvalidArgument } from '../errors.js';
import { ChunkBuffer, DEFAULT_MAX_FRAME_BYTES } from '../wire/envelope.js';
import type { RequestPlaneClient, Transport } from './request-plane.js';
import { type BatchedWriter, MAX_PATH_BYTES, PEER_KEEPALIVE, setPeerTimeout, splitHostPort, tickBatchedWriter } from '../wire/socket-helpers.js';
import { type Log, silentLog } from '../logger.js';

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
  log?: Log;
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

  constructor(
    address: string,
    options: Required<Pick<TcpRequestPlaneClientOptions, 'connectTimeoutMs' | 'requestTimeoutMs'>>,
    onGone: (conn: ClientConnection) => void,
  ) {
    this.address = address;
    this.#requestTimeoutMs = options.requestTimeoutMs;
    this.#onGone = onGone;
    const { host, port } = splitHostPort(address);
    const socket = connect({ host, port, noDelay: true, ...PEER_KEEPALIVE });
    this.#socket = socket;
    this.#writer = tickBatchedWriter(socket);
    this.#connectTimer = setPeerTimeout(() => {
      if (this.#connectTimer !== undefined) this.fail(new CannotConnect(`cannot connect to ${address}: no connection within ${options.connectTimeoutMs} ms`));
    }, options.connectTimeoutMs);
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
    this.#ackTimer = setPeerTimeout(() => this.#checkAck(), ms);
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
  readonly #log: Log;
  readonly #pools = new Map<string, ClientConnection[]>();
  #closed = false;

  constructor(options: TcpRequestPlaneClientOptions = {}) {
    this.#options = {
      connectTimeoutMs: options.connectTimeoutMs ?? 5000,
      requestTimeoutMs: options.requestTimeoutMs ?? 5000,
      poolSize: Math.max(1, options.poolSize ?? 100),
      maxMessageSize: options.maxMessageSize ?? DEFAULT_MAX_FRAME_BYTES,
    };
    this.#log = options.log ?? silentLog;
  }

  async send(transport: Transport, envelope: Uint8Array, headers: Record<string, string>): Promise<void> {
    if (this.#closed) throw new CannotConnect('tcp request plane client is closed');
    if (!('tcp' in transport)) {
      throw new CannotConnect(`instance advertises ${JSON.stringify(transport)}, not a tcp transport; start caller and worker with the same DYN_REQUEST_PLANE`);
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
