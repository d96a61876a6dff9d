/**
 * `@dynamo/llm`: Dynamo's LLM layer for TypeScript. Register a model for an endpoint so a
 * Dynamo frontend serves it ({@link registerLlm}), and preprocess / postprocess OpenAI requests
 * the way a Dynamo frontend does ({@link Preprocessor}, {@link postprocess}).
 */
export { ModelInput, ModelInputSchema } from './model-input.js';
export { ModelType, type ModelTypeFlags, modelTypeToWire, modelTypeFromWire, normalizeModelType } from './model-type.js';
export {
  CheckedFileSchema,
  type CheckedFile,
  ModelDeploymentCardSchema,
  type ModelDeploymentCard,
  RuntimeConfigSchema,
  type RuntimeConfig,
  type RuntimeConfigInput,
  WorkerTypeSchema,
  type WorkerType,
  N_CHOICES_KEY,
} from './card/schema.js';
export { buildCard, type CardOptions } from './card/build.js';
export { mdcsum } from './card/mdcsum.js';
export { slugify } from './card/slug.js';
export { LocalModel, type LoadModelOptions, type ModelFile, type FileSlot, type GgufSummary } from './local-model.js';
export { registerLlm, unregisterLlm, type RegisterLlmOptions, type RegisteredModel } from './register.js';
export { resolveModelPath, type ResolvedModelPath, type ResolveOptions } from './model-path/index.js';
export { ChatCompletionRequestSchema, type ChatCompletionRequest, CompletionRequestSchema, type CompletionRequest } from './preprocess/openai.js';
export { promptBatch } from './preprocess/validate.js';
export { DEFAULT_MAX_DATA_URL_BYTES } from './preprocess/multimodal.js';
export { templateArgs, REASONING_EFFORTS } from './preprocess/reasoning-args.js';
export {
  PreprocessedRequestSchema,
  type PreprocessedRequest,
  StopConditionsSchema,
  SamplingOptionsSchema,
  OutputOptionsSchema,
} from './preprocess/preprocessed-request.js';
export { Preprocessor, type PreprocessOptions } from './preprocess/preprocessor.js';
export {
  EmbeddingRequestSchema,
  type EmbeddingRequest,
  type PreprocessedEmbeddingRequest,
  EmbeddingsOutputSchema,
  type EmbeddingsOutput,
  embeddingInputs,
} from './embeddings/request.js';
export { embeddingToBase64, embeddingFromBase64, float32Json } from './embeddings/codec.js';
export { ChatOutputParser, joinParts, modelParsers, type ChatParts, type ModelParsers, type ToolCallDelta } from './postprocess/chat-parsing.js';
export {
  postprocess,
  postprocessBatches,
  postprocessChoices,
  OutputPostprocessor,
  EngineOutputSchema,
  type EngineOutput,
  type TextDelta,
  type ChoiceDelta,
  type TokenLogprob,
  type TopLogprob,
} from './postprocess/postprocessor.js';
export { Tokenizer, PromptFormatter, Detokenizer, computeBlockHashes, computeSequenceHashes, fileChecksumBlake3 } from '@dynamo/core';
export { KvEventPublisher, KV_EVENTS_TOPIC, type KvCacheEvents, type KvEventPublisherOptions } from './kv/kv-event-publisher.js';
export { LoadPublisher, KV_METRICS_TOPIC, LOAD_DEBOUNCE_MS, LOAD_HEARTBEAT_MS, type WorkerLoad } from './kv/load-publisher.js';
