import { z } from 'zod';

/** What a worker's endpoint accepts, in Dynamo's wire form. */
export const ModelInput = {
  /** OpenAI-style text requests; the worker does its own preprocessing. */
  Text: 'Text',
  /** Preprocessed requests (`token_ids` ...); the frontend renders templates and tokenizes. */
  Tokens: 'Tokens',
  /** Tensor requests (KServe-style models). */
  Tensor: 'Tensor',
} as const;

/** One of {@link ModelInput}'s values. */
export type ModelInput = (typeof ModelInput)[keyof typeof ModelInput];

/** Validates a model input as it appears on the wire. */
export const ModelInputSchema = z.enum(['Text', 'Tokens', 'Tensor']);
