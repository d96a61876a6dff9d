import { z } from 'zod';

const tokenId = z.uint32();

/**
 * An embedding request as a worker receives it from a Dynamo frontend (stock's
 * `PreprocessedEmbeddingRequest`): the token ids of every input, in input order. Keys this schema
 * does not name flow through untouched.
 */
export const EmbedRequestSchema = z.looseObject({
  token_ids: z.array(z.array(tokenId)),
  model: z.string().optional(),
  /** The client's output format; informational, the worker always answers base64. */
  encoding_format: z.enum(['float', 'base64']).nullish(),
  truncate_prompt_tokens: z.number().int().nullish(),
  /** Output dimensions the client asked for (an engine that can shorten its vectors does). */
  dimensions: z.uint32().nullish(),
  mdc_sum: z.string().nullish(),
  annotations: z.array(z.string()).optional(),
});

/** An embedding request (see {@link EmbedRequestSchema}). */
export type EmbedRequest = z.infer<typeof EmbedRequestSchema>;

/** What `LLMEngine.embed` returns: one vector per input, in input order, and the tokens it read. */
export interface Embeddings {
  embeddings: ArrayLike<number>[];
  /** Tokens read; the inputs' token counts when omitted. */
  prompt_tokens?: number;
}

/** Whether a request body is an embedding request (its `token_ids` is a list of lists). */
export function isEmbedRequest(body: unknown): boolean {
  const ids = (body as { token_ids?: unknown } | null)?.token_ids;
  return Array.isArray(ids) && ids.length > 0 && Array.isArray(ids[0]);
}
