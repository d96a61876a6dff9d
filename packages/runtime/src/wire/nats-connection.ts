/**
 * The process's NATS connection, configured the way stock Dynamo configures its NATS client:
 * one server URL (`NATS_SERVER`), one authentication method picked by a fixed precedence
 * (`NATS_AUTH_*`), and optional TLS (`NATS_TLS_*`). The connection reconnects forever with
 * backoff, so a worker outlives a NATS restart; it logs its status changes but never a secret.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import type * as NatsClient from '@nats-io/transport-node';
import type { Authenticator, NatsConnection, NodeConnectionOptions, Status } from '@nats-io/transport-node';
import { z } from 'zod';
import { CannotConnect, InvalidArgument } from '../errors.js';
import { parseOrThrow } from '../validate.js';
import type { Log } from '../logger.js';

export type { NatsConnection } from '@nats-io/transport-node';

// The NATS client costs a few MB of memory: a process that uses no NATS never loads it.
let client: typeof NatsClient | undefined;

/** The NATS client library; loaded by {@link connectNats}, so anything holding a connection has it. */
export function natsClient(): typeof NatsClient {
  if (!client) throw new Error('the NATS client library is used before connectNats loaded it');
  return client;
}

/** Dynamo's environment variable behind each {@link NatsConnectionOptions} field. */
export const NATS_ENV = {
  server: 'NATS_SERVER',
  username: 'NATS_AUTH_USERNAME',
  password: 'NATS_AUTH_PASSWORD',
  token: 'NATS_AUTH_TOKEN',
  nkeySeed: 'NATS_AUTH_NKEY',
  credentialsFile: 'NATS_AUTH_CREDENTIALS_FILE',
  tlsCaCert: 'NATS_TLS_CA_CERT_PATH',
  tlsClientCert: 'NATS_TLS_CLIENT_CERT_PATH',
  tlsClientKey: 'NATS_TLS_CLIENT_KEY_PATH',
  tlsInsecure: 'NATS_TLS_INSECURE',
} as const;

/** Stock Dynamo's server when `NATS_SERVER` is unset. */
export const DEFAULT_NATS_SERVER = 'nats://localhost:4222';

const schemes = ['nats:', 'tls:'] as const;

/** Splits `NATS_SERVER` (comma-separated URLs allowed) into parsed URLs; throws on a bad one. */
function parseServers(server: string): URL[] {
  return server
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      let url: URL;
      try {
        url = new URL(s);
      } catch {
        throw new Error(`'${redactUserInfo(s)}' is not a URL`);
      }
      if (!(schemes as readonly string[]).includes(url.protocol) || !url.hostname) {
        throw new Error(`must start with nats:// or tls:// and name a host, got '${redactUrl(url)}'`);
      }
      return url;
    });
}

