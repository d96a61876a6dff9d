import { z } from 'zod';

const tokenId = z.uint32();

/** Stop conditions of a request (Dynamo's `stop_conditions`). */
export const StopConditionsSchema = z.looseObject({
  max_tokens: z.uint32().nullish(),
  stop: z.array(z.string()).nullish(),
  stop_token_ids: z.array(tokenId).nullish(),
  stop_token_ids_hidden: z.array(tokenId).nullish(),
  min_tokens: z.uint32().nullish(),
  ignore_eos: z.boolean().nullish(),
  max_thinking_tokens: z.uint32().nullish(),
});

/**
 * A preprocessed request as a worker receives it: token ids in, wire field names as Dynamo sends
 * them. Keys this schema does not name flow through untouched.
 */
export const GenerateRequestSchema = z.looseObject({
  token_ids: z.array(tokenId),
  model: z.string().optional(),
  sampling_options: z.record(z.string(), z.unknown()).optional(),
  stop_conditions: StopConditionsSchema.optional(),
  output_options: z.record(z.string(), z.unknown()).optional(),
  eos_token_ids: z.array(tokenId).optional(),
  require_reasoning: z.boolean().optional(),
  prefill_result: z.record(z.string(), z.unknown()).nullish(),
  bootstrap_info: z.record(z.string(), z.unknown()).nullish(),
  multi_modal_data: z.record(z.string(), z.unknown()).nullish(),
  mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  extra_args: z.record(z.string(), z.unknown()).nullish(),
  routing: z.record(z.string(), z.unknown()).nullish(),
  _HEALTH_CHECK: z.boolean().optional(),
});

/** A preprocessed request (see {@link GenerateRequestSchema}). */
export type GenerateRequest = z.infer<typeof GenerateRequestSchema>;
/** Dynamo's `stop_conditions`. */
export type StopConditions = z.infer<typeof StopConditionsSchema>;
