import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { InvalidArgument } from './errors.js';
import { DEFAULT_MAX_FRAME_BYTES } from './wire/envelope.js';
import { type HostInterfaces, resolveHost, systemInterfaces } from './wire/host-address.js';
import { describeIssues, parseOrThrow } from './validate.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveSecs = z.coerce.number().positive().finite();
/** An on/off environment variable: 1/0, true/false, yes/no or on/off (any case); empty is off. */
export const envFlag = z
  .string()
  .trim()
  .toLowerCase()
  .transform((v, ctx) => {
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
    ctx.addIssue({ code: 'custom', message: `expected 1/0, true/false, yes/no or on/off, got '${v}'` });
    return z.NEVER;
  });
const list = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string()).min(1));

/** Where workers register: an embedded file store (one machine), etcd, or memory (one process). */
export const DISCOVERY_BACKENDS = ['file', 'etcd', 'mem'] as const;
/** How requests reach workers. */
export const REQUEST_PLANES = ['tcp', 'nats'] as const;
/** Where KV events and load reports travel. */
export const EVENT_PLANES = ['zmq', 'nats'] as const;

/**
 * Every runtime setting, keyed by the environment variable stock Dynamo reads it from. This table is
 * the one place defaults live; CLI flags are applied on top (see {@link loadRuntimeConfig}).
 */