/** `scheme://host:port` of a server URL: what is logged and what the client dials. */
function redactUrl(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** Drops `user:pass@` from a string that failed to parse as a URL. */
function redactUserInfo(text: string): string {
  return text.replace(/\/\/[^/@]*@/, '//***@');
}

/** An optional string where `''` (an empty environment variable) means unset. */
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

/** Options of {@link connectNats}; each secret or path comes from the matching {@link NATS_ENV} variable. */
export const natsConnectionOptionsSchema = z
  .object({
    /** `NATS_SERVER`: `nats://` or `tls://` URL(s), comma-separated. `user:pass@` in a URL is honoured and never logged. */
    server: z.string().default(DEFAULT_NATS_SERVER),
    /** `NATS_AUTH_USERNAME`; needs `password`. */
    username: optionalText,
    /** `NATS_AUTH_PASSWORD`; needs `username`. */
    password: optionalText,
    /** `NATS_AUTH_TOKEN`. */
    token: optionalText,
    /** `NATS_AUTH_NKEY`: a user nkey seed (`SU...`). */
    nkeySeed: optionalText,
    /** `NATS_AUTH_CREDENTIALS_FILE`: path of a `.creds` file (JWT + seed). */
    credentialsFile: optionalText,
    /** `NATS_TLS_CA_CERT_PATH`: CA that signs the server's certificate. */
    tlsCaCert: optionalText,
    /** `NATS_TLS_CLIENT_CERT_PATH`: client certificate for mutual TLS; needs the key. */
    tlsClientCert: optionalText,
    /** `NATS_TLS_CLIENT_KEY_PATH`: client key for mutual TLS; needs the certificate. */
    tlsClientKey: optionalText,
    /** `NATS_TLS_INSECURE`: skip verifying the server's certificate (development only). */
    tlsInsecure: z.boolean().default(false),
    /** Client name the server shows in its monitoring. */
    name: z.string().min(1).default('dynamo-ts'),
    /** How long the first connection (and each reconnect dial) may take. */
    connectTimeoutMs: z.number().int().positive().default(10_000),
    /** First delay between reconnect attempts; doubles per failed attempt up to the maximum. */
    reconnectMinDelayMs: z.number().int().positive().default(250),
    /** Largest delay between reconnect attempts. */
    reconnectMaxDelayMs: z.number().int().positive().default(5_000),
  })
  .superRefine((o, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    let urls: URL[] = [];
    try {
      urls = parseServers(o.server);
      if (urls.length === 0) issue('server', `${NATS_ENV.server} is empty`);
    } catch (err) {
      issue('server', `${NATS_ENV.server} ${(err as Error).message}`);
    }
    if ((o.username === undefined) !== (o.password === undefined)) {
      issue(o.username === undefined ? 'username' : 'password', `${NATS_ENV.username} and ${NATS_ENV.password} must be set together`);
    }
    if ((o.tlsClientCert === undefined) !== (o.tlsClientKey === undefined)) {
      issue('tlsClientCert', `${NATS_ENV.tlsClientCert} and ${NATS_ENV.tlsClientKey} must be set together`);
    }
    if (o.tlsClientCert !== undefined && o.tlsCaCert === undefined && !o.tlsInsecure) {
      issue('tlsCaCert', `a client certificate needs ${NATS_ENV.tlsCaCert} (or ${NATS_ENV.tlsInsecure}) to verify the server`);
    }
    const tlsSet = o.tlsCaCert !== undefined || o.tlsClientCert !== undefined || o.tlsInsecure;
    const plain = urls.filter((u) => u.protocol === 'nats:');
    if (tlsSet && plain.length > 0) {
      issue('server', `NATS_TLS_* settings need tls:// URLs in ${NATS_ENV.server}, got '${redactUrl(plain[0]!)}'`);
    } else if (plain.length > 0 && plain.length < urls.length) {
      issue('server', `${NATS_ENV.server} mixes nats:// and tls:// URLs`);
    }
    if (o.reconnectMaxDelayMs < o.reconnectMinDelayMs) {
      issue('reconnectMaxDelayMs', 'must be ≥ reconnectMinDelayMs');
    }
  });

/** What callers pass to {@link connectNats} (defaults filled in by the schema). */
export type NatsConnectionOptionsInput = z.input<typeof natsConnectionOptionsSchema>;
/** Validated connection options. */
export type NatsConnectionOptions = z.output<typeof natsConnectionOptionsSchema>;

/** Validates connection options; throws `InvalidArgument` naming the bad field (secrets are never echoed). */
export function parseNatsConnectionOptions(input: NatsConnectionOptionsInput = {}): NatsConnectionOptions {
  return parseOrThrow(natsConnectionOptionsSchema, input, 'nats');
}

/** The authentication method in use, by name only (safe to log). */
export type NatsAuthMethod = 'user/password' | 'token' | 'nkey' | 'credentials file' | 'url user/password' | 'url token' | 'default user/password';

/**
 * Picks one authentication method with stock Dynamo's precedence: user/password, token, nkey,
 * credentials file; then credentials embedded in the URL; with none of them, Dynamo's fallback
 * user `user` / password `user` (a server without authorization ignores it).
 */
function authenticatorFor(nats: typeof NatsClient, o: NatsConnectionOptions, urls: URL[]): { method: NatsAuthMethod; authenticator: Authenticator } {
  if (o.username !== undefined && o.password !== undefined) {
    return { method: 'user/password', authenticator: nats.usernamePasswordAuthenticator(o.username, o.password) };
  }
  if (o.token !== undefined) return { method: 'token', authenticator: nats.tokenAuthenticator(o.token) };
  if (o.nkeySeed !== undefined) {
    const seed = new TextEncoder().encode(o.nkeySeed.trim());
    try {
      nats.nkeys.fromSeed(seed);
    } catch {
      throw new InvalidArgument(`${NATS_ENV.nkeySeed} is not a valid nkey seed`);
    }
    return { method: 'nkey', authenticator: nats.nkeyAuthenticator(seed) };
  }
  if (o.credentialsFile !== undefined) {
    let creds: Uint8Array;
    try {
      creds = readFileSync(o.credentialsFile);
    } catch (err) {
      throw new InvalidArgument(`${NATS_ENV.credentialsFile} '${o.credentialsFile}' cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
    return { method: 'credentials file', authenticator: nats.credsAuthenticator(creds) };
  }
  const withInfo = urls.find((u) => u.username !== '');
  if (withInfo) {
    const user = decodeURIComponent(withInfo.username);
    if (withInfo.password !== '') {
      return { method: 'url user/password', authenticator: nats.usernamePasswordAuthenticator(user, decodeURIComponent(withInfo.password)) };
    }
    return { method: 'url token', authenticator: nats.tokenAuthenticator(user) };
  }
  return { method: 'default user/password', authenticator: nats.usernamePasswordAuthenticator('user', 'user') };
}

function checkReadable(name: string, path: string | undefined): void {
  if (path === undefined) return;
  try {
    accessSync(path, constants.R_OK);
  } catch (err) {
    throw new InvalidArgument(`${name} '${path}' cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

/** Exponential reconnect delay with jitter, advanced by the client's own `reconnecting` events. */
class ReconnectBackoff {
  readonly #minMs: number;
  readonly #maxMs: number;
  #attempts = 0;
  #delay: number;
  constructor(minMs: number, maxMs: number) {
    this.#minMs = minMs;
    this.#maxMs = maxMs;
    this.#delay = minMs;
  }
  get attempts(): number {
    return this.#attempts;
  }
  /** The wait before the next dial; stable between attempts (the client polls it). */
  delay(): number {
    return this.#delay;
  }
  attempted(): void {
    this.#attempts += 1;
    const base = Math.min(this.#maxMs, this.#minMs * 2 ** Math.min(this.#attempts - 1, 30));
    this.#delay = Math.round(base * (0.8 + Math.random() * 0.4));
  }
  reset(): void {
    this.#attempts = 0;
    this.#delay = this.#minMs;
  }
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error && err.cause.message && err.cause.message !== err.message ? ` (${err.cause.message})` : '';
    return `${err.message || err.name}${cause}`;
  }
  return String(err);
}

function logStatus(log: Log, status: Status, backoff: ReconnectBackoff): void {
  switch (status.type) {
    case 'disconnect':
      log.warn({ server: status.server }, 'NATS connection lost; reconnecting');
      return;
    case 'reconnecting':
      backoff.attempted();
      if (backoff.attempts % 10 === 0) {
        log.warn({ attempts: backoff.attempts, nextDelayMs: backoff.delay() }, 'still reconnecting to NATS');
      } else {
        log.debug({ attempts: backoff.attempts, nextDelayMs: backoff.delay() }, 'reconnecting to NATS');
      }
      return;
    case 'reconnect':
      log.info({ server: status.server, attempts: backoff.attempts }, 'NATS connection re-established');
      backoff.reset();
      return;
    case 'error':
      log.warn({ err: describeError(status.error) }, 'NATS server reported an error');
      return;
    case 'ldm':
      log.warn({ server: status.server }, 'NATS server entered lame-duck mode; will move to another server');
      return;
    case 'staleConnection':
      log.warn({}, 'NATS connection is stale (pings unanswered); reconnecting');
      return;
    case 'slowConsumer':
      log.warn({ subject: status.sub.getSubject(), pending: status.pending }, 'NATS subscription is a slow consumer');
      return;
    case 'forceReconnect':
      log.info({}, 'NATS reconnect forced');
      return;
    case 'update':
      if (!status.added?.length && !status.deleted?.length) return;
      log.debug({ added: status.added ?? [], deleted: status.deleted ?? [] }, 'NATS cluster servers changed');
      return;
    case 'close':
      log.info({}, 'NATS connection closed');
      return;
    case 'ping':
      return;
  }
}

/** Connections that lost their server and have not reconnected yet. */
const offline = new WeakSet<NatsConnection>();

/**
 * Whether `nc` has a server now. While it reconnects nats.js buffers what is published, so a
 * request sent meanwhile would wait out its whole timeout instead of failing at once.
 */
export function natsOnline(nc: NatsConnection): boolean {
  return !offline.has(nc) && !nc.isClosed();
}

/**
 * Connects to NATS. Rejects with `InvalidArgument` for bad options and with `CannotConnect`
 * (naming the server URL, never a credential) when the first connection fails. Once connected,
 * the connection reconnects forever with exponential backoff and logs each status change via `log`.
 * The caller owns the connection: `drain()` or `close()` it on shutdown.
 */
export async function connectNats(options: NatsConnectionOptionsInput, log: Log): Promise<NatsConnection> {
  const o = parseNatsConnectionOptions(options);
  const urls = parseServers(o.server);
  const servers = urls.map(redactUrl);
  const nats = (client ??= await import('@nats-io/transport-node'));
  const { method, authenticator } = authenticatorFor(nats, o, urls);
  checkReadable(NATS_ENV.tlsCaCert, o.tlsCaCert);
  checkReadable(NATS_ENV.tlsClientCert, o.tlsClientCert);
  checkReadable(NATS_ENV.tlsClientKey, o.tlsClientKey);
  const useTls = urls.some((u) => u.protocol === 'tls:');
  const tls: NodeConnectionOptions['tls'] = useTls
    ? {
        ...(o.tlsCaCert !== undefined ? { caFile: o.tlsCaCert } : {}),
        ...(o.tlsClientCert !== undefined ? { certFile: o.tlsClientCert, keyFile: o.tlsClientKey! } : {}),
        ...(o.tlsInsecure ? { rejectUnauthorized: false } : {}),
      }
    : undefined;
  const backoff = new ReconnectBackoff(o.reconnectMinDelayMs, o.reconnectMaxDelayMs);
  const where = { servers, auth: method, tls: useTls };
  log.debug(where, 'connecting to NATS');
  let nc: NatsConnection;
  try {
    nc = await nats.connect({
      // host:port only; credentials travel through the authenticator, never the URL.
      servers: urls.map((u) => u.host),
      authenticator,
      ...(tls ? { tls } : {}),
      name: o.name,
      timeout: o.connectTimeoutMs,
      reconnect: true,
      maxReconnectAttempts: -1,
      ignoreAuthErrorAbort: true,
      reconnectDelayHandler: () => backoff.delay(),
      // nats.js otherwise builds two Error objects (stack traces) per request() for async traces.
      noAsyncTraces: true,
    });
  } catch (err) {
    const reason = err instanceof nats.errors.TimeoutError ? `no answer within ${o.connectTimeoutMs} ms` : describeError(err);
    throw new CannotConnect(`cannot connect to NATS at ${servers.join(',')} (auth: ${method}): ${reason}`, { cause: err });
  }
  log.info({ ...where, server: nc.getServer() }, 'connected to NATS');
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') offline.add(nc);
      else if (status.type === 'reconnect') offline.delete(nc);
      logStatus(log, status, backoff);
    }
  })().catch((err: unknown) => log.error({ err: describeError(err) }, 'NATS status monitor failed'));
  void nc.closed().then((err) => {
    if (err) log.error({ err: describeError(err) }, 'NATS connection closed with an error');
  });
  return nc;
}
