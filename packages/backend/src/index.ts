/**
 * `@dynamo/backend`: put an inference engine behind NVIDIA Dynamo from TypeScript.
 *
 * Subclass {@link LLMEngine}, serve it with {@link run} and keep it honest with {@link runConformance}.
 *
 * @packageDocumentation
 */

export { LLMEngine, type EngineFactory } from './engine.js';
export { engineHandler, type EngineHandlerOptions } from './worker/engine-handler.js';
export { run, type EngineClass, type EngineFromArgs, type RunOptions } from './worker/run.js';
export { Worker, type WorkerOptions } from './worker/worker.js';
export { engineLog, loggingFromEnv } from './logging.js';
export { forcedDpRank, validateGlobalDpRank } from './dp-rank.js';
export { SnapshotPublisher, ComponentSnapshotSchema, type ComponentSnapshot } from './worker/snapshot-publisher.js';
export type { Log } from '@dynamo/runtime';
export { modelRegistration, parseEndpointTypes, type ModelRegistration } from './worker/registration.js';
export { resolveHealthCheck, parseHealthCheckPayload, HEALTH_CHECK_PAYLOAD_ENV } from './worker/health-payload.js';
export { Context, type ContextOptions, type TraceContext, registerPrometheus, type RegisterPrometheusOptions } from '@dynamo/runtime';
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
} from '@dynamo/runtime';
export {
  GenerateRequestSchema,
  StopConditionsSchema,
  type GenerateRequest,
  type StopConditions,
} from './protocol/request.js';
export { EmbedRequestSchema, type EmbedRequest, type Embeddings } from './protocol/embedding.js';
export {
  GenerateChunkSchema,
  FinishReasonSchema,
  CompletionUsageSchema,
  usage,
  type GenerateChunk,
  type FinishReason,
  type CompletionUsage,
} from './protocol/chunk.js';
export {
  EngineConfigSchema,
  LlmRegistrationSchema,
  engineConfigToWire,
  type EngineConfig,
  type LlmRegistration,
} from './protocol/engine-config.js';
export {
  WorkerConfigSchema,
  ShutdownConfigSchema,
  workerConfig,
  type WorkerConfig,
  type WorkerConfigInput,
  type ShutdownConfig,
} from './protocol/worker-config.js';
export {
  DisaggregationMode,
  DisaggregationModeSchema,
  parseDisaggregationMode,
} from './protocol/disaggregation.js';
export {
  KvEventSourcesSchema,
  kvEventSourcesToWire,
  type KvEventSource,
  type ZmqSource,
  type PushSource,
} from './protocol/kv-events.js';
// What an engine needs to report its KV cache: the push interface and Dynamo's block hashing.
export { computeBlockHashes, computeSequenceHashes, type KvCacheEvents } from '@dynamo/llm';
export { workerFlags, workerConfigFromFlags } from './flags.js';
export { parseFlags, formatHelp, type Flag, type Flags, type FlagValues, type ParsedFlags } from '@dynamo/runtime';
export {
  runConformance,
  conformanceReport,
  ConformanceError,
  CONFORMANCE_CHECKS,
  type ConformanceOptions,
  type ConformanceReport,
  type ConformanceCheckResult,
  type ConformanceFailureKind,
} from './conformance/run-conformance.js';
