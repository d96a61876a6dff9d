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

import { createServer, type Server, type Socket } from 'node:net';
import { CannotConnect, InvalidArgument } from '../errors.js';
import { hexId } from '../json.js';
import { ChunkBuffer, DEFAULT_MAX_FRAME_BYTES, decodeTwoPart } from '../wire/envelope.js';
import type { RequestAcceptor, RequestPlaneServer, Transport } from './request-plane.js';
import {
  advertisedHost,
  type BatchedWriter,
  formatHostPort,
  MAX_PATH_BYTES,
  PEER_KEEPALIVE,
  SERVER_UNAVAILABLE,
  tickBatchedWriter,
} from '../wire/socket-helpers.js';
import { type Log, silentLog } from '../logger.js';

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
  /** Bind address (the runtime passes `DYN_TCP_RPC_HOST` resolved: this host's routable address by default); default here `127.0.0.1`. */
  host?: string;
  /** Bind port (`DYN_TCP_RPC_PORT`); default 0 = chosen by the OS. */
  port?: number;
  /** Host written into the advertised transport (`DYN_TCP_RPC_ADVERTISE_HOST`); see {@link advertisedHost}. */
  advertiseHost?: string;
  /** Largest accepted request message in bytes (`DYN_TCP_MAX_MESSAGE_SIZE`); default 32 MiB. */
  maxMessageSize?: number;
  log?: Log;
}

interface Route {
  endpointKey: string;
  accept: RequestAcceptor;
}

/** What a connection needs from its server. */
interface Dispatcher {
  readonly log: Log;
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
  readonly log: Log;
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
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_FRAME_BYTES;
    this.log = options.log ?? silentLog;
  }

  /** The advertised `HOST:PORT`, once listening. */
  get address(): string | undefined {
    return this.#advertised;
  }

  /** Starts listening (idempotent); resolves with the bound host and port. */
  listen(): Promise<{ host: string; port: number }> {
    if (this.#closing) return Promise.reject(new CannotConnect('request plane server is closed'));
    this.#listening ??= new Promise((resolve, reject) => {
      const server = createServer({ noDelay: true, ...PEER_KEEPALIVE }, (socket) => this.#onConnection(socket));
      this.#server = server;
      server.once('error', reject);
      server.listen(this.#port, this.#host, () => {
        server.off('error', reject);
        server.on('error', (err) => this.log.error({ err }, 'tcp request plane server error'));
        const { address, port } = server.address() as { address: string; port: number };
        this.#advertised = formatHostPort(advertisedHost(this.#host, this.#advertiseHost), port);
        this.log.info({ bound: formatHostPort(address, port), advertised: this.#advertised }, 'tcp request plane listening');
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
