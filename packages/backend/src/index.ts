/**
 * `@dynamo/backend`: put an inference engine behind NVIDIA Dynamo from TypeScript.
 *
 * Subclass {@link LLMEngine}, serve it with {@link run} and keep it honest with {@link runConformance}.
 *
 * @packageDocumentation
 */

export { LLMEngine, type EngineFactory } from './engine.js';
export { run, type EngineClass, type EngineFromArgs, type RunOptions } from './worker/run.js';
export { Worker, type WorkerOptions } from './worker/worker.js';
export { engineLog } from './logging.js';
export type { Log } from '@dynamo/runtime';
export { Context, type ContextOptions, type TraceContext, registerPrometheus, type RegisterPrometheusOptions } from '@dynamo/runtime';
export * from '@dynamo/runtime/errors';
export type { GenerateRequest, StopConditions } from './protocol/request.js';
export type { EmbedRequest, Embeddings } from './protocol/embedding.js';
export { usage, type GenerateChunk, type FinishReason, type CompletionUsage } from './protocol/chunk.js';
export type { EngineConfig, LlmRegistration } from './protocol/engine-config.js';
export { workerConfig, type WorkerConfig, type WorkerConfigInput, type ShutdownConfig } from './protocol/worker-config.js';
export { DisaggregationMode, parseDisaggregationMode } from './protocol/disaggregation.js';
export type { KvEventSource, ZmqSource, PushSource } from './protocol/kv-events.js';
export type { KvTransfer, KvTransferHandle, KvStateHeader, ExportedKvState, PulledKvState } from './protocol/kv-transfer.js';
export type { SnapshotPublisher, ComponentSnapshot } from './worker/snapshot-publisher.js';
export { computeBlockHashes, computeSequenceHashes, type KvCacheEvents, loraId } from '@dynamo/llm';
export {
  workerSettings,
  workerSettingsFor,
  workerFlags,
  workerConfigFromFlags,
  workerEnvSettings,
  workerEnvConfig,
  workerEnvironmentHelp,
  type WorkerEnvConfig,
} from './settings.js';
export { parseFlags, formatHelp, type Flag, type Flags, type FlagValues, type ParsedFlags } from '@dynamo/runtime';
export { setting, withDefault, flagsOf, configOf, type Setting, type SettingsTable, type FlagsOf, type ConfigOf } from '@dynamo/runtime';
export { RawEngine, type RawEngineFactory, type RawObject } from './raw-engine.js';
export {
  runConformance,
  conformanceReport,
  runRawConformance,
  rawConformanceReport,
  ConformanceError,
  CONFORMANCE_CHECKS,
  RAW_CONFORMANCE_CHECKS,
  type ConformanceOptions,
  type ConformanceReport,
  type ConformanceCheckResult,
  type ConformanceFailureKind,
} from './conformance/run-conformance.js';
