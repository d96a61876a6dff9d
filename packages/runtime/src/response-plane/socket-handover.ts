/**
 * Hands a connected plain-TCP socket's descriptor to native code (`@dynamo/core`'s socket pump),
 * which reads or writes it without Node's stream machinery. Node has no public API for this:
 * `_handle.fd` and `_handle.readStop()` belong to its TCP stream wrap, unchanged from Node 18 to
 * 24. Where they are missing (Windows, another runtime, a TLS socket), the functions answer
 * `undefined` and the caller keeps Node's own I/O.
 */

import type { Socket } from 'node:net';

interface StreamHandle {
  fd?: number;
  reading?: boolean;
  readStop?: () => number;
}

const handleOf = (socket: Socket): StreamHandle | undefined => (socket as unknown as { _handle?: StreamHandle | null })._handle ?? undefined;

/** The descriptor of `socket` when it is plain TCP (bytes written to it reach the peer as they are). */
export function socketFd(socket: Socket): number | undefined {
  if ((socket as { encrypted?: boolean }).encrypted === true || socket.destroyed) return undefined;
  const fd = handleOf(socket)?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * Sends a socket's bytes from another thread while this one waits (`@dynamo/core`'s
 * `sendOffThread`): given the descriptor and the bytes, returns how many went out.
 */
export type OffThreadSend = (fd: number, bytes: Uint8Array) => number;

/**
 * Writes `bytes` to `socket` with `send` once Node has nothing of its own queued ahead of them;
 * whatever `send` did not take (all of it when the socket is not plain TCP or Node's queue is not
 * empty) is written by Node. Returns `socket.write`'s result: false when the caller should wait
 * for `drain`.
 */
export function writeOffThread(socket: Socket, bytes: Buffer, send: OffThreadSend): boolean {
  const fd = socketFd(socket);
  const sent = fd === undefined || socket.writableLength > 0 ? 0 : send(fd, bytes);
  return sent === bytes.length || socket.write(sent === 0 ? bytes : bytes.subarray(sent));
}

/**
 * Stops Node reading `socket` for good, so that `read(fd)` (which starts native reads of the
 * descriptor) is the only reader; Node's writes, `end()` and `destroy()` keep working. Returns
 * false, with nothing changed, where that cannot be done; `read`'s error propagates.
 */
export function handOverReads(socket: Socket, read: (fd: number) => void): boolean {
  const handle = handleOf(socket);
  const fd = socketFd(socket);
  if (fd === undefined || handle === undefined || typeof handle.readStop !== 'function') return false;
  read(fd);
  // Within this turn nothing is read, so no byte goes to Node after the native reads began.
  handle.readStop();
  // Node's `_read` starts reading again only when it thinks the handle is not reading.
  handle.reading = true;
  return true;
}
