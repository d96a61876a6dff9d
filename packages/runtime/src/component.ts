import type { EndpointRecord } from './discovery/records.js';
import { Client } from './endpoint/client.js';
import type { EndpointHandler } from './endpoint/handler.js';
import { HealthCanary, type HealthCheck } from './endpoint/canary.js';
import { EndpointIngress } from './endpoint/ingress.js';
import { InvalidArgument } from './errors.js';
import type { EndpointLabels } from './metrics.js';
import { type EndpointPath, validateName } from './names.js';
import type { RuntimeConfig } from './config.js';
import type { Discovery } from './discovery/discovery.js';
import type { ClientPlanes } from './endpoint/client.js';
import type { Log } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';
import type { RequestPlaneServer, Transport } from './request-plane/request-plane.js';
import type { SystemStatusServer } from './system-status.js';

/**
 * What namespaces, components and endpoints use of the runtime that made them. `DistributedRuntime`
 * implements it; naming it here keeps this file from importing the runtime that imports it.
 */
export interface RuntimeHost extends ClientPlanes {
  readonly config: RuntimeConfig;
  readonly discovery: Discovery;
  readonly metrics: RuntimeMetrics;
  readonly instanceId: bigint;
  readonly systemStatus: SystemStatusServer | undefined;
  readonly isShuttingDown: boolean;
  log(component: string): Log;
  requestServer(): Promise<RequestPlaneServer>;
  /** Tracks a served endpoint so shutdown can drain it. */
  trackServed(endpoint: Endpoint, served: boolean): void;
  /** Runs `hook` during shutdown, after endpoints are drained. */
  onShutdown(hook: () => Promise<void> | void): void;
}

/** A namespace of a deployment: `runtime.namespace('dynamo')`. */
export class Namespace {
  readonly runtime: RuntimeHost;
  readonly name: string;

  constructor(runtime: RuntimeHost, name: string) {
    this.runtime = runtime;
    this.name = validateName('namespace', name);
  }

  /** A component of this namespace. */
  component(name: string): Component {
    return new Component(this, name);
  }
}

/** A service inside a namespace (e.g. `backend`): a group of endpoints. */
export class Component {
  readonly namespace: Namespace;
  readonly name: string;

  constructor(namespace: Namespace, name: string) {
    this.namespace = namespace;
    this.name = validateName('component', name);
  }

  /** An endpoint of this component. */
  endpoint(name: string): Endpoint {
    return new Endpoint(this, name);
  }

  /**
   * Prepares this process to serve the component's endpoints: starts the request-plane server (TCP
   * listener or NATS subscriber side) so that `serveEndpoint` only has to register routes.
   */
  async createService(): Promise<this> {
    await this.namespace.runtime.requestServer();
    return this;
  }
}

/** Options of {@link Endpoint.serveEndpoint}. */
export interface ServeOptions {
  /** Requests processed at once before new ones are refused as overloaded (default 10000). */
  maxInflight?: number;
  /**
   * The payload of this endpoint's health canary. When `DYN_HEALTH_CHECK_ENABLED` is on, an endpoint
   * idle for `DYN_CANARY_WAIT_TIME` sends it to its own handler and `/health` follows the result.
   */
  healthCheck?: HealthCheck;
  /**
   * Send each item as its own JSON rather than in Dynamo's `Annotated { data }` envelope, as
   * stock's internal endpoints answer (the KV recovery endpoint, for one).
   */
  plainItems?: boolean;
  /**
   * Merges the items a handler yields in the same turn of the event loop: called with the item
   * waiting to be sent and the next, it returns their merged item, or `undefined` to send both.
   * The first item of a stream always leaves at once. An LLM worker merges token chunks, so an
   * engine with several tokens ready sends them in one frame, as stock's engines do.
   */
  mergeItems?: (held: unknown, next: unknown) => unknown;
  /**
   * Sends each stream's first item from another thread while the JavaScript thread waits (pass
   * `@dynamo/core`'s `sendOffThread`). Linux wakes the caller's reader on the CPU of the thread
   * that wrote; a handler that goes on producing in the same turn would keep that CPU, and the
   * first token would wait for the end of its time slice. Where the socket is not plain TCP, or
   * Node has bytes queued for it, Node writes the item as usual.
   */
  offThreadSend?: (fd: number, bytes: Uint8Array) => number;
}

