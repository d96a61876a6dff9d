/**
 * `@dynamo/llama-cpp`: a Dynamo engine on llama.cpp (through node-llama-cpp) for GGUF models, and
 * the `dynamo-llama-cpp` worker CLI.
 */
export { LlamaCppEngine, type LlamaCppEngineOptions } from './engine.js';
export { defaultThreads, llamaCppSettings, llamaCppFlags, llamaCppHelp, type LlamaCppFlagValues, type LlamaCppConfig, GPU_CHOICES } from './settings.js';
export { resolveGguf } from './gguf-path.js';
