/**
 * The caller side of Dynamo's call-home response plane. A process runs a TCP server; for each
 * request it registers a pending stream under a fresh subject, sends the subject and its address
 * in the request's control header, and waits for the worker to dial back, identify itself with a
 * handshake, and stream the response frames.
 */

import { randomUUID } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { CannotConnect, Disconnected } from '../errors.js';
import type { ConnectionInfo } from '../wire/control.js';
import { DEFAULT_MAX_FRAME_BYTES, TwoPartDecoder, type TwoPartFrame } from '../wire/envelope.js';
import { advertisedHost, formatHostPort, PEER_KEEPALIVE, setPeerTimeout } from '../wire/socket-helpers.js';
import { type PendingResponse, ResponseStream } from './response-stream.js';
import { parseHandshake } from './frames.js';
import type { StreamReader } from './stream-reader.js';
import { type Log, silentLog } from '../logger.js';

/** Options of {@link ResponseStreamServer}; the runtime fills them from `DYN_TCP_RESPONSE_STREAM_*`. */
export interface ResponseStreamServerOptions {
  /** Bind address (the runtime passes `DYN_TCP_RESPONSE_STREAM_HOST` resolved: this host's routable address by default); default here `127.0.0.1`. */
  host?: string;
  /** Bind port (`DYN_TCP_RESPONSE_STREAM_PORT`); default 0 = chosen by the OS. */
  port?: number;
  /** Host workers dial (`DYN_TCP_RESPONSE_STREAM_ADVERTISE_HOST`); default derived from `host`. */
  advertiseHost?: string;
  /** How long a registered stream waits for its worker to call home; default 30 s. */
  callHomeTimeoutMs?: number;
  /** How long a new connection may take to send its handshake; default 10 s. */
  handshakeTimeoutMs?: number;
  /** Largest accepted frame (`header_len + body_len`); default 32 MiB. */
  maxFrameBytes?: number;
  log?: Log;
}

/**
 * Listening sockets on an OS-chosen port. Node's event loop (libuv 1.46) accepts one connection
 * per listening socket per loop turn, and every request is a new call-home connection: at c64
 * with busy ~10 ms turns, workers' connections waited ~190 ms in the accept queue, most of the
 * time to first token. Requests are spread over several sockets, each accepting one per turn.
 * A fixed port (`DYN_TCP_RESPONSE_STREAM_PORT`) gets one socket.
 */
const EPHEMERAL_LISTENERS = 8;

/** Options for one registration. */
export interface RegisterOptions {
  /** Aborting it kills the stream (the caller no longer wants the response). */
  signal?: AbortSignal;
  /** Overrides the server's call-home timeout for this stream. */
  callHomeTimeoutMs?: number;
  /** Reads the stream's socket bytes whole after the handshake; what it produces are the stream's items. */
  reader?: StreamReader;
}

/**
 * Accepts workers' call-home connections and routes each to its pending stream by the handshake
 * subject. Connections with an unknown subject or a malformed handshake are closed.
 */
export class ResponseStreamServer {
  readonly #host: string;
  readonly #port: number;
  readonly #advertiseHost: string | undefined;
  readonly #callHomeTimeoutMs: number;
  readonly #handshakeTimeoutMs: number;
  readonly #maxFrameBytes: number;
  readonly #log: Log;
  readonly #pending = new Map<string, ResponseStream>();
  readonly #sockets = new Set<Socket>();
  #servers: Server[] = [];
  #listening: Promise<string> | undefined;
  /** The advertised `HOST:PORT` of each listening socket; registrations take turns. */
  #addresses: string[] = [];
  #nextAddress = 0;
  #closed = false;

  constructor(options: ResponseStreamServerOptions = {}) {
    this.#host = options.host ?? '127.0.0.1';
    this.#port = options.port ?? 0;
    this.#advertiseHost = options.advertiseHost;
    this.#callHomeTimeoutMs = options.callHomeTimeoutMs ?? 30_000;
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.#log = options.log ?? silentLog;
  }

  /** The advertised `HOST:PORT` workers dial (the first, when there are several), once listening. */
  get address(): string | undefined {
    return this.#addresses[0];
  }

  /** Streams registered and not yet claimed by a worker's handshake. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Starts listening (idempotent); resolves with the (first) advertised `HOST:PORT`. */
  listen(): Promise<string> {
    if (this.#closed) return Promise.reject(new CannotConnect('response stream server is closed'));
    this.#listening ??= (async () => {
      const count = this.#port === 0 ? EPHEMERAL_LISTENERS : 1;
      for (let i = 0; i < count; i++) {
        // close() during listen() must not leave sockets opened after it.
        if (this.#closed) throw new CannotConnect('response stream server is closed');
        this.#addresses.push(await this.#listenOne());
      }
      this.#log.info({ bound: this.#host, advertised: this.#addresses }, 'response stream (call-home) server listening');
      return this.#addresses[0]!;
    })().catch(async (err: unknown) => {
      this.#addresses = [];
      await this.#closeServers();
      throw err;
    });
    return this.#listening;
  }

