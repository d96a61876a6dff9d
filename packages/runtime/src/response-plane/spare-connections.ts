/**
 * Connections dialed ahead to a caller's response stream server, one per address: the next
 * request to that caller takes it, so its connect (and the turn of the event loop that waits for
 * it) is off the path to its first item. Only for callers whose connection info carries
 * `handshake_timeout_ms`: they accept a connection that sends its handshake later, quietly (stock
 * 1.6.1 logs a warning for each connection closed before its handshake). A spare unused for half
 * that timeout is closed and not replaced, so an idle worker holds none.
 */

import { connect, type Socket } from 'node:net';
import { PEER_KEEPALIVE } from '../wire/socket-helpers.js';

interface Spare {
  socket: Socket;
  drop: () => void;
  expiry: NodeJS.Timeout;
}

const DROP_EVENTS = ['error', 'end', 'close'] as const;

/** One spare connection per caller address. */
export class SpareConnections {
  readonly #spares = new Map<string, Spare>();

  /** The spare connected to `address`, taken out of the set; undefined if none is ready. */
  take(address: string): Socket | undefined {
    const spare = this.#spares.get(address);
    if (!spare) return undefined;
    this.#spares.delete(address);
    clearTimeout(spare.expiry);
    for (const event of DROP_EVENTS) spare.socket.off(event, spare.drop);
    if (spare.socket.readyState !== 'open') {
      spare.socket.destroy();
      return undefined;
    }
    // A spare does not keep the process alive; a stream does.
    spare.socket.ref();
    return spare.socket;
  }

  /** After this turn of the event loop, dials a spare to `address` unless one is there. */
  refill(address: string, host: string, port: number, handshakeTimeoutMs: number): void {
    setImmediate(() => {
      if (this.#spares.has(address)) return;
      const socket = connect({ host, port, noDelay: true, ...PEER_KEEPALIVE });
      socket.unref();
      const drop = () => {
        if (this.#spares.get(address)?.socket === socket) this.#spares.delete(address);
        clearTimeout(expiry);
        socket.destroy();
      };
      const expiry = setTimeout(drop, handshakeTimeoutMs / 2).unref();
      for (const event of DROP_EVENTS) socket.on(event, drop);
      this.#spares.set(address, { socket, drop, expiry });
    });
  }
}
