import { z } from 'zod';

const u32 = z.number().int().min(0).max(0xffff_ffff);

/**
 * An OpenAI `/v1/embeddings` body as stock Dynamo 1.6.1 reads it, with its extensions
 * (`add_special_tokens`, `truncate_prompt_tokens`, `nvext.annotations`); other fields are kept and
 * ignored, as stock ignores them.
 */
export const EmbeddingRequestSchema = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(z.string()), z.array(u32), z.array(z.array(u32))], {
    error: 'must be a string, an array of strings, an array of token ids, or an array of token id arrays',
  }),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: u32.min(1, 'must be at least 1').nullish(),
  user: z.string().nullish(),
  add_special_tokens: z.boolean().nullish(),
  truncate_prompt_tokens: z.number().int().min(-1, 'must be -1 (the context length) or more').nullish(),
  nvext: z.looseObject({ annotations: z.array(z.string()).nullish() }).nullish(),
});
export type EmbeddingRequest = z.output<typeof EmbeddingRequestSchema>;

/**
 * What a Tokens-input embedding worker receives (stock's `PreprocessedEmbeddingRequest`): every
 * input's token ids, in input order, in one request.
 */
export interface PreprocessedEmbeddingRequest {
  token_ids: number[][];
  model: string;
  encoding_format?: 'float' | 'base64';
  truncate_prompt_tokens?: number;
  dimensions: number | null;
  mdc_sum: string;
  annotations: string[];
}

/** What an embedding worker answers (stock's `EmbeddingsEngineOutput`): base64 float32 vectors, in input order. */
export const EmbeddingsOutputSchema = z.looseObject({
  embeddings: z.array(z.string()),
  prompt_tokens: u32,
  total_tokens: u32,
});
export type EmbeddingsOutput = z.output<typeof EmbeddingsOutputSchema>;

/** The inputs of an embeddings body, one string or id list each. */
export function embeddingInputs(input: EmbeddingRequest['input']): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (input.length > 0 && typeof input[0] === 'number') return [input as number[]];
  return input as Array<string | number[]>;
}
