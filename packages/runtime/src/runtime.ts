import { CannotConnect } from './errors.js';
import { loadRuntimeConfig, type RuntimeConfig, type RuntimeConfigOverrides } from './config.js';
import { Discovery } from './discovery/discovery.js';
import { EtcdKvStore } from './discovery/etcd.js';
import { FileKvStore } from './discovery/file.js';
import type { KvStore } from './discovery/kv-store.js';
import { type MemKvSpace, MemKvStore } from './discovery/mem.js';
import { type Endpoint, Namespace, type RuntimeHost } from './component.js';
import { createLogging, type Log, type Logging } from './logger.js';
import { RuntimeMetrics } from './metrics.js';
import { parseEndpointPath } from './names.js';
import { EventPublisher } from './event-plane/publisher.js';
import type { EventScope } from './event-plane/subject.js';
import { EventSubscriber } from './event-plane/subscriber.js';
import { connectNats, type NatsConnection } from './wire/nats-connection.js';
import { NatsRequestPlaneClient, NatsRequestPlaneServer } from './request-plane/nats.js';
import type { RequestPlaneClient, RequestPlaneServer } from './request-plane/request-plane.js';
import { TcpRequestPlaneClient } from './request-plane/tcp-client.js';
import { TcpRequestPlaneServer } from './request-plane/tcp-server.js';
import { ResponseStreamServer } from './response-plane/stream-server.js';
import { SystemStatusServer } from './system-status.js';

/** How to build a {@link DistributedRuntime}; everything defaults to the environment. */
export interface RuntimeOptions {
  /** Environment to read `DYN_*`/`ETCD_*`/`NATS_*` from (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Settings from code or flags; they beat the environment. */
  overrides?: RuntimeConfigOverrides;
  /** A resolved configuration (skips `env` and `overrides`). */
  config?: RuntimeConfig;
  /** Logging to use (default: built from `DYN_LOG` / `DYN_LOGGING_JSONL`). */
  logging?: Logging;
  /** For `mem` discovery: the keyspace shared by runtimes in this process. */
  memSpace?: MemKvSpace;
}

/**
 * One process's connection to a Dynamo deployment: its discovery backend, request and response
 * planes, metrics and status server. A process has one instance id, shared by all the endpoints it
 * serves. Planes start lazily: a pure client never opens a request-plane server.
 */
export class DistributedRuntime implements RuntimeHost {
  readonly config: RuntimeConfig;
  readonly logging: Logging;
  readonly discovery: Discovery;
  readonly metrics = new RuntimeMetrics();
  readonly #log: Log;
  readonly #served = new Set<Endpoint>();
  readonly #shutdownHooks: Array<() => Promise<void> | void> = [];
  #nats: Promise<NatsConnection> | undefined;
  #requestServer: Promise<RequestPlaneServer> | undefined;
  #requestClient: Promise<RequestPlaneClient> | undefined;
  #responseServer: Promise<ResponseStreamServer> | undefined;
  #system: SystemStatusServer | undefined;
  #systemPort: number | undefined;
  #shutdown: Promise<void> | undefined;
  readonly #eventStreams = new Set<{ close(): Promise<void> }>();

  private constructor(config: RuntimeConfig, logging: Logging, store: KvStore) {
    this.config = config;
    this.logging = logging;
    this.#log = logging.child('runtime');
    this.discovery = new Discovery(store, logging.child('runtime.discovery'));
  }

