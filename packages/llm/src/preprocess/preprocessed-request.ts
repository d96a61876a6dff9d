import { z } from 'zod';

const ids = z.array(z.number().int().nonnegative());

/** Dynamo's `stop_conditions`: when the engine (and the frontend) stop generating. */
export const StopConditionsSchema = z.looseObject({
  max_tokens: z.number().int().nonnegative().nullish(),
  stop: z.array(z.string()).nullish(),
  stop_token_ids: ids.nullish(),
  stop_token_ids_visible: ids.nullish(),
  stop_token_ids_hidden: ids.nullish(),
  min_tokens: z.number().int().nonnegative().nullish(),
  ignore_eos: z.boolean().nullish(),
  max_thinking_tokens: z.number().int().nonnegative().nullish(),
});

/** Dynamo's `sampling_options`. */
export const SamplingOptionsSchema = z.looseObject({
  n: z.number().int().nullish(),
  best_of: z.number().int().nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  repetition_penalty: z.number().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  top_k: z.number().int().nullish(),
  min_p: z.number().nullish(),
  use_beam_search: z.boolean().nullish(),
  length_penalty: z.number().nullish(),
  seed: z.number().int().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  guided_decoding: z.unknown().nullish(),
});

/** Dynamo's `output_options`. */
export const OutputOptionsSchema = z.looseObject({
  logprobs: z.number().int().nullish(),
  prompt_logprobs: z.number().int().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  formatted_prompt: z.boolean().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
});

/**
 * What a Tokens-input worker receives from a Dynamo frontend. Every optional field may be
 * missing or null; unknown fields are kept.
 */
export const PreprocessedRequestSchema = z.looseObject({
  model: z.string(),
  token_ids: ids,
  stop_conditions: StopConditionsSchema.default({}),
  sampling_options: SamplingOptionsSchema.default({}),
  output_options: OutputOptionsSchema.default({}),
  eos_token_ids: ids.default([]),
  mdc_sum: z.string().nullish(),
  annotations: z.array(z.string()).default([]),
  routing: z.record(z.string(), z.unknown()).nullish(),
  router_config_override: z.unknown().nullish(),
});
export type PreprocessedRequest = z.input<typeof PreprocessedRequestSchema>;
