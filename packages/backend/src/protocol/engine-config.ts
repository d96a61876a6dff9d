import { z } from 'zod';
import { parseOrThrow } from '@dynamo/runtime';

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/**
 * What an LLM engine advertises for registration and routing. Every field is optional: an
 * omitted one is "not advertised" and the router falls back to its defaults.
 */
export const LlmRegistrationSchema = z.strictObject({
  contextLength: z.uint32().optional(),
  kvCacheBlockSize: z.uint32().optional(),
  totalKvBlocks: count.optional(),
  maxNumSeqs: count.optional(),
  maxNumBatchedTokens: count.optional(),
  dataParallelSize: z.uint32().optional(),
  dataParallelStartRank: z.uint32().optional(),
  bootstrapHost: z.string().optional(),
  bootstrapPort: z.number().int().min(0).max(65535).optional(),
  enableEagle: z.boolean().optional(),
});

/**
 * Returned by `LLMEngine.start()`: the model the engine serves and how to register it.
 * (`model` may not be empty: the conformance kit reports `EmptyModelInConfig`.)
 */
export const EngineConfigSchema = z.strictObject({
  model: z.string(),
  servedModelName: z.string().optional(),
  modelAliases: z.array(z.string()).optional(),
  runtimeData: z.record(z.string(), z.unknown()).optional(),
  llm: LlmRegistrationSchema.optional(),
});

/** See {@link LlmRegistrationSchema}. */
export type LlmRegistration = z.infer<typeof LlmRegistrationSchema>;
/** See {@link EngineConfigSchema}. */
export type EngineConfig = z.infer<typeof EngineConfigSchema>;

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function snakeKeys(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [snake(k), v]),
  );
}

/**
 * Validates an engine's config and renders it with Dynamo's field names (`served_model_name`,
 * `llm.context_length`, ...). Throws `InvalidArgument` naming the offending field.
 */
export function engineConfigToWire(config: unknown): Record<string, unknown> {
  const parsed = parseOrThrow(EngineConfigSchema, config, 'EngineConfig');
  const { llm, runtimeData, ...rest } = parsed;
  return {
    ...snakeKeys(rest),
    ...(runtimeData === undefined ? {} : { runtime_data: runtimeData }),
    ...(llm === undefined ? {} : { llm: snakeKeys(llm) }),
  };
}