const envSchema = z.object({
  DYN_DISCOVERY_BACKEND: z.enum(DISCOVERY_BACKENDS).default('file'),
  DYN_REQUEST_PLANE: z.enum(REQUEST_PLANES).default('tcp'),
  ETCD_ENDPOINTS: list.default(['http://localhost:2379']),
  ETCD_AUTH_USERNAME: z.string().optional(),
  ETCD_AUTH_PASSWORD: z.string().optional(),
  ETCD_AUTH_CA: z.string().optional(),
  ETCD_AUTH_CLIENT_CERT: z.string().optional(),
  ETCD_AUTH_CLIENT_KEY: z.string().optional(),
  ETCD_LEASE_TTL: positiveSecs.default(10),
  DYN_FILE_KV: z.string().min(1).default(join(tmpdir(), 'dynamo_store_kv')),
  DYN_FILE_KV_TTL_SECS: positiveSecs.default(10),
  NATS_SERVER: z
    .string()
    .regex(/^(nats|tls):\/\//, 'must start with nats:// or tls://')
    .default('nats://localhost:4222'),
  NATS_AUTH_USERNAME: z.string().optional(),
  NATS_AUTH_PASSWORD: z.string().optional(),
  NATS_AUTH_TOKEN: z.string().optional(),
  NATS_AUTH_NKEY: z.string().optional(),
  NATS_AUTH_CREDENTIALS_FILE: z.string().optional(),
  NATS_TLS_CA_CERT_PATH: z.string().optional(),
  NATS_TLS_CLIENT_CERT_PATH: z.string().optional(),
  NATS_TLS_CLIENT_KEY_PATH: z.string().optional(),
  NATS_TLS_INSECURE: envFlag.default(false),
  DYN_NATS_REQUEST_TIMEOUT_SECS: positiveSecs.default(10),
  DYN_EVENT_PLANE: z.enum(EVENT_PLANES, { error: (i) => `Invalid DYN_EVENT_PLANE value '${String(i.input)}'. Valid values: 'nats', 'zmq'` }).default('zmq'),
  // Unset: this host's routable address (see resolveHost); an IP, a wildcard or an interface name.
  DYN_EVENT_PLANE_HOST: z
    .string()
    .refine((v) => !['0.0.0.0', '::', '[::]'].includes(v.trim()), 'must be an address subscribers can dial, not an unspecified one')
    .optional(),
  DYN_TCP_RPC_HOST: z.string().optional(),
  DYN_TCP_RPC_PORT: port.default(0),
  DYN_TCP_RPC_ADVERTISE_HOST: z.string().optional(),
  DYN_TCP_MAX_MESSAGE_SIZE: z.coerce.number().int().positive().default(DEFAULT_MAX_FRAME_BYTES),
  DYN_TCP_REQUEST_TIMEOUT: positiveSecs.default(5),
  DYN_TCP_CONNECT_TIMEOUT: positiveSecs.default(5),
  DYN_TCP_RESPONSE_STREAM_HOST: z.string().optional(),
  DYN_TCP_RESPONSE_STREAM_PORT: port.default(0),
  DYN_TCP_RESPONSE_STREAM_ADVERTISE_HOST: z.string().optional(),
  DYN_SYSTEM_PORT: z.coerce.number().int().min(-1).max(65535).default(-1),
  DYN_SYSTEM_HOST: z.string().min(1).default('0.0.0.0'),
  DYN_SYSTEM_HEALTH_PATH: z.string().startsWith('/').default('/health'),
  DYN_SYSTEM_LIVE_PATH: z.string().startsWith('/').default('/live'),
  DYN_SYSTEM_STARTING_HEALTH_STATUS: z.enum(['ready', 'notready']).default('notready'),
  DYN_HEALTH_CHECK_ENABLED: envFlag.default(false),
  DYN_CANARY_WAIT_TIME: positiveSecs.default(10),
  DYN_HEALTH_CHECK_REQUEST_TIMEOUT: positiveSecs.default(3),
  DYN_LOG: z.string().default('info'),
  DYN_LOGGING_JSONL: envFlag.default(false),
});

type Env = z.output<typeof envSchema>;

/** The runtime's resolved, frozen configuration. */
export interface RuntimeConfig {
  discoveryBackend: Env['DYN_DISCOVERY_BACKEND'];
  requestPlane: Env['DYN_REQUEST_PLANE'];
  /** Where KV events and load reports travel; `host` is the address advertised for ZMQ sockets. */
  eventPlane: { plane: Env['DYN_EVENT_PLANE']; host: string };
  etcd: {
    endpoints: string[];
    username?: string;
    password?: string;
    caCert?: string;
    clientCert?: string;
    clientKey?: string;
    leaseTtlSecs: number;
  };
  file: { root: string; ttlSecs: number };
  nats: {
    server: string;
    username?: string;
    password?: string;
    token?: string;
    nkeySeed?: string;
    credentialsFile?: string;
    tlsCaCert?: string;
    tlsClientCert?: string;
    tlsClientKey?: string;
    /** `NATS_TLS_INSECURE`: do not verify the server's certificate (development only). */
    tlsInsecure: boolean;
    requestTimeoutSecs: number;
  };
  /**
   * The servers other hosts dial: each binds `*Host` and advertises `*AdvertiseHost` (resolved from
   * `DYN_TCP_RPC_HOST` / `DYN_TCP_RESPONSE_STREAM_HOST` and their `_ADVERTISE_HOST` overrides by
   * {@link resolveHost}: this host's routable address by default, as stock).
   */
  tcp: {
    rpcHost: string;
    rpcPort: number;
    rpcAdvertiseHost: string;
    maxMessageSize: number;
    requestTimeoutSecs: number;
    connectTimeoutSecs: number;
    responseStreamHost: string;
    responseStreamPort: number;
    responseStreamAdvertiseHost: string;
  };
  /** null: the system status server is off. */
  system: { port: number; host: string; healthPath: string; livePath: string; startingStatus: 'ready' | 'notready' } | null;
  /** The canary: endpoints served with a health-check payload probe themselves after `canaryWaitSecs` idle. */
  health: { enabled: boolean; canaryWaitSecs: number; requestTimeoutSecs: number };
  log: { filter: string; jsonl: boolean };
}

/** Runtime settings given in code or by flags; each beats its environment variable. */
export interface RuntimeConfigOverrides {
  discoveryBackend?: RuntimeConfig['discoveryBackend'];
  requestPlane?: RuntimeConfig['requestPlane'];
  eventPlane?: RuntimeConfig['eventPlane']['plane'];
  etcdEndpoints?: string;
  natsServer?: string;
  fileKvRoot?: string;
  systemPort?: number;
}

const overrideEnv: Record<keyof RuntimeConfigOverrides, keyof Env> = {
  discoveryBackend: 'DYN_DISCOVERY_BACKEND',
  requestPlane: 'DYN_REQUEST_PLANE',
  eventPlane: 'DYN_EVENT_PLANE',
  etcdEndpoints: 'ETCD_ENDPOINTS',
  natsServer: 'NATS_SERVER',
  fileKvRoot: 'DYN_FILE_KV',
  systemPort: 'DYN_SYSTEM_PORT',
};

/**
 * Resolves the runtime configuration from Dynamo's environment variables, with `overrides` (code
 * or CLI flags) winning. Empty variables count as unset. The servers' addresses are resolved here
 * against `interfaces` (this machine's by default). Throws `InvalidArgument` naming every bad
 * variable.
 */
export function loadRuntimeConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
  overrides: RuntimeConfigOverrides = {},
  interfaces: HostInterfaces = systemInterfaces,
): RuntimeConfig {
  const input = setVariables(env, Object.keys(envSchema.shape));
  for (const [name, variable] of Object.entries(overrideEnv)) {
    const value = overrides[name as keyof RuntimeConfigOverrides];
    if (value !== undefined) input[variable] = String(value);
  }
  const parsed = envSchema.safeParse(input);
  if (!parsed.success) {
    // Messages name the variable, never its value: some of them are credentials.
    throw new InvalidArgument(`invalid runtime configuration: ${describeIssues('env', parsed.error).replaceAll('env.', '')}`);
  }
  const e = parsed.data;
  const rpc = resolveHost(e.DYN_TCP_RPC_HOST, 'DYN_TCP_RPC_HOST', interfaces);
  const responseStream = resolveHost(e.DYN_TCP_RESPONSE_STREAM_HOST, 'DYN_TCP_RESPONSE_STREAM_HOST', interfaces);
  const config: RuntimeConfig = {
    discoveryBackend: e.DYN_DISCOVERY_BACKEND,
    requestPlane: e.DYN_REQUEST_PLANE,
    eventPlane: { plane: e.DYN_EVENT_PLANE, host: resolveHost(e.DYN_EVENT_PLANE_HOST, 'DYN_EVENT_PLANE_HOST', interfaces).advertise },
    etcd: {
      endpoints: e.ETCD_ENDPOINTS,
      username: e.ETCD_AUTH_USERNAME,
      password: e.ETCD_AUTH_PASSWORD,
      caCert: e.ETCD_AUTH_CA,
      clientCert: e.ETCD_AUTH_CLIENT_CERT,
      clientKey: e.ETCD_AUTH_CLIENT_KEY,
      leaseTtlSecs: e.ETCD_LEASE_TTL,
    },
    file: { root: e.DYN_FILE_KV, ttlSecs: e.DYN_FILE_KV_TTL_SECS },
    nats: {
      server: e.NATS_SERVER,
      username: e.NATS_AUTH_USERNAME,
      password: e.NATS_AUTH_PASSWORD,
      token: e.NATS_AUTH_TOKEN,
      nkeySeed: e.NATS_AUTH_NKEY,
      credentialsFile: e.NATS_AUTH_CREDENTIALS_FILE,
      tlsCaCert: e.NATS_TLS_CA_CERT_PATH,
      tlsClientCert: e.NATS_TLS_CLIENT_CERT_PATH,
      tlsClientKey: e.NATS_TLS_CLIENT_KEY_PATH,
      tlsInsecure: e.NATS_TLS_INSECURE,
      requestTimeoutSecs: e.DYN_NATS_REQUEST_TIMEOUT_SECS,
    },
    tcp: {
      rpcHost: rpc.bind,
      rpcPort: e.DYN_TCP_RPC_PORT,
      rpcAdvertiseHost: e.DYN_TCP_RPC_ADVERTISE_HOST ?? rpc.advertise,
      maxMessageSize: e.DYN_TCP_MAX_MESSAGE_SIZE,
      requestTimeoutSecs: e.DYN_TCP_REQUEST_TIMEOUT,
      connectTimeoutSecs: e.DYN_TCP_CONNECT_TIMEOUT,
      responseStreamHost: responseStream.bind,
      responseStreamPort: e.DYN_TCP_RESPONSE_STREAM_PORT,
      responseStreamAdvertiseHost: e.DYN_TCP_RESPONSE_STREAM_ADVERTISE_HOST ?? responseStream.advertise,
    },
    system:
      e.DYN_SYSTEM_PORT < 0
        ? null
        : {
            port: e.DYN_SYSTEM_PORT,
            host: e.DYN_SYSTEM_HOST,
            healthPath: e.DYN_SYSTEM_HEALTH_PATH,
            livePath: e.DYN_SYSTEM_LIVE_PATH,
            startingStatus: e.DYN_SYSTEM_STARTING_HEALTH_STATUS,
          },
    health: { enabled: e.DYN_HEALTH_CHECK_ENABLED, canaryWaitSecs: e.DYN_CANARY_WAIT_TIME, requestTimeoutSecs: e.DYN_HEALTH_CHECK_REQUEST_TIMEOUT },
    log: { filter: e.DYN_LOG, jsonl: e.DYN_LOGGING_JSONL },
  };
  return deepFreeze(config);
}

/** The variables of `keys` that `env` sets to something (empty counts as unset). */
function setVariables(env: Readonly<Record<string, string | undefined>>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((key) => (env[key] === undefined || env[key] === '' ? [] : [[key, env[key]]])));
}

const logSchema = envSchema.pick({ DYN_LOG: true, DYN_LOGGING_JSONL: true });

/**
 * The logging settings alone (`DYN_LOG`, `DYN_LOGGING_JSONL`), as {@link loadRuntimeConfig} reads
 * them, for a process that logs before it has a runtime. Throws `InvalidArgument` naming a bad one.
 */
export function logConfigFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): RuntimeConfig['log'] {
  const parsed = parseOrThrow(logSchema, setVariables(env, Object.keys(logSchema.shape)), 'env');
  return { filter: parsed.DYN_LOG, jsonl: parsed.DYN_LOGGING_JSONL };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Names of the variables holding secrets: never log their values. */
export const SECRET_VARIABLES: readonly string[] = ['ETCD_AUTH_PASSWORD', 'NATS_AUTH_PASSWORD', 'NATS_AUTH_TOKEN', 'NATS_AUTH_NKEY'];
