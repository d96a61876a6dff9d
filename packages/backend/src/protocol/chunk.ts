import { z } from 'zod';

/**
 * Why a stream ended. `"abort"` is accepted as an alias of `"cancelled"`; an error carries its
 * message as `{ error: "..." }`.
 */
export const FinishReasonSchema = z.union([z.enum(['eos', 'length', 'stop', 'cancelled', 'abort', 'content_filter']), z.strictObject({ error: z.string() })]);

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

/** Fields of a chunk that {@link mergeChunks} knows how to join; any other set field keeps chunks apart. */
const MERGEABLE = new Set(['token_ids', 'index', 'log_probs', 'top_logprobs', 'finish_reason', 'completion_usage']);

const isSet = (value: unknown): boolean => value !== undefined && value !== null;

/**
 * Two consecutive chunks of one choice as one: the token ids (and their log probabilities) in
 * order, the later chunk's finish reason and usage. `undefined` when they must stay apart: the
 * first already finished or carries usage, their choices differ, only one has log probabilities,
 * or either sets a field this does not join (`disaggregated_params`, `engine_data`, ...).
 */
export function mergeChunks(held: GenerateChunk, next: GenerateChunk): GenerateChunk | undefined {
  if (!Array.isArray(held.token_ids) || !Array.isArray(next.token_ids)) return undefined;
  if (isSet(held.finish_reason) || isSet(held.completion_usage) || held.index !== next.index) return undefined;
  for (const chunk of [held, next]) for (const key in chunk) if (!MERGEABLE.has(key) && isSet((chunk as Record<string, unknown>)[key])) return undefined;
  if (isSet(held.log_probs) !== isSet(next.log_probs) || isSet(held.top_logprobs) !== isSet(next.top_logprobs)) return undefined;
  const merged: GenerateChunk = { token_ids: [...held.token_ids, ...next.token_ids] };
  if (held.index !== undefined) merged.index = held.index;
  if (isSet(held.log_probs)) merged.log_probs = [...held.log_probs!, ...next.log_probs!];
  if (isSet(held.top_logprobs)) merged.top_logprobs = [...held.top_logprobs!, ...next.top_logprobs!];
  if (isSet(next.finish_reason)) merged.finish_reason = next.finish_reason;
  if (isSet(next.completion_usage)) merged.completion_usage = next.completion_usage;
  return merged;
}
