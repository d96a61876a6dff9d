import { z } from 'zod';

import { ModelInputSchema } from '../model-input.js';

const u32 = z.number().int().min(0).max(0xffff_ffff);
const u64 = z.union([z.bigint(), z.number().int().nonnegative()]);

/** A file a card refers to: where it is (absolute path or `hf://repo/file` URL) and its checksum. */
export const CheckedFileSchema = z.looseObject({
  path: z.string().min(1),
  checksum: z.string().regex(/^blake3:[0-9a-f]{64}$/, 'must be "blake3:" and 64 lowercase hex digits'),
  size: u64.nullish(),
});
export type CheckedFile = z.output<typeof CheckedFileSchema>;

const templateFile = z.looseObject({ is_custom: z.boolean().default(false), file: CheckedFileSchema });

/**
 * Engine facts a worker publishes with its model (stock `ModelRuntimeConfig`); unknown keys are
 * kept so newer fields pass through.
 */
export const RuntimeConfigSchema = z.looseObject({
  context_length: u32.nullish(),
  total_kv_blocks: u64.nullable().default(null),
  max_num_seqs: u64.nullable().default(null),
  max_num_batched_tokens: u64.nullable().default(null),
  tool_call_parser: z.string().nullable().default(null),
  reasoning_parser: z.string().nullable().default(null),
  tool_call_arguments_format: z.string().default('json_string'),
  structural_tag_mode: z.string().default('off'),
  structural_tag_scope: z.string().default('auto'),
  structural_tag_schema: z.unknown().default('auto'),
  exclude_tools_when_tool_choice_none: z.boolean().default(true),
  data_parallel_start_rank: u32.default(0),
  data_parallel_size: u32.min(1).default(1),
  enable_local_indexer: z.boolean().default(true),
  runtime_data: z.record(z.string(), z.unknown()).optional(),
  enable_eagle: z.boolean().default(false),
});
export type RuntimeConfig = z.output<typeof RuntimeConfigSchema>;

/**
 * The `runtime_config.runtime_data` key by which a worker's card says it answers a request for
 * `sampling_options.n` choices with all of them (chunks tagged with `index`), as every worker of
 * `@dynamo/backend` does; a frontend asks other workers (stock's may ignore `n`) for each choice
 * separately.
 */
export const N_CHOICES_KEY = 'n_choices';
/** What a caller may pass as runtime config (every field optional). */
export type RuntimeConfigInput = z.input<typeof RuntimeConfigSchema>;

/** A worker's role in a (possibly disaggregated) deployment, as cards spell it. */
export const WorkerTypeSchema = z.enum(['aggregated', 'prefill', 'decode', 'encode']);
export type WorkerType = z.output<typeof WorkerTypeSchema>;

/**
 * The model deployment card, with stock Dynamo's field names. Readers are liberal (unknown
 * fields are kept); writers emit exactly these names.
 */
export const ModelDeploymentCardSchema = z.looseObject({
  display_name: z.string().min(1),
  slug: z.string().min(1),
  source_path: z.string().nullish(),
  model_info: z.looseObject({ hf_config_json: CheckedFileSchema }).nullish(),
  tokenizer: z
    .union([
      z.looseObject({ hf_tokenizer_json: CheckedFileSchema }),
      z.looseObject({ tik_token_model: CheckedFileSchema }),
      z.looseObject({ gguf: CheckedFileSchema }),
    ])
    .nullish(),
  prompt_formatter: z.looseObject({ hf_tokenizer_config_json: CheckedFileSchema }).nullish(),
  chat_template_file: z.union([z.looseObject({ hf_chat_template: templateFile }), z.looseObject({ hf_chat_template_json: templateFile })]).nullish(),
  gen_config: z.looseObject({ hf_generation_config_json: CheckedFileSchema }).nullish(),
  prompt_context: z.unknown().nullish(),
  architectural_max_context_length: u32.nullish(),
  context_length: u32.default(0),
  kv_cache_block_size: u32.default(16),
  migration_limit: u32.default(0),
  model_type: z.string(),
  model_input: ModelInputSchema,
  worker_type: WorkerTypeSchema.or(z.literal('')).default('aggregated'),
  needs: z.array(z.array(z.string())).default([]),
  user_data: z.unknown().nullish(),
  runtime_config: RuntimeConfigSchema.default(RuntimeConfigSchema.parse({})),
  media_decoder: z.unknown().nullish(),
  media_fetcher: z.unknown().nullish(),
  /** Set on a LoRA adapter's card: the adapter's name (the served model name) and GPU slots. */
  lora: z.looseObject({ name: z.string().min(1), max_gpu_lora_count: u32.nullish() }).nullish(),
});
export type ModelDeploymentCard = z.output<typeof ModelDeploymentCardSchema>;