  /** Connects to discovery (and NATS, when it is the request plane) and starts the status server. */
  static async create(options: RuntimeOptions = {}): Promise<DistributedRuntime> {
    const config = options.config ?? loadRuntimeConfig(options.env ?? process.env, options.overrides);
    const logging = options.logging ?? createLogging(config.log);
    let runtime: DistributedRuntime | undefined;
    // A worker that cannot keep its identity must not keep serving (Dynamo shuts down too).
    const onLeaseLost = (err: Error) => {
      logging.child('runtime').error({ err: err.message }, 'discovery lease lost for good; shutting down');
      void runtime?.shutdown();
    };
    const store = await openStore(config, logging, options.memSpace, onLeaseLost);
    runtime = new DistributedRuntime(config, logging, store);
    try {
      if (config.requestPlane === 'nats') await runtime.#natsConnection();
      if (config.system) {
        runtime.#system = new SystemStatusServer(config.system, runtime.metrics, logging.child('runtime.system'));
        runtime.#systemPort = await runtime.#system.listen();
      }
    } catch (err) {
      await runtime.shutdown();
      throw err;
    }
    runtime.#log.info(
      { instance_id: runtime.instanceId.toString(16), discovery: config.discoveryBackend, request_plane: config.requestPlane },
      'distributed runtime started',
    );
    return runtime;
  }

  /** This process's instance id (u64). */
  get instanceId(): bigint {
    return this.discovery.instanceId;
  }

  /** The status server's port, when `DYN_SYSTEM_PORT` enabled it. */
  get systemPort(): number | undefined {
    return this.#systemPort;
  }

  /** @internal The status server, when enabled. */
  get systemStatus(): SystemStatusServer | undefined {
    return this.#system;
  }

  /** A namespace handle (names are validated). */
  namespace(name: string): Namespace {
    return new Namespace(this, name);
  }

  /** An endpoint handle from `ns.comp.ep` or `dyn://ns.comp.ep`. */
  endpoint(path: string): Endpoint {
    const { namespace, component, endpoint } = parseEndpointPath(path);
    return this.namespace(namespace).component(component).endpoint(endpoint);
  }

  /**
   * A logger named `component` (e.g. `'my-engine'`), at the level `DYN_LOG` sets for that name, in
   * the runtime's format (`DYN_LOGGING_JSONL`).
   */
  log(component: string): Log {
    return this.logging.child(component);
  }

  /** @internal The request-plane server, started on first use. */
  requestServer(): Promise<RequestPlaneServer> {
    this.#requestServer ??= (async () => {
      if (this.config.requestPlane === 'nats') {
        return new NatsRequestPlaneServer(await this.#natsConnection(), { log: this.log('runtime.request-plane.nats') });
      }
      const t = this.config.tcp;
      const server = new TcpRequestPlaneServer({
        host: t.rpcHost,
        port: t.rpcPort,
        maxMessageSize: t.maxMessageSize,
        log: this.log('runtime.request-plane.tcp'),
        advertiseHost: t.rpcAdvertiseHost,
      });
      await server.listen();
      this.#warnIfUnreachable('request plane', t.rpcAdvertiseHost, 'DYN_TCP_RPC_HOST');
      return server;
    })();
    return this.#requestServer;
  }

  /** @internal The request-plane client, created on first use. */
  requestClient(): Promise<RequestPlaneClient> {
    this.#requestClient ??= (async () => {
      if (this.config.requestPlane === 'nats') {
        return new NatsRequestPlaneClient(await this.#natsConnection(), {
          requestTimeoutMs: this.config.nats.requestTimeoutSecs * 1000,
          log: this.log('runtime.request-plane.nats'),
        });
      }
      const t = this.config.tcp;
      return new TcpRequestPlaneClient({
        connectTimeoutMs: t.connectTimeoutSecs * 1000,
        requestTimeoutMs: t.requestTimeoutSecs * 1000,
        maxMessageSize: t.maxMessageSize,
        log: this.log('runtime.request-plane.tcp'),
      });
    })();
    return this.#requestClient;
  }

  /** @internal The call-home response stream server, started on first use. */
  responseServer(): Promise<ResponseStreamServer> {
    this.#responseServer ??= (async () => {
      const t = this.config.tcp;
      const server = new ResponseStreamServer({
        host: t.responseStreamHost,
        port: t.responseStreamPort,
        log: this.log('runtime.response-plane'),
        advertiseHost: t.responseStreamAdvertiseHost,
      });
      await server.listen();
      this.#warnIfUnreachable('response stream', t.responseStreamAdvertiseHost, 'DYN_TCP_RESPONSE_STREAM_HOST');
      return server;
    })();
    return this.#responseServer;
  }

  /** A loopback address in etcd means peers on other hosts will fail to dial this process: say so once, at start. */
  #warnIfUnreachable(server: string, advertised: string, variable: string): void {
    if (this.config.discoveryBackend !== 'etcd' || !/^(127\.|::1$|\[::1\]$|localhost$)/.test(advertised)) return;
    this.log('runtime').warn(
      { advertised, variable },
      `the ${server} server advertises a loopback address: processes on other hosts cannot reach it (set ${variable} to a routable address or interface)`,
    );
  }

  /** @internal Tracks a served endpoint so shutdown can drain it. */
  trackServed(endpoint: Endpoint, served: boolean): void {
    if (served) this.#served.add(endpoint);
    else this.#served.delete(endpoint);
  }

  /**
   * A publisher of `topic` for `scope` on the configured event plane (`DYN_EVENT_PLANE`: ZMQ by
   * default, as stock 1.6.1), advertised in discovery; closed at shutdown.
   */
  async eventPublisher(scope: EventScope, topic: string): Promise<EventPublisher> {
    const { plane, host } = this.config.eventPlane;
    const publisher = await EventPublisher.create({
      plane,
      scope,
      topic,
      store: this.discovery.store,
      nats: () => this.#natsConnection(),
      host,
      log: this.log('runtime.event-plane'),
    });
    this.#eventStreams.add(publisher);
    return publisher;
  }

  /** Receives `topic` of `scope` from every publisher on the configured event plane; closed at shutdown. */
  async eventSubscriber(scope: EventScope, topic: string, onEnvelope: (envelope: Uint8Array) => void): Promise<EventSubscriber> {
    const subscriber = await EventSubscriber.create({
      plane: this.config.eventPlane.plane,
      scope,
      topic,
      store: this.discovery.store,
      nats: () => this.#natsConnection(),
      onEnvelope,
      log: this.log('runtime.event-plane'),
    });
    this.#eventStreams.add(subscriber);
    return subscriber;
  }

  /** Runs `hook` during shutdown, after endpoints are drained and before discovery closes. */
  onShutdown(hook: () => Promise<void> | void): void {
    this.#shutdownHooks.push(hook);
  }

  /** True once {@link shutdown} was called. */
  get isShuttingDown(): boolean {
    return this.#shutdown !== undefined;
  }

  /**
   * Shuts down gracefully: every served endpoint leaves discovery, stops admission and drains its
   * in-flight requests (up to `drainTimeoutMs`, default 30 s), then planes and discovery close
   * (the etcd lease is revoked / our files removed). Idempotent.
   */
  shutdown(options: { drainTimeoutMs?: number } = {}): Promise<void> {
    this.#shutdown ??= this.#doShutdown(options.drainTimeoutMs ?? 30_000);
    return this.#shutdown;
  }

  async #doShutdown(drainTimeoutMs: number): Promise<void> {
    this.#log.info({ endpoints: this.#served.size }, 'shutting down');
    await Promise.all(
      [...this.#served].map((endpoint) =>
        endpoint.stopServing({ drainTimeoutMs }).catch((err: unknown) => this.#log.warn({ err }, 'endpoint shutdown failed')),
      ),
    );
    for (const hook of this.#shutdownHooks) await Promise.resolve(hook()).catch((err: unknown) => this.#log.warn({ err }, 'shutdown hook failed'));
    const closing: Array<Promise<unknown>> = [];
    const close = (p: Promise<{ close(): Promise<void> }> | undefined) => p && closing.push(p.then((x) => x.close()).catch(() => {}));
    close(this.#requestServer);
    close(this.#requestClient);
    close(this.#responseServer);
    for (const stream of this.#eventStreams) closing.push(stream.close().catch(() => {}));
    await Promise.all(closing);
    if (this.#nats) await (await this.#nats.catch(() => undefined))?.close().catch(() => {});
    await this.#system?.close();
    await this.discovery.store.close().catch((err: unknown) => this.#log.warn({ err }, 'closing discovery failed'));
    this.#log.info('runtime stopped');
  }

  #natsConnection(): Promise<NatsConnection> {
    this.#nats ??= connectNats(this.config.nats, this.log('runtime.nats'));
    return this.#nats;
  }
}

async function openStore(config: RuntimeConfig, logging: Logging, memSpace: MemKvSpace | undefined, onLeaseLost: (err: Error) => void): Promise<KvStore> {
  switch (config.discoveryBackend) {
    case 'mem':
      return new MemKvStore(memSpace ? { space: memSpace } : {});
    case 'file':
      return new FileKvStore({ root: config.file.root, ttlSecs: config.file.ttlSecs, log: logging.child('runtime.discovery.file') });
    case 'etcd':
      return EtcdKvStore.connect({ ...config.etcd, log: logging.child('runtime.discovery.etcd'), onLeaseLost });
    default:
      throw new CannotConnect(`unsupported discovery backend ${String(config.discoveryBackend)}`);
  }
}
