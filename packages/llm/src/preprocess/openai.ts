import { z } from 'zod';

import { guidedFields, ToolChoiceSchema } from './guided-decoding.js';
import { REASONING_EFFORTS, ThinkingSchema } from './reasoning-args.js';

/**
 * The OpenAI request fields the preprocessor reads, typed as stock Dynamo deserializes them
 * (ranges it checks afterwards live in validate.ts). Other fields are kept (loose objects).
 */

const u32 = z.number().int().min(0).max(0xffff_ffff);
const u8 = z.number().int().min(0).max(255);
const f = z.number();

const sampling = {
  temperature: f.nullish(),
  top_p: f.nullish(),
  top_k: z.number().int().nullish(),
  min_p: f.nullish(),
  frequency_penalty: f.nullish(),
  presence_penalty: f.nullish(),
  repetition_penalty: f.nullish(),
  length_penalty: f.nullish(),
  use_beam_search: z.boolean().nullish(),
  seed: z.number().int().nullish(),
  n: u8.nullish(),
  best_of: u8.nullish(),
  // Strings to stop at, or (as stock accepts) token ids to stop at.
  stop: z.union([z.string(), z.array(z.string()), z.array(u32)], { error: 'must be a string, an array of strings, or an array of token ids' }).nullish(),
  stop_token_ids: z.array(u32).nullish(),
  max_tokens: u32.nullish(),
  min_tokens: u32.nullish(),
  ignore_eos: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() }).nullish(),
  ...guidedFields,
  nvext: z
    .looseObject({
      ignore_eos: z.boolean().nullish(),
      greed_sampling: z.boolean().nullish(),
      annotations: z.array(z.string()).nullish(),
      token_data: z.array(u32).nullish(),
    })
    .nullish(),
};

const message = z.looseObject({
  role: z.enum(['developer', 'system', 'user', 'assistant', 'tool', 'function']),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()]).optional(),
});

/** An OpenAI `/v1/chat/completions` body. */
export const ChatCompletionRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(message),
  max_completion_tokens: u32.nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: u8.nullish(),
  // Only `name` is declared: zod puts declared keys first, and the template renders the rest in the client's order.
  tools: z.array(z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }) })).nullish(),
  tool_choice: ToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  chat_template_args: z.record(z.string(), z.unknown()).nullish(),
  reasoning_effort: z.enum(REASONING_EFFORTS).nullish(),
  thinking: ThinkingSchema.nullish(),
  ...sampling,
});
export type ChatCompletionRequest = z.output<typeof ChatCompletionRequestSchema>;

/** An OpenAI `/v1/completions` body: one prompt or a batch, each a string or token ids. */
export const CompletionRequestSchema = z.looseObject({
  model: z.string(),
  prompt: z.union([z.string(), z.array(u32), z.array(z.string()), z.array(z.array(u32))], {
    error: 'must be a string, an array of token ids, or an array of either',
  }),
  logprobs: u8.nullish(),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
  ...sampling,
});
export type CompletionRequest = z.output<typeof CompletionRequestSchema>;
