/**
 * `@dynamo/llm/internal`: what the other `@dynamo/*` packages build on besides the public API.
 * No semver promise: it changes with the packages that use it. Applications use `@dynamo/llm`.
 *
 * @packageDocumentation
 */

export { ModelInputSchema } from './model-input.js';
export { modelTypeToWire, modelTypeFromWire, normalizeModelType } from './model-type.js';
export { CheckedFileSchema, ModelDeploymentCardSchema, RuntimeConfigSchema, WorkerTypeSchema, N_CHOICES_KEY } from './card/schema.js';
export { mdcsum } from './card/mdcsum.js';
export { slugify } from './card/slug.js';
export { ChatCompletionRequestSchema, CompletionRequestSchema } from './preprocess/openai.js';
export { promptBatch } from './preprocess/validate.js';
export { DEFAULT_MAX_DATA_URL_BYTES } from './preprocess/multimodal.js';
export { templateArgs, REASONING_EFFORTS } from './preprocess/reasoning-args.js';
export { StopConditionsSchema, SamplingOptionsSchema, OutputOptionsSchema } from './preprocess/preprocessed-request.js';
export { EmbeddingRequestSchema, type PreprocessedEmbeddingRequest, EmbeddingsOutputSchema, embeddingInputs } from './embeddings/request.js';
export { embeddingToBase64, embeddingFromBase64, float32Json } from './embeddings/codec.js';
export { ChatOutputParser, joinParts, modelParsers, type ChatParts, type ModelParsers, type ToolCallDelta } from './postprocess/chat-parsing.js';
export {
  postprocessBatches,
  postprocessChoices,
  OutputPostprocessor,
  EngineOutputSchema,
  streamProcessor,
  stopOptions,
  type EventIds,
} from './postprocess/postprocessor.js';
export { fileChecksumBlake3 } from '@dynamo/core';
export { KvEventPublisher, KV_EVENTS_TOPIC, type KvEventPublisherOptions } from './kv/kv-event-publisher.js';
export { LoadPublisher, KV_METRICS_TOPIC, LOAD_DEBOUNCE_MS, LOAD_HEARTBEAT_MS, type WorkerLoad } from './kv/load-publisher.js';
export { resolveLoraSource, loraCacheDir, type LoraSourceOptions } from './lora-source.js';