  /** One listening socket; resolves with its advertised `HOST:PORT`. */
  #listenOne(): Promise<string> {
    return new Promise((resolve, reject) => {
      const server = createServer({ noDelay: true, ...PEER_KEEPALIVE }, (socket) => this.#onConnection(socket));
      this.#servers.push(server);
      server.once('error', reject);
      server.listen(this.#port, this.#host, () => {
        server.off('error', reject);
        server.on('error', (err) => this.#log.error({ err }, 'response stream server error'));
        const { port } = server.address() as { port: number };
        resolve(formatHostPort(advertisedHost(this.#host, this.#advertiseHost), port));
      });
    });
  }

  /**
   * Registers a stream for request `contextId`. Call {@link listen} first.
   *
   * @throws CannotConnect when the server is not listening or closed.
   */
  register(contextId: string, options: RegisterOptions = {}): PendingResponse {
    const addresses = this.#addresses;
    if (this.#closed || addresses.length === 0) {
      throw new CannotConnect(this.#closed ? 'response stream server is closed' : 'response stream server is not listening; await listen() first');
    }
    const subject = randomUUID();
    const connectionInfo: ConnectionInfo = {
      transport: 'tcp_server',
      info: {
        address: addresses[this.#nextAddress++ % addresses.length]!,
        subject,
        context: contextId,
        stream_type: 'response',
        handshake_timeout_ms: this.#handshakeTimeoutMs,
      },
    };
    const stream = new ResponseStream({
      connectionInfo,
      callHomeTimeoutMs: options.callHomeTimeoutMs ?? this.#callHomeTimeoutMs,
      signal: options.signal,
      reader: options.reader,
      log: this.#log,
      // Subjects are fresh UUIDs, so deleting by subject can only remove this stream.
      unregister: () => this.#pending.delete(subject),
    });
    // The stream may already be over (an aborted signal); register only a live one.
    if (!stream.settled) this.#pending.set(subject, stream);
    return stream;
  }

  /** Stops listening, closes every call-home connection and fails streams still waiting. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const stream of [...this.#pending.values()]) stream.cancel(new Disconnected('response stream server closed'));
    this.#pending.clear();
    for (const socket of this.#sockets) socket.destroy();
    await this.#closeServers();
  }

  async #closeServers(): Promise<void> {
    const servers = this.#servers;
    this.#servers = [];
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }

  #onConnection(socket: Socket): void {
    if (this.#closed) {
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    // Resolved only when logged: getpeername is a syscall per call-home connection.
    let peerText: string | undefined;
    const peer = () => (peerText ??= `${socket.remoteAddress}:${socket.remotePort}`);
    const decoder = new TwoPartDecoder({ maxFrameBytes: this.#maxFrameBytes });
    const timer = setPeerTimeout(() => {
      if (stream || socket.destroyed) return;
      this.#log.warn({ peer: peer() }, 'call-home connection sent no handshake in time; closing it');
      socket.destroy();
    }, this.#handshakeTimeoutMs);
    let stream: ResponseStream | undefined;

    const reject = (reason: string, details: object = {}) => {
      this.#log.warn({ peer: peer(), ...details }, `closing call-home connection: ${reason}`);
      socket.destroy();
    };
    const onFrame = (frame: TwoPartFrame) => {
      if (stream) {
        stream.onFrame(frame);
        return;
      }
      if (frame.body.length > 0 || frame.header.length === 0) {
        reject('first frame is not a header-only handshake');
        return;
      }
      let subject: string;
      try {
        ({ subject } = parseHandshake(frame.header));
      } catch (err) {
        reject((err as Error).message);
        return;
      }
      const pending = this.#pending.get(subject);
      if (!pending) {
        reject('handshake names an unknown subject', { subject });
        return;
      }
      clearTimeout(timer);
      this.#pending.delete(subject);
      stream = pending;
      stream.attach(socket);
      // A stream with a reader takes the bytes after the handshake whole, from this read's on.
      if (stream.reader) decoder.stop();
    };

    socket.on('data', (chunk: Buffer) => {
      if (socket.destroyed) return;
      try {
        if (stream?.reader) {
          stream.onBytes(chunk);
          return;
        }
        decoder.push(chunk, onFrame);
        if (!stream?.reader) return;
        if (decoder.buffered > 0) stream.onBytes(decoder.takeRest());
        // From the next read on, the reader may read the socket itself.
        stream.pump(socket);
      } catch (err) {
        // A frame over the limit, or a reader that failed: this stream is over, the process is not.
        if (stream) stream.onDecodeError(err as Error);
        else reject((err as Error).message);
      }
    });
    socket.on('error', (err) => this.#log.debug({ peer: peer(), err }, 'call-home connection error'));
    socket.on('close', () => {
      clearTimeout(timer);
      this.#sockets.delete(socket);
      stream?.onClose(decoder.buffered);
    });
  }
}
