/**
 * `@dynamo/llm`: Dynamo's LLM layer for TypeScript. Register a model for an endpoint so a
 * Dynamo frontend serves it ({@link registerLlm}), and preprocess / postprocess OpenAI requests
 * the way a Dynamo frontend does ({@link Preprocessor}, {@link postprocess}).
 */
export { ModelInput } from './model-input.js';
export { ModelType, type ModelTypeFlags } from './model-type.js';
export type { CheckedFile, ModelDeploymentCard, RuntimeConfig, RuntimeConfigInput, WorkerType } from './card/schema.js';
export { buildCard, type CardOptions } from './card/build.js';
export { LocalModel, type LoadModelOptions, type ModelFile, type FileSlot, type GgufSummary } from './local-model.js';
export { registerLlm, unregisterLlm, type RegisterLlmOptions, type RegisteredModel } from './register.js';
export { loraId } from './lora.js';
export { resolveModelPath, type ResolvedModelPath, type ResolveOptions } from './model-path/index.js';
export type { ChatCompletionRequest, CompletionRequest } from './preprocess/openai.js';
export { PreprocessedRequestSchema, type PreprocessedRequest } from './preprocess/preprocessed-request.js';
export { Preprocessor, type PreprocessOptions } from './preprocess/preprocessor.js';
export type { EmbeddingRequest, EmbeddingsOutput } from './embeddings/request.js';
export { postprocess, type EngineOutput, type TextDelta, type ChoiceDelta, type TokenLogprob, type TopLogprob } from './postprocess/postprocessor.js';
export { Tokenizer, PromptFormatter, Detokenizer, computeBlockHashes, computeSequenceHashes } from '@dynamo/core';
export type { KvCacheEvents } from './kv/kv-event-publisher.js';
