import { type FlagValues, formatHelp, workerFlags } from '@dynamo/backend';
import { z } from 'zod';

/** Command-line options of the sample engine, with Dynamo's sample defaults. */
export const sampleEngineFlags = {
  modelName: {
    schema: z.string().min(1, 'must not be empty').default('sample-model'),
    description: 'Model name the engine reports and is served as',
    placeholder: 'NAME',
  },
  modelPath: {
    schema: z.string().default(''),
    description: 'Model path or Hugging Face id for the model card ("" registers by name only)',
    placeholder: 'PATH',
  },
  maxTokens: {
    schema: z.coerce.number().int().min(1, 'must be at least 1').max(1_000_000).default(16),
    description: 'Tokens per request when the request sets no max_tokens',
    placeholder: 'N',
  },
  delayMs: {
    schema: z.coerce.number().min(0, 'must not be negative').max(60_000).default(10),
    description: 'Delay before each token, in milliseconds',
    placeholder: 'MS',
  },
  ...workerFlags,
  component: { ...workerFlags.component, schema: workerFlags.component.schema.removeDefault().default('sample') },
};

/** Parsed sample engine options. */
export type SampleEngineFlagValues = FlagValues<typeof sampleEngineFlags>;

/** `--help` text of the sample engine's options. */
export function sampleEngineHelp(usage = 'dynamo-sample-engine <command> [options]', summary = ''): string {
  return formatHelp(usage, summary || 'Sample Dynamo backend: emits rotating token ids (1, 2, 3, ...), no model needed.', sampleEngineFlags);
}
