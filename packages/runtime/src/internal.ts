/**
 * `@dynamo/runtime/internal`: the parts of the runtime that the other `@dynamo/*` packages build
 * on (wire formats, planes, discovery stores, records, helpers). No semver promise: these change
 * with the packages that use them. Applications use `@dynamo/runtime`.
 *
 * @packageDocumentation
 */

export { HealthCanary, type CanaryTiming } from './endpoint/canary.js';
export type { ClientPlanes } from './endpoint/client.js';
export { envFlag } from './config.js';
export { validateName } from './names.js';
export { parseLogFilter, silentLog } from './logger.js';
export { RuntimeMetrics } from './metrics.js';
export type { EngineRouteHandler, HttpRouteHandler, HttpRouteRequest, SystemStatusServer } from './system-status.js';
export { processMetrics } from './process-metrics.js';
export { parseJson, stringifyJson, hexId, parseHexId } from './json.js';
export { Discovery } from './discovery/discovery.js';
export { INSTANCES_BUCKET, MDC_BUCKET, EndpointRecordSchema, ModelRecordSchema, instanceKey } from './discovery/records.js';
export { KeyExistsError } from './discovery/kv-store.js';
export { MemKvStore, type MemKvStoreOptions } from './discovery/mem.js';
export { FileKvStore, type FileKvStoreOptions } from './discovery/file.js';
export { EtcdKvStore, type EtcdKvStoreOptions } from './discovery/etcd.js';
export type { RequestPlaneClient, RequestPlaneServer, RequestAcceptor } from './request-plane/request-plane.js';
export { TcpRequestPlaneServer, type TcpRequestPlaneServerOptions } from './request-plane/tcp-server.js';
export { TcpRequestPlaneClient, type TcpRequestPlaneClientOptions } from './request-plane/tcp-client.js';
export { NatsRequestPlaneServer, NatsRequestPlaneClient } from './request-plane/nats.js';
export { encodeTwoPart, encodeTwoPartText, TwoPartDecoder, type TwoPartFrame } from './wire/envelope.js';
export { controlHeader, encodeRequestEnvelope, decodeRequestEnvelope, type ControlHeader, type ConnectionInfo } from './wire/control.js';
export { EventPublisher, type EventPlane, type EventPublisherOptions, type EnvelopeBuilder } from './event-plane/publisher.js';
export { EventSubscriber, type EventSubscriberOptions } from './event-plane/subscriber.js';
export { eventSubject, eventRecordKey, eventRecordPrefix } from './event-plane/subject.js';
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
export { loadZmq } from './event-plane/zmq.js';
export { ResponseStreamServer } from './response-plane/stream-server.js';
export type { PendingResponse } from './response-plane/response-stream.js';
export { callHome, ResponseSender } from './response-plane/call-home.js';
export { parseDataFrame, ResponseProtocolError } from './response-plane/frames.js';
export { socketFd } from './response-plane/socket-handover.js';
export { unwrapAnnotated } from './endpoint/annotated.js';
export { parseTraceparent, traceHeaders, newSpanId, TRACEPARENT, TRACESTATE } from './trace.js';
export { describeIssues } from './validate.js';
export { mergeStreams } from './merge.js';
