import { availableParallelism } from 'node:os';

import { type ConfigOf, flagsOf, type FlagValues, formatHelp, setting, workerEnvironmentHelp, workerSettingsFor } from '@dynamo/backend';
import { z } from 'zod';

/**
 * llama.cpp's threads wait for each other at every step by spinning, so one that loses its core
 * stalls them all: node-llama-cpp's default (4 here) made SmolLM2 take ~9 s a token on 2 cores,
 * and 2 threads fell to 0.3 tokens/s beside one busy process, while 1 thread kept ~60. One core is
 * left to the worker's own event loop and whatever shares the machine.
 */
export function defaultThreads(): number {
  return Math.max(1, availableParallelism() - 1);
}

/** `--gpu` values, as node-llama-cpp's `getLlama({ gpu })` takes them (`false`: CPU only). */
export const GPU_CHOICES = ['auto', 'cuda', 'vulkan', 'metal', 'false'] as const;

/**
 * Settings of `dynamo-llama-cpp`, each written once (flag, help, default) with its place in the
 * config `fromArgs` builds the engine and its `WorkerConfig` from; the worker's own rows follow,
 * with the component named `llama`.
 */
export const llamaCppSettings = {
  /** The GGUF file and the name it is served as. */
  model: {
    path: setting('modelPath', {
      schema: z.string().min(1, 'must name a .gguf file or a folder holding one'),
      description: 'The GGUF model: a .gguf file, a local folder holding one, or a Hugging Face repo (Org/Name[@revision]) of GGUF files (see --gguf-file)',
      placeholder: 'PATH',
    }),
    ggufFile: setting('ggufFile', {
      schema: z.string().min(1, 'must not be empty').optional(),
      description: 'Which .gguf file of the --model-path folder or repo to load (default: its only one)',
      placeholder: 'NAME',
    }),
    name: setting('modelName', {
      schema: z.string().min(1, 'must not be empty').optional(),
      description: 'Name the model is served as (default: the GGUF file name without .gguf)',
      placeholder: 'NAME',
    }),
  },
  /** `LlamaCppEngineOptions` fields. */
  engine: {
    gpu: setting('gpu', {
      schema: z.enum(GPU_CHOICES, { error: `expected one of ${GPU_CHOICES.join(', ')}` }).default('false'),
      description: 'Compute backend for llama.cpp: auto, cuda, vulkan, metal, or false for the CPU',
      placeholder: 'KIND',
      to: (kind) => (kind === 'false' ? false : kind),
    }),
    threads: setting('threads', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(1024).default(defaultThreads()),
      description: 'CPU threads llama.cpp uses (default: one less than the cores this process may use, at least 1)',
      placeholder: 'N',
    }),
    parallel: setting('parallel', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(256).default(4),
      description: 'Requests generated at once, one context sequence each (continuous batching)',
      placeholder: 'N',
    }),
    loraParallel: setting('loraParallel', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(256).default(1),
      description: 'Requests generated at once on each loaded LoRA adapter (each adapter gets a llama.cpp context of N sequences)',
      placeholder: 'N',
    }),
    maxQueued: setting('maxQueued', {
      schema: z.coerce.number().int().min(0, 'must not be negative').max(1_000_000).default(64),
      description:
        "Requests that may wait for a free sequence, per context (the base model's and each LoRA adapter's); past that a request is refused as overloaded",
      placeholder: 'N',
    }),
    contextSize: setting('contextSize', {
      schema: z.coerce.number().int().min(16, 'must be at least 16').max(10_000_000).default(4096),
      description: 'Tokens of KV cache per sequence: the longest prompt plus answer a request may have',
      placeholder: 'N',
    }),
    prefixCaching: setting('enablePrefixCaching', {
      schema: z.boolean().default(true),
      boolean: true,
      description:
        "Keep each sequence's KV cache between requests: a prompt that starts like a cached one (the next turn of a conversation) evaluates only what is new, and the cached blocks are published as KV events for KV-aware routers. --no-enable-prefix-caching empties each sequence when its request ends. Always off for recurrent and sliding-window models",
    }),
    slotPromptSimilarity: setting('slotPromptSimilarity', {
      schema: z.coerce.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1').default(0.5),
      description:
        "The least share of a prompt a cached sequence must hold for the request to take it, instead of an empty or the least recently used sequence (as llama-server's --slot-prompt-similarity)",
      placeholder: 'FRACTION',
    }),
    embedding: setting('embedding', {
      schema: z.boolean().default(false),
      boolean: true,
      description: "Serve the model's embeddings (/v1/embeddings) instead of generating: registers for embeddings, with llama.cpp's embedding context",
    }),
    kvTransferTimeoutSecs: setting('kvTransferTimeout', {
      schema: z.coerce.number().positive('must be more than 0').max(86_400).default(60),
      description:
        "With --disaggregation-mode prefill: seconds a prompt's KV state waits for its decode worker to pull it before it is dropped (the decode worker then evaluates the prompt itself)",
      placeholder: 'SECS',
    }),
  },
  ...workerSettingsFor('llama'),
};

/** Command-line options of `dynamo-llama-cpp` (from {@link llamaCppSettings}). */
export const llamaCppFlags = flagsOf(llamaCppSettings);

/** `dynamo-llama-cpp`'s config: {@link llamaCppSettings} section by section. */
export type LlamaCppConfig = ConfigOf<typeof llamaCppSettings>;

/** Parsed `dynamo-llama-cpp` options. */
export type LlamaCppFlagValues = FlagValues<typeof llamaCppFlags>;

/** `--help` text of `dynamo-llama-cpp`. */
export function llamaCppHelp(): string {
  return formatHelp(
    'dynamo-llama-cpp --model-path MODEL.gguf [options]',
    'A Dynamo worker that generates with llama.cpp (node-llama-cpp) from a GGUF model. It registers the\nmodel card from the same GGUF, so any Dynamo frontend templates and tokenizes for it. Runtime settings\ncome from DYN_* and ETCD_*/NATS_* variables (DYN_SYSTEM_PORT for /health and /metrics, ...).',
    llamaCppFlags,
    workerEnvironmentHelp,
  );
}
