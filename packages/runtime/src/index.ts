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
export type { EndpointHandler } from './endpoint/handler.js';
export { HealthCanary, type HealthCheck, type CanaryTiming } from './endpoint/canary.js';
export { envFlag, loadRuntimeConfig, type RuntimeConfig, type RuntimeConfigOverrides } from './config.js';
export { validateName, parseEndpointPath, type EndpointPath } from './names.js';
export { createLogging, parseLogFilter, type Log, type Logging, type LoggingOptions, type LogFilter } from './logger.js';
export { registerPrometheus, type RegisterPrometheusOptions, RuntimeMetrics } from './metrics.js';
export { processMetrics } from './process-metrics.js';
export { parseJson, stringifyJson, hexId, parseHexId } from './json.js';
export { Discovery, type InstanceEvent, type ModelEvent } from './discovery/discovery.js';
export {
  INSTANCES_BUCKET,
  MDC_BUCKET,
  EndpointRecordSchema,
  ModelRecordSchema,
  instanceKey,
  type EndpointRecord,
  type ModelRecord,
} from './discovery/records.js';
export { KeyExistsError, type KvStore, type KvEntry, type KvEvent } from './discovery/kv-store.js';
export { MemKvStore, MemKvSpace, type MemKvStoreOptions } from './discovery/mem.js';
export { FileKvStore, type FileKvStoreOptions } from './discovery/file.js';
export { EtcdKvStore, type EtcdKvStoreOptions } from './discovery/etcd.js';
export type { Transport, RequestPlaneClient, RequestPlaneServer, RequestAcceptor } from './request-plane/request-plane.js';
export { TcpRequestPlaneServer, type TcpRequestPlaneServerOptions } from './request-plane/tcp-server.js';
export { TcpRequestPlaneClient, type TcpRequestPlaneClientOptions } from './request-plane/tcp-client.js';
export { NatsRequestPlaneServer, NatsRequestPlaneClient } from './request-plane/nats.js';
export { encodeTwoPart, TwoPartDecoder, type TwoPartFrame } from './request-plane/envelope.js';
export { controlHeader, encodeRequestEnvelope, decodeRequestEnvelope, type ControlHeader, type ConnectionInfo } from './request-plane/control.js';
export { EventPublisher, type EventPlane, type EventPublisherOptions, type EnvelopeBuilder } from './event-plane/publisher.js';
export { EventSubscriber, type EventSubscriberOptions } from './event-plane/subscriber.js';
export { eventSubject, eventRecordKey, eventRecordPrefix, type EventScope } from './event-plane/subject.js';
export {
  EVENT_CHANNELS_BUCKET,
  EVENT_SOURCES_BUCKET,
  EventChannelRecordSchema,
  EventSourceRecordSchema,
  eventChannelRecord,
  eventSourceRecord,
  decodeEventChannelRecord,
  type EventChannelRecord,
  type EventSourceRecord,
  type EventTransport,
} from './event-plane/records.js';
export { zmqFrames, parseZmqFrames, type ZmqMessage } from './event-plane/zmq-frames.js';
export { ResponseStreamServer } from './response-plane/stream-server.js';
export type { PendingResponse } from './response-plane/response-stream.js';
export { callHome, ResponseSender } from './response-plane/call-home.js';
export { ResponseProtocolError } from './response-plane/frames.js';
export { Context, type ContextOptions } from './context.js';
export { parseTraceparent, traceHeaders, newSpanId, TRACEPARENT, TRACESTATE, type TraceContext } from './trace.js';
export {
  DynamoException,
  Unknown,
  InvalidArgument,
  CannotConnect,
  Disconnected,
  ConnectionTimeout,
  Cancelled,
  EngineShutdown,
  StreamIncomplete,
  WorkerOverloaded,
  dynamoExceptionOf,
  toDynamoException,
  type DynamoErrorKind,
} from './errors.js';
export { parseOrThrow, describeIssues } from './validate.js';
export { mergeStreams } from './merge.js';
export { parseFlags, formatHelp, type Flag, type Flags, type FlagValues, type ParsedFlags } from './flags.js';
