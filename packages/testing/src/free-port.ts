import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

import { waitingFor } from './processes.js';

// The kernel hands out ports in this range to every bind(0) and outgoing connection, so a port
// picked there can be taken by another process before the test binds it. Picking below it avoids that.
const EPHEMERAL_LOW = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
})();
const LOWEST = 10_000;
// fetch refuses the WHATWG "bad ports" ("bad port"), so a server there never answers a probe;
// this is the only one of them at or above LOWEST.
const FETCH_BAD_PORTS = new Set([10_080]);

function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.on('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago, chosen outside the kernel's ephemeral range. */
export async function freePort(): Promise<number> {
  const span = EPHEMERAL_LOW - LOWEST;
  for (let attempt = 0; span > 0 && attempt < 50; attempt++) {
    const candidate = LOWEST + Math.floor(Math.random() * span);
    if (FETCH_BAD_PORTS.has(candidate)) continue;
    const port = await tryListen(candidate);
    if (port !== undefined) return port;
  }
  const port = await tryListen(0);
  if (port === undefined) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}

/**
 * Polls `probe` every 50 ms until it resolves truthy or `timeoutMs` passes. A probe that never
 * settles (a request to a hung server) does not hold the wait past its time.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  const done = waitingFor(what);
  let lastError: unknown;
  try {
    for (;;) {
      try {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - Date.now()))));
        const value = await Promise.race([Promise.resolve(probe()), late]).finally(() => clearTimeout(timer));
        if (value) return value;
      } catch (err) {
        lastError = err;
      }
      if (Date.now() > deadline) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    done();
  }
}
