// Toxiproxy (Shopify/toxiproxy), the chaos proxy the cluster harness routes a link's TCP through
// for latency, bandwidth, cuts and resets: its server (built once by toxiproxy/setup-toxiproxy.sh)
// and the few calls of its HTTP API the harness makes.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { type Child, startChild } from './child.js';
import { freePort, waitFor } from './free-port.js';
import { testingRoot } from './repo.js';

const setupScript = join(testingRoot, 'toxiproxy', 'setup-toxiproxy.sh');

/**
 * The Toxiproxy server binary: `$DYNAMO_TS_TOXIPROXY_BIN`, else built (or found cached) by
 * setup-toxiproxy.sh. `{ skip }` when it cannot be had here (no Go module proxy): the cluster
 * suite then reports skipped; any other failure throws.
 */
export function toxiproxyBinary(): { bin: string } | { skip: string } {
  const given = process.env.DYNAMO_TS_TOXIPROXY_BIN;
  if (given) return { bin: given };
  const result = spawnSync('bash', [setupScript, '--print-bin'], { encoding: 'utf8' });
  if (result.status === 3) return { skip: `Toxiproxy could not be built (no Go module proxy or Go here): ${result.stderr.trim().split('\n').at(-1)}` };
  if (result.status !== 0) throw new Error(`packages/testing/toxiproxy/setup-toxiproxy.sh failed (${result.status}):\n${result.stderr}`);
  return { bin: result.stdout.trim().split('\n').at(-1)! };
}

/** A toxic's attributes, as Toxiproxy names them (`latency` and `jitter` in ms, `rate` in KB/s, `timeout` in ms). */
export type ToxicAttributes = Record<string, number>;

/** A running Toxiproxy server and its API. */
export class Toxiproxy {
  readonly #api: string;
  readonly #child: Child;

  private constructor(api: string, child: Child) {
    this.#api = api;
    this.#child = child;
  }

  /** Starts the server with its API on a free loopback port. */
  static async start(bin: string): Promise<Toxiproxy> {
    const port = await freePort();
    const child = startChild(bin, ['-host', '127.0.0.1', '-port', String(port)], { LOG_LEVEL: 'warn' });
    const api = `http://127.0.0.1:${port}`;
    await waitFor('the Toxiproxy API to answer', async () => (await fetch(`${api}/version`).catch(() => undefined))?.ok === true, 15_000);
    return new Toxiproxy(api, child);
  }

  /** Creates proxy `name` listening on `listen` (`HOST:0` picks a port) for `upstream`; resolves with the address it listens on. */
  async createProxy(name: string, listen: string, upstream: string): Promise<string> {
    const proxy = (await this.#call('POST', '/proxies', { name, listen, upstream, enabled: true })) as { listen: string };
    return proxy.listen;
  }

  /** Adds a toxic to a proxy: `stream` is `upstream` (client to server) or `downstream`. */
  async addToxic(proxy: string, name: string, type: string, stream: 'upstream' | 'downstream', attributes: ToxicAttributes): Promise<void> {
    await this.#call('POST', `/proxies/${proxy}/toxics`, { name, type, stream, toxicity: 1, attributes });
  }

  /** Removes a toxic. */
  async removeToxic(proxy: string, name: string): Promise<void> {
    await this.#call('DELETE', `/proxies/${proxy}/toxics/${name}`);
  }

  /** Stops the server (its proxies' connections close). */
  async stop(): Promise<void> {
    this.#child.kill();
    await this.#child.exited;
  }

  async #call(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(`${this.#api}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`Toxiproxy ${method} ${path}: HTTP ${res.status} ${text}`);
    return text === '' ? undefined : JSON.parse(text);
  }
}
