/**
 * Model paths for `registerLlm`: a local model directory, a GGUF file, or a Hugging Face repo id
 * resolved from the local Hugging Face cache or downloaded into it.
 *
 * ```ts
 * const model = await resolveModelPath('Qwen/Qwen3-0.6B'); // { kind: 'dir', path: '~/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B/snapshots/…' }
 * ```
 *
 * @module
 */

export { resolveModelPath } from './resolve.js';
export type { ResolvedModelPath, ResolveOptions } from './types.js';
export type { ProgressMode } from './progress.js';
export { loadHfEnv, type HfEnv } from './hf-env.js';
export { parseRepoRef, type RepoRef } from './repo-id.js';
export { repoFolderName } from './hf-cache.js';
