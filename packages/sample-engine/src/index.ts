/**
 * `@dynamo/sample-engine`: a model-free engine that emits rotating token ids, for smoke-testing
 * Dynamo serving pipelines, plus the `dynamo-sample-engine` CLI.
 *
 * @packageDocumentation
 */
export { SampleEngine, type SampleEngineOptions, sampleLogprobs, sampleEmbedding, SAMPLE_EMBEDDING_DIMENSIONS } from './engine.js';
export { sampleEngineSettings, sampleEngineFlags, sampleEngineHelp, type SampleEngineFlagValues, type SampleEngineConfig } from './settings.js';