/** A served endpoint: stop it, or await `closed` to block like Dynamo's `serve_endpoint`. */
export interface ServedEndpoint {
  /** The discovery record key suffix, i.e. this process's instance id. */
  readonly instanceId: bigint;
  /** The `Endpoint` record it registered in discovery. */
  readonly record: EndpointRecord;
  /** Requests in flight right now. */
  readonly inflight: number;
  /**
   * First step of a staged shutdown: leaves discovery (the instance record, then the stop hooks,
   * e.g. the model card) so routers stop picking this worker. Requests are still accepted.
   */
  unregister(): Promise<void>;
  /**
   * Removes only this instance's record from discovery (the model card stays) and reports the
   * endpoint not ready: routers stop picking this worker while it keeps serving what reaches it.
   * For engine controls such as `sleep` and `pause_generation`; {@link registerInstance} undoes it.
   */
  unregisterInstance(): Promise<void>;
  /** Publishes this instance's record again (after {@link unregisterInstance}) and reports it ready. */
  registerInstance(): Promise<void>;
  /** Refuses new requests from now on ("worker is not accepting new requests"); running ones go on. */
  stopAdmission(): void;
  /** Accepts new requests again, undoing {@link stopAdmission}. */
  resumeAdmission(): void;
  /** Resolves once no request is in flight, or after `timeoutMs` (none: no bound); returns how many are left. */
  drain(timeoutMs?: number): Promise<number>;
  /** Leaves discovery, refuses new requests, drains in-flight ones (up to `drainTimeoutMs`) and stops serving. */
  stop(options?: { drainTimeoutMs?: number }): Promise<void>;
  /** Resolves once the endpoint has stopped serving (by `stop()` or runtime shutdown). */
  readonly closed: Promise<void>;
}

/** A callable function of a component: serve it, or call it through a client. */
export class Endpoint {
  readonly component: Component;
  readonly name: string;
  #serving:
    | {
        ingress: EndpointIngress;
        canary: HealthCanary | undefined;
        transport: Transport;
        stopped: Promise<void>;
        resolveStopped: () => void;
        unregistered?: Promise<void>;
      }
    | undefined;
  #stopping: Promise<void> | undefined;
  readonly #stopHooks: Array<() => Promise<void> | void> = [];

  constructor(component: Component, name: string) {
    this.component = component;
    this.name = validateName('endpoint', name);
  }

  /** The endpoint's full name. */
  get path(): EndpointPath {
    return { namespace: this.component.namespace.name, component: this.component.name, endpoint: this.name };
  }

