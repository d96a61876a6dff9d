/**
 * `@dynamo/runtime`: NVIDIA Dynamo's distributed runtime for TypeScript, speaking stock Dynamo's
 * wire formats: discovery (etcd, file, mem), the TCP and NATS request planes, the call-home
 * response plane, clients and the worker API.
 *
 * ```ts
 * await dynamoWorker(async (runtime) => {
 *   const endpoint = runtime.namespace('demo').component('echo').endpoint('generate');
 *   const served = await endpoint.serveEndpoint(async function* (request, context) { ... });
 *   await served.closed;
 * });
 * ```
 *
 * @packageDocumentation
 */

export { dynamoWorker, runtimeOverridesFromArgv, type WorkerOptions } from './worker.js';
export { DistributedRuntime, type RuntimeOptions } from './runtime.js';
export { Namespace, Component, Endpoint, type RuntimeHost, type ServeOptions, type ServedEndpoint } from './component.js';
export { Client, type CallOptions } from './endpoint/client.js';
export { type PumpControl, ReadFlag, type StreamReader } from './response-plane/stream-reader.js';
export type { EndpointHandler } from './endpoint/handler.js';
export type { HealthCheck } from './endpoint/canary.js';
export { loadRuntimeConfig, logConfigFromEnv, type RuntimeConfig, type RuntimeConfigOverrides } from './config.js';
export { parseEndpointPath, type EndpointPath } from './names.js';
export { createLogging, type Log, type Logging, type LoggingOptions, type LogFilter } from './logger.js';
export { registerPrometheus, type RegisterPrometheusOptions, type RuntimeMetrics } from './metrics.js';
// Discovery's types, for reading what `runtime.discovery` returns; the stores themselves are internal.
export type { Discovery, InstanceEvent, ModelEvent } from './discovery/discovery.js';
export type { EndpointRecord, ModelRecord } from './discovery/records.js';
export type { KvStore, KvEntry, KvEvent } from './discovery/kv-store.js';
export { MemKvSpace } from './discovery/mem.js';
export type { Transport } from './request-plane/request-plane.js';
export type { EventPublisher } from './event-plane/publisher.js';
export type { EventSubscriber } from './event-plane/subscriber.js';
export type { EventScope } from './event-plane/subject.js';
export { Context, type ContextOptions } from './context.js';
export type { TraceContext } from './trace.js';
export * from './errors.js';
export { parseOrThrow } from './validate.js';
export { parseFlags, formatHelp, type Flag, type Flags, type FlagValues, type ParsedFlags } from './flags.js';
export {
  setting,
  withDefault,
  flagsOf,
  optionsSchemaOf,
  configOf,
  configFromOptions,
  configFromEnv,
  type Setting,
  type SettingsTable,
  type FlagsOf,
  type OptionsOf,
  type ConfigOf,
} from './settings.js';
export { runtimeAddressSettings, runtimeSettings, runtimeOverridesOf } from './runtime-settings.js';
