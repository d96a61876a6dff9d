import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Log } from '@dynamo/runtime';

/** How many connections the HTTP server takes, and how long a client has to send its headers. */
export interface ConnectionLimits {
  /** Time from connecting to a request's complete headers; past it the socket gets a 408 and is closed. */
  headersTimeoutMs: number;
  /** Connections open at once from all clients (0: no limit). */
  maxConnections: number;
  /** Connections open at once from one address (0: no limit). */
  maxConnectionsPerIp: number;
}

/** Refusals are logged at most once per this long per reason, with how many there were. */
const LOG_EVERY_MS = 10_000;

/**
 * Guards the HTTP server's sockets. Node's own headers timeout starts only once a request line
 * has arrived, so a client that connects and sends nothing, or half a request line, would hold
 * its socket forever: every socket gets `headersTimeoutMs` to deliver its first request's headers
 * (later requests on a keep-alive socket are Node's: `keepAliveTimeout`, `headersTimeout`).
 * Connections past the total or per-address limit are closed at once, with a warning that says
 * which limit and how to raise it.
 */
export function guardConnections(
  server: Server,
  limits: ConnectionLimits & { tls: boolean },
  log: Log,
  overBody: (status: number, message: string) => string,
): void {
  const perIp = new Map<string, number>();
  const refused = new Map<string, { count: number; last: number }>();
  const warn = (reason: string, fields: Record<string, unknown>) => {
    const now = Date.now();
    const entry = refused.get(reason) ?? { count: 0, last: 0 };
    entry.count += 1;
    if (now - entry.last >= LOG_EVERY_MS) {
      log.warn({ ...fields, refused: entry.count }, reason);
      entry.count = 0;
      entry.last = now;
    }
    refused.set(reason, entry);
  };

  if (limits.maxConnections > 0) {
    server.maxConnections = limits.maxConnections;
    server.on('drop', (data?: { remoteAddress?: string }) =>
      warn(`connection refused: ${limits.maxConnections} connections are open (raise --http-max-connections)`, { remote: data?.remoteAddress }),
    );
  }

  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress ?? '';
    if (limits.maxConnectionsPerIp > 0) {
      const open = perIp.get(ip) ?? 0;
      if (open >= limits.maxConnectionsPerIp) {
        warn(`connection refused: ${open} connections are open from this address (raise --http-max-connections-per-ip)`, { remote: ip });
        socket.destroy();
        return;
      }
      perIp.set(ip, open + 1);
      socket.once('close', () => {
        const left = (perIp.get(ip) ?? 1) - 1;
        if (left > 0) perIp.set(ip, left);
        else perIp.delete(ip);
      });
    }
    if (!limits.tls) awaitHeaders(socket);
  });
  // Over TLS the request arrives on the TLS socket, once the handshake (Node's handshakeTimeout) is done.
  if (limits.tls) server.on('secureConnection', awaitHeaders);

  function awaitHeaders(socket: Socket): void {
    const timer = setTimeout(() => {
      if (!socket.writable) return socket.destroy();
      const body = overBody(408, `no request headers within ${limits.headersTimeoutMs / 1000} s of connecting`);
      socket.end(
        `HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      // A client that does not read the answer does not hold the socket either.
      setTimeout(() => socket.destroy(), 1000).unref();
    }, limits.headersTimeoutMs).unref();
    waiting.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  }
  // The first request's headers arrived: from here on the request timeout and keep-alive rule.
  server.on('request', (req: { socket: Socket }) => {
    const timer = waiting.get(req.socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    waiting.delete(req.socket);
  });
}