  get #runtime(): RuntimeHost {
    return this.component.namespace.runtime;
  }

  /**
   * Serves this endpoint from this process: `handler(request, context?)` returns the response
   * stream of each request. Resolves once the endpoint is reachable and registered in discovery.
   */
  async serveEndpoint(handler: EndpointHandler, options: ServeOptions = {}): Promise<ServedEndpoint> {
    if (typeof handler !== 'function') throw new InvalidArgument('serveEndpoint: handler must be a function returning an AsyncIterable');
    const runtime = this.#runtime;
    if (runtime.isShuttingDown) throw new InvalidArgument('serveEndpoint: the runtime is shutting down');
    if (this.#serving) throw new InvalidArgument(`endpoint ${this.#label()} is already served by this handle`);
    const { namespace, component, endpoint } = this.path;
    const labels: EndpointLabels = { dynamo_namespace: namespace, dynamo_component: component, dynamo_endpoint: endpoint };
    const log = runtime.log(`runtime.endpoint.${endpoint}`);
    const health = runtime.config.health;
    const canary =
      options.healthCheck && health.enabled && runtime.systemStatus
        ? new HealthCanary(handler, options.healthCheck, { waitMs: health.canaryWaitSecs * 1000, timeoutMs: health.requestTimeoutSecs * 1000 }, log, (ready) =>
            runtime.systemStatus?.setStatus(endpoint, ready ? 'ready' : 'notready'),
          )
        : undefined;
    const ingress = new EndpointIngress(handler, labels, runtime.metrics, log, { ...options, ...(canary && { onSuccess: () => canary.succeeded() }) });
    const server = await runtime.requestServer();
    const transport = await server.serve(namespace, component, endpoint, runtime.instanceId, ingress.accept);
    let record: EndpointRecord;
    try {
      record = await runtime.discovery.registerEndpoint(namespace, component, endpoint, transport);
    } catch (err) {
      await server.unserve(namespace, component, endpoint);
      throw err;
    }
    let resolveStopped!: () => void;
    const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
    this.#serving = { ingress, canary, transport, stopped, resolveStopped };
    this.#stopping = undefined;
    runtime.trackServed(this, true);
    runtime.systemStatus?.track(endpoint);
    runtime.systemStatus?.setStatus(endpoint, 'ready');
    canary?.start();
    return {
      instanceId: runtime.instanceId,
      record,
      get inflight() {
        return ingress.inflight;
      },
      unregister: () => this.#unregister(),
      unregisterInstance: () => this.#setInstanceListed(false),
      registerInstance: () => this.#setInstanceListed(true),
      stopAdmission: () => ingress.stopAdmission(),
      resumeAdmission: () => ingress.resumeAdmission(),
      drain: (timeoutMs) => ingress.drain(timeoutMs),
      stop: (opts) => this.stopServing(opts),
      closed: stopped,
    };
  }

  /**
   * Runs `hook` each time this endpoint stops serving, right after it leaves discovery (e.g. to
   * remove the model card registered for it). A failing hook is logged, not thrown.
   */
  onStop(hook: () => Promise<void> | void): void {
    this.#stopHooks.push(hook);
  }

  /** @internal Graceful stop of this handle's serving; see {@link ServedEndpoint.stop}. */
  stopServing(options: { drainTimeoutMs?: number } = {}): Promise<void> {
    this.#stopping ??= this.#stop(options.drainTimeoutMs ?? 30_000);
    return this.#stopping;
  }

  /** Leaves discovery once per serving; the stop hooks run right after. */
  #unregister(): Promise<void> {
    const serving = this.#serving;
    if (!serving) return Promise.resolve();
    serving.unregistered ??= (async () => {
      serving.canary?.stop();
      const runtime = this.#runtime;
      const { namespace, component, endpoint } = this.path;
      const log = runtime.log(`runtime.endpoint.${endpoint}`);
      await runtime.discovery.unregisterEndpoint(namespace, component, endpoint).catch((err: unknown) => log.warn({ err }, 'unregister failed'));
      for (const hook of this.#stopHooks) {
        try {
          await hook();
        } catch (err) {
          log.warn({ err }, 'endpoint stop hook failed');
        }
      }
      runtime.systemStatus?.setStatus(endpoint, 'notready');
    })();
    return serving.unregistered;
  }

  /** Lists or unlists this instance in discovery without touching the stop hooks (model card). */
  async #setInstanceListed(listed: boolean): Promise<void> {
    const serving = this.#serving;
    if (!serving || serving.unregistered) throw new InvalidArgument(`endpoint ${this.#label()} is not serving (or is shutting down)`);
    const runtime = this.#runtime;
    const { namespace, component, endpoint } = this.path;
    if (listed) {
      await runtime.discovery.registerEndpoint(namespace, component, endpoint, serving.transport);
      runtime.systemStatus?.setStatus(endpoint, 'ready');
    } else {
      runtime.systemStatus?.setStatus(endpoint, 'notready');
      await runtime.discovery.unregisterEndpoint(namespace, component, endpoint);
    }
  }

  async #stop(drainTimeoutMs: number): Promise<void> {
    const serving = this.#serving;
    if (!serving) return;
    const runtime = this.#runtime;
    const { namespace, component, endpoint } = this.path;
    const log = runtime.log(`runtime.endpoint.${endpoint}`);
    // Leave discovery first so routers stop picking us, then refuse stragglers and drain.
    await this.#unregister();
    serving.ingress.stopAdmission();
    const left = await serving.ingress.drain(drainTimeoutMs);
    if (left > 0) log.warn({ inflight: left, drainTimeoutMs }, 'requests still in flight after the drain timeout');
    const server = await runtime.requestServer();
    await server.unserve(namespace, component, endpoint).catch(() => {});
    runtime.systemStatus?.untrack(endpoint);
    runtime.trackServed(this, false);
    this.#serving = undefined;
    serving.resolveStopped();
  }

  /** A client of this endpoint, following its instances in discovery. */
  async client(): Promise<Client> {
    const runtime = this.#runtime;
    const client = new Client(this.path, runtime.discovery, runtime, runtime.log(`runtime.client.${this.name}`));
    await client.start();
    runtime.onShutdown(() => client.close());
    return client;
  }

  #label(): string {
    const { namespace, component, endpoint } = this.path;
    return `${namespace}.${component}.${endpoint}`;
  }
}
