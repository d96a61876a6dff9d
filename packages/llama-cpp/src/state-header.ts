import { InvalidArgument, type KvStateHeader } from '@dynamo/backend';
import type { LlamaContext } from 'node-llama-cpp';

/** What a llama.cpp sequence state needs of the context that loads it, as the prefill worker describes its own. */
export interface StateLayout {
  /** The state's format: llama.cpp's sequence state file, as node-llama-cpp 3.21.1 writes it. */
  format: string;
  /** {@link modelDigest} of the GGUF. */
  model: string;
  /** The LoRA adapter applied, or none. */
  lora: string | null;
  /** Sequences of the context (`--parallel`): the state's cell layout depends on it. */
  parallel: number;
  context_size: number;
  flash_attention: string;
  kv_type_k: string;
  kv_type_v: string;
}

const FORMAT = 'llama.cpp sequence state (node-llama-cpp 3.21.1)';

/** Where each field comes from, for the error that names a mismatch. */
const SETTING: Record<keyof StateLayout, string> = {
  format: 'state format',
  model: 'model (digest of the GGUF)',
  lora: 'LoRA adapter',
  parallel: 'sequences per context (--parallel)',
  context_size: 'context size (--context-size)',
  flash_attention: 'flash attention',
  kv_type_k: 'KV cache key type',
  kv_type_v: 'KV cache value type',
};

/** The layout of `context`'s states, for a model of digest `model` and the adapter `lora`. */
export function stateLayout(context: LlamaContext, model: string, lora: string | undefined): StateLayout {
  return {
    format: FORMAT,
    model,
    lora: lora ?? null,
    parallel: context.totalSequences,
    context_size: context.contextSize,
    flash_attention: String(context.flashAttention),
    kv_type_k: String(context.kvCacheKeyType),
    kv_type_v: String(context.kvCacheValueType),
  };
}

/**
 * Checks a pulled state's header against this worker's layout before any of it is loaded
 * (llama.cpp may crash on a state of another model or layout); throws naming the first field that
 * differs, with both values.
 */
export function checkStateHeader(header: KvStateHeader, ours: StateLayout): void {
  for (const key of Object.keys(SETTING) as Array<keyof StateLayout>) {
    if (header[key] !== ours[key]) {
      throw new InvalidArgument(
        `the prefill worker's KV state does not fit this decode worker: ${SETTING[key]} is ${JSON.stringify(header[key] ?? null)} there and ${JSON.stringify(ours[key])} here`,
      );
    }
  }
}
