import { type ConfigOf, flagsOf, type FlagValues, formatHelp, setting, workerEnvironmentHelp, workerSettingsFor } from '@dynamo/backend';
import { z } from 'zod';

/**
 * Settings of the sample engine, each written once (flag, help, default) with its place in the
 * config `fromArgs` builds the engine and its `WorkerConfig` from; the worker's own rows follow,
 * with the component named `sample` as in Dynamo's sample.
 */
export const sampleEngineSettings = {
  model: {
    name: setting('modelName', {
      schema: z.string().min(1, 'must not be empty').default('sample-model'),
      description: 'Model name the engine reports and is served as',
      placeholder: 'NAME',
    }),
    path: setting('modelPath', {
      schema: z.string().default(''),
      description: 'Model path or Hugging Face id for the model card ("" registers by name only)',
      placeholder: 'PATH',
    }),
  },
  /** `SampleEngineOptions` fields. */
  engine: {
    maxTokens: setting('maxTokens', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(1_000_000).default(16),
      description: 'Tokens per request when the request sets no max_tokens',
      placeholder: 'N',
    }),
    contextLength: setting('contextLength', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(10_000_000).default(2048),
      description: 'Context length the model card announces (prompt and answer together)',
      placeholder: 'N',
    }),
    delayMs: setting('delayMs', {
      schema: z.coerce.number().min(0, 'must not be negative').max(60_000).default(10),
      description: 'Delay before each token, in milliseconds',
      placeholder: 'MS',
    }),
    followPrompt: setting('followPrompt', {
      schema: z.boolean().default(false),
      boolean: true,
      description:
        "Continue the prompt: token i is the prompt's last token + i + 1, so a migrated request goes on with the same sequence (for migration and chaos tests)",
    }),
  },
  /** The simulated prefix cache (`SampleEngineOptions.kvCache` when enabled). */
  kvCache: {
    enabled: setting('simulateKvCache', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Simulate a paged prefix cache: publish its KV events and load, and charge prefill only for uncached prompt tokens (for KV-aware routing)',
    }),
    blockSize: setting('kvBlockSize', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(1024).default(16),
      description: 'Tokens per KV block of the simulated cache',
      placeholder: 'N',
    }),
    totalBlocks: setting('totalKvBlocks', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(10_000_000).default(16384),
      description: 'KV blocks of the simulated cache',
      placeholder: 'N',
    }),
    prefillMsPerToken: setting('prefillMsPerToken', {
      schema: z.coerce.number().min(0, 'must not be negative').max(1000).default(0.1),
      description: 'Simulated prefill time per uncached prompt token, in milliseconds',
      placeholder: 'MS',
    }),
  },
  ...workerSettingsFor('sample'),
};

/** Command-line options of the sample engine (from {@link sampleEngineSettings}). */
export const sampleEngineFlags = flagsOf(sampleEngineSettings);

/** Parsed sample engine options. */
export type SampleEngineFlagValues = FlagValues<typeof sampleEngineFlags>;

/** The sample engine's config: {@link sampleEngineSettings} section by section. */
export type SampleEngineConfig = ConfigOf<typeof sampleEngineSettings>;

/** `--help` text of the sample engine's options. */
export function sampleEngineHelp(usage = 'dynamo-sample-engine <command> [options]', summary = ''): string {
  return formatHelp(
    usage,
    summary || 'Sample Dynamo backend: emits rotating token ids (1, 2, 3, ...), no model needed.',
    sampleEngineFlags,
    workerEnvironmentHelp,
  );
}
