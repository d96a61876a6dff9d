import { z } from 'zod';

/**
 * Why a stream ended. `"abort"` is accepted as an alias of `"cancelled"`; an error carries its
 * message as `{ error: "..." }`.
 */
export const FinishReasonSchema = z.union([
  z.enum(['eos', 'length', 'stop', 'cancelled', 'abort', 'content_filter']),
  z.strictObject({ error: z.string() }),
]);

/** Token accounting on a terminal chunk (OpenAI `CompletionUsage`). */
export const CompletionUsageSchema = z.looseObject({
  prompt_tokens: z.uint32(),
  completion_tokens: z.uint32(),
  total_tokens: z.uint32(),
  prompt_tokens_details: z.record(z.string(), z.unknown()).nullish(),
  completion_tokens_details: z.record(z.string(), z.unknown()).nullish(),
});

/**
 * One item of an engine's output stream. Non-terminal chunks carry tokens only; exactly one
 * terminal chunk, the last, sets `finish_reason` (and should carry `completion_usage`).
 */
export const GenerateChunkSchema = z.looseObject({
  token_ids: z.array(z.uint32()),
  index: z.uint32().optional(),
  finish_reason: FinishReasonSchema.nullish(),
  completion_usage: CompletionUsageSchema.nullish(),
  disaggregated_params: z.record(z.string(), z.unknown()).nullish(),
  encoder_result: z.record(z.string(), z.unknown()).nullish(),
  log_probs: z.array(z.number()).nullish(),
  top_logprobs: z.array(z.array(z.record(z.string(), z.unknown()))).nullish(),
  engine_data: z.record(z.string(), z.unknown()).nullish(),
});

/** Why a stream ended (see {@link FinishReasonSchema}). */
export type FinishReason = z.infer<typeof FinishReasonSchema>;
/** Token accounting on a terminal chunk. */
export type CompletionUsage = z.infer<typeof CompletionUsageSchema>;
/** One item of an engine's output stream (see {@link GenerateChunkSchema}). */
export type GenerateChunk = z.infer<typeof GenerateChunkSchema>;

/** `{prompt_tokens, completion_tokens, total_tokens}` with the total computed for you. */
export function usage(promptTokens: number, completionTokens: number): CompletionUsage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}
