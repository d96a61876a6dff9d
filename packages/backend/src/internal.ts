/**
 * `@dynamo/backend/internal`: what the other `@dynamo/*` packages build on besides the public API.
 * No semver promise: it changes with the packages that use it. Applications use `@dynamo/backend`.
 *
 * @packageDocumentation
 */

export { engineHandler, type EngineHandlerOptions } from './worker/engine-handler.js';
export { loggingFromEnv } from './logging.js';
export { forcedDpRank, validateGlobalDpRank } from './dp-rank.js';
export { SnapshotPublisher, ComponentSnapshotSchema, type ComponentSnapshot } from './worker/snapshot-publisher.js';
export { modelRegistration, parseEndpointTypes, type ModelRegistration } from './worker/registration.js';
export { resolveHealthCheck } from './worker/health-payload.js';
export { GenerateRequestSchema, StopConditionsSchema } from './protocol/request.js';
export { EmbedRequestSchema } from './protocol/embedding.js';
export { GenerateChunkSchema, FinishReasonSchema, CompletionUsageSchema, mergeChunks } from './protocol/chunk.js';
export { EngineConfigSchema, LlmRegistrationSchema, engineConfigToWire } from './protocol/engine-config.js';
export { WorkerConfigSchema, ShutdownConfigSchema } from './protocol/worker-config.js';
export { DisaggregationModeSchema } from './protocol/disaggregation.js';
export { KvEventSourcesSchema, kvEventSourcesToWire } from './protocol/kv-events.js';
