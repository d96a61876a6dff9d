// Pieces the TCP request plane and the response plane share: the planes' logger, host:port
// text, the address a listener advertises, and a socket writer that batches per event-loop turn.

import { isIPv6, type Socket } from 'node:net';
import { InvalidArgument } from '../errors.js';
import { resolveHost } from './host-address.js';

/** Longest endpoint path a request frame may name. */
export const MAX_PATH_BYTES = 1024;

/** Reply prefix the client classifies as "worker overloaded" (queue full). */
export const SERVER_OVERLOADED = 'Server overloaded: ';
/** Reply prefix the client classifies as "worker unavailable" (unknown endpoint, shutting down). */
export const SERVER_UNAVAILABLE = 'Server unavailable: ';

/**
 * TCP keep-alive for every connection between hosts (request plane, call-home, both ends): after
 * 1 s of silence the kernel probes the peer once a second and gives up after 10 unanswered probes
 * (libuv fixes the interval and the count), so a connection to a host that went away without a
 * FIN or a RST (a partition, a pulled cable, a machine powered off) fails ~11 s after the peer's
 * last packet, and its request migrates. A live peer's kernel answers the probes however busy its
 * engine is: a long prefill is never taken for a lost host.
 */
export const PEER_KEEPALIVE = { keepAlive: true, keepAliveInitialDelay: 1000 } as const;

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
 * `setTimeout` for a deadline on a peer's answer: `expire` runs only after the I/O that arrived by
 * then has been read. A process stalled past the deadline (a long GC, a starved CPU) runs its due
 * timers before it reads its sockets, and would otherwise blame a peer whose answer is already
 * waiting. `expire` must check its own state: clearing the timer cannot stop a run already queued.
 */
export function setPeerTimeout(expire: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(() => setImmediate(expire), ms);
}

/**
 * The host to advertise for a server bound to `bindHost`: `advertiseHost` when set; the bind host
 * unless it is a wildcard (nobody can dial `0.0.0.0`), else this host's routable address of that
 * family ({@link resolveHost}).
 */
export function advertisedHost(bindHost: string, advertiseHost?: string): string {
  return advertiseHost || resolveHost(bindHost, 'bind host').advertise;
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
