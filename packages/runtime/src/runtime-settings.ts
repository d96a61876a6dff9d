import { z } from 'zod';
import { DISCOVERY_BACKENDS, EVENT_PLANES, REQUEST_PLANES, type RuntimeConfigOverrides } from './config.js';
import { type Setting, setting } from './settings.js';

/**
 * The runtime settings a process may take as flags, one row each, for a settings table's `runtime`
 * section (pick the rows a process offers). Each reads its stock variable when the flag is absent
 * and has no default of its own: the section's config is the {@link RuntimeConfigOverrides} to
 * create the runtime with, and an unset value leaves the runtime's default.
 */
export const runtimeSettings = {
  discoveryBackend: setting('discoveryBackend', {
    schema: z.enum(DISCOVERY_BACKENDS).optional(),
    description: 'Where workers register: file (the embedded default, one machine), etcd, or mem (one process)',
    env: 'DYN_DISCOVERY_BACKEND',
    placeholder: 'KIND',
  }),
  requestPlane: setting('requestPlane', {
    schema: z.enum(REQUEST_PLANES).optional(),
    description: 'How requests reach workers: tcp (default) or nats',
    env: 'DYN_REQUEST_PLANE',
    placeholder: 'KIND',
  }),
  eventPlane: setting('eventPlane', {
    schema: z.enum(EVENT_PLANES).optional(),
    description: 'Where KV events and worker load travel: zmq (default) or nats',
    env: 'DYN_EVENT_PLANE',
    placeholder: 'KIND',
  }),
  etcdEndpoints: setting('etcdEndpoints', {
    schema: z.string().min(1).optional(),
    description: 'etcd endpoints, comma separated (default: http://localhost:2379)',
    env: 'ETCD_ENDPOINTS',
    placeholder: 'URLS',
  }),
  natsServer: setting('natsServer', {
    schema: z.string().min(1).optional(),
    description: 'NATS server URL (default: nats://localhost:4222)',
    env: 'NATS_SERVER',
    placeholder: 'URL',
  }),
  fileKvRoot: setting('fileKv', {
    schema: z.string().min(1).optional(),
    description: 'Directory of the file discovery store',
    env: 'DYN_FILE_KV',
    placeholder: 'DIR',
  }),
} satisfies { [K in Exclude<keyof RuntimeConfigOverrides, 'systemPort'>]: Setting<string, z.ZodType, RuntimeConfigOverrides[K]> };

/** The overrides a `runtime` section's config gives: its set values only. */
export function runtimeOverridesOf(section: { readonly [K in keyof RuntimeConfigOverrides]?: RuntimeConfigOverrides[K] }): RuntimeConfigOverrides {
  return Object.fromEntries(Object.entries(section).filter(([, value]) => value !== undefined));
}

const hostRule = "an IP, a wildcard (bound; this host's address of that family advertised) or an interface name";

/**
 * What other hosts are told to dial, for `--help`'s environment section: these variables are
 * read by `loadRuntimeConfig`, which resolves them by stock 1.6.1's rule.
 */
export const runtimeAddressSettings = {
  addresses: {
    rpcHost: setting('tcpRpcHost', {
      schema: z.string().optional(),
      description: `Address the TCP request plane binds and advertises: ${hostRule} (default: this host's routable address, the default route's interface first)`,
      env: 'DYN_TCP_RPC_HOST',
      placeholder: 'HOST',
    }),
    rpcAdvertiseHost: setting('tcpRpcAdvertiseHost', {
      schema: z.string().optional(),
      description: "Host written into this worker's discovery record instead (a DNS name, a NAT address)",
      env: 'DYN_TCP_RPC_ADVERTISE_HOST',
      placeholder: 'HOST',
    }),
    responseStreamHost: setting('tcpResponseStreamHost', {
      schema: z.string().optional(),
      description: `Address the call-home response server binds and sends workers: ${hostRule} (default: as DYN_TCP_RPC_HOST)`,
      env: 'DYN_TCP_RESPONSE_STREAM_HOST',
      placeholder: 'HOST',
    }),
    responseStreamAdvertiseHost: setting('tcpResponseStreamAdvertiseHost', {
      schema: z.string().optional(),
      description: 'Host sent to workers for calling home instead',
      env: 'DYN_TCP_RESPONSE_STREAM_ADVERTISE_HOST',
      placeholder: 'HOST',
    }),
    eventPlaneHost: setting('eventPlaneHost', {
      schema: z.string().optional(),
      description: 'Address advertised for ZMQ event publishers (bound on every address): an IP or an interface name (default: as DYN_TCP_RPC_HOST)',
      env: 'DYN_EVENT_PLANE_HOST',
      placeholder: 'HOST',
    }),
  },
};
