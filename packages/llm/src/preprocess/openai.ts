import { z } from 'zod';

/**
 * The OpenAI request fields the preprocessor reads, with the ranges stock Dynamo enforces.
 * Other fields are kept (loose objects) so they can pass through to engines.
 */

const stop = z.union([z.string(), z.array(z.string()).max(4, 'must hold at most 4 stop strings')]).nullish();
const nonNegInt = z.number().int().nonnegative();

const sampling = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(-1).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().gt(0).max(2).nullish(),
  seed: z.number().int().nullish(),
  n: z.number().int().min(1).max(128).nullish(),
  best_of: z.number().int().min(1).nullish(),
  stop,
  stop_token_ids: z.array(nonNegInt).nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  min_tokens: nonNegInt.nullish(),
  ignore_eos: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  nvext: z
    .looseObject({
      ignore_eos: z.boolean().nullish(),
      greed_sampling: z.boolean().nullish(),
      use_raw_prompt: z.boolean().nullish(),
      annotations: z.array(z.string()).nullish(),
      token_data: z.array(nonNegInt).nullish(),
      backend_instance_id: z.union([z.bigint(), nonNegInt]).nullish(),
    })
    .nullish(),
};

const message = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()]).optional(),
});

/** An OpenAI `/v1/chat/completions` body. */
export const ChatCompletionRequestSchema = z
  .looseObject({
    model: z.string().min(1),
    messages: z.array(message).min(1, 'must hold at least one message'),
    max_completion_tokens: z.number().int().min(1).nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    tools: z.array(z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }) })).nullish(),
    tool_choice: z.unknown().optional(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    chat_template_args: z.record(z.string(), z.unknown()).nullish(),
    ...sampling,
  })
  .refine((b) => b.min_tokens == null || (b.max_tokens ?? b.max_completion_tokens) == null || b.min_tokens <= (b.max_tokens ?? b.max_completion_tokens)!, {
    message: 'min_tokens must not exceed max_tokens',
    path: ['min_tokens'],
  });
export type ChatCompletionRequest = z.output<typeof ChatCompletionRequestSchema>;

/** An OpenAI `/v1/completions` body (one prompt: a string or token ids). */
export const CompletionRequestSchema = z
  .looseObject({
    model: z.string().min(1),
    prompt: z
      .union([z.string(), z.array(nonNegInt).min(1), z.array(z.string()).min(1), z.array(z.array(nonNegInt).min(1)).min(1)], {
        error: 'must be a string, an array of token ids, or a one-element array of either',
      })
      .refine((p) => typeof p === 'string' || typeof p[0] === 'number' || p.length === 1, 'batch prompts are not supported: give one prompt'),
    logprobs: z.number().int().min(0).max(5).nullish(),
    echo: z.boolean().nullish(),
    ...sampling,
  })
  .refine((b) => b.min_tokens == null || b.max_tokens == null || b.min_tokens <= b.max_tokens, {
    message: 'min_tokens must not exceed max_tokens',
    path: ['min_tokens'],
  });
export type CompletionRequest = z.output<typeof CompletionRequestSchema>;
