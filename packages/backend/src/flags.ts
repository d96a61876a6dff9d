import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Flags, FlagValues } from '@dynamo/runtime';
import { DisaggregationModeSchema } from './protocol/disaggregation.js';
import { type WorkerConfig, type WorkerConfigInput, workerConfig } from './protocol/worker-config.js';

const name = (fallback: string) =>
  z
    .string()
    .regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+')
    .default(fallback);

/**
 * The options every worker accepts, with Dynamo's flag names and `DYN_*` variables. Spread them
 * into an engine's own flags and turn the values into a `WorkerConfig` with `workerConfig()`.
 */
export const workerFlags = {
  namespace: { schema: name('dynamo'), description: 'Dynamo namespace to register in', env: 'DYN_NAMESPACE', placeholder: 'NAME' },
  component: { schema: name('backend'), description: 'Component name of this worker', env: 'DYN_COMPONENT', placeholder: 'NAME' },
  endpoint: { schema: name('generate'), description: 'Endpoint that serves requests', env: 'DYN_ENDPOINT', placeholder: 'NAME' },
  endpointTypes: {
    schema: z.string().default('chat,completions'),
    description: 'Comma-separated OpenAI surfaces to expose (chat, completions, ...)',
    env: 'DYN_ENDPOINT_TYPES',
    placeholder: 'LIST',
  },
  discoveryBackend: {
    schema: z.enum(['file', 'etcd', 'mem']).default('file'),
    description: 'Where workers register: file (embedded, one machine), etcd, or mem (one process)',
    env: 'DYN_DISCOVERY_BACKEND',
    placeholder: 'KIND',
  },
  requestPlane: {
    schema: z.enum(['tcp', 'nats']).default('tcp'),
    description: 'How requests reach the worker',
    env: 'DYN_REQUEST_PLANE',
    placeholder: 'KIND',
  },
  disaggregationMode: {
    schema: DisaggregationModeSchema.default('agg'),
    description: 'Role of this worker: agg, prefill, decode or encode',
    env: 'DYN_DISAGGREGATION_MODE',
    placeholder: 'MODE',
  },
  migrationLimit: {
    schema: z.coerce.number().int().min(0).max(0xffff_ffff).default(0),
    description: 'How many times a frontend may move a request to another worker when this one fails',
    placeholder: 'N',
  },
  healthCheckPayload: {
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => (text === undefined ? undefined : jsonObjectArgument(text, ctx))),
    description: "Health canary request: a JSON object, or @FILE holding one (default: the engine's)",
    env: 'DYN_HEALTH_CHECK_PAYLOAD',
    placeholder: 'JSON|@FILE',
  },
  customJinjaTemplate: {
    schema: z.string().min(1).optional(),
    description: "A Jinja chat template that replaces the model's",
    env: 'DYN_CUSTOM_JINJA_TEMPLATE',
    placeholder: 'FILE',
  },
  dynToolCallParser: {
    schema: z.string().min(1).optional(),
    description: "Tool-call parser frontends apply to this model's output (hermes, qwen3_coder, llama3_json, mistral, pythonic, deepseek_v3, ...)",
    env: 'DYN_TOOL_CALL_PARSER',
    placeholder: 'NAME',
  },
  dynReasoningParser: {
    schema: z.string().min(1).optional(),
    description: "Reasoning parser frontends apply to this model's output (basic, qwen3, deepseek_r1, ...)",
    env: 'DYN_REASONING_PARSER',
    placeholder: 'NAME',
  },
  dynEnableStructuralTag: {
    schema: z.boolean().default(false),
    boolean: true,
    description: 'Let frontends constrain tool calls with structural tags (hermes, qwen3_coder)',
    env: 'DYN_ENABLE_STRUCTURAL_TAG',
  },
  dynStructuralTagScope: {
    schema: z.enum(['auto', 'always']).default('auto'),
    description: 'Structural tags for tool_choice auto: auto (only for strict tools or parallel_tool_calls false) or always',
    env: 'DYN_STRUCTURAL_TAG_SCOPE',
    placeholder: 'SCOPE',
  },
  dynStructuralTagSchema: {
    schema: z.enum(['auto', 'strict']).default('auto'),
    description: 'Hold tool arguments to their schema: auto (unless a tool says strict: false) or strict (always)',
    env: 'DYN_STRUCTURAL_TAG_SCHEMA',
    placeholder: 'MODE',
  },
  disableKvRouting: { schema: z.boolean().default(false), boolean: true, description: 'Do not publish KV events or load snapshots' },
} satisfies Flags;

/**
 * The `WorkerConfig` that parsed {@link workerFlags} values describe, with `extra` (the model path
 * as `modelName`, the served name, ...) on top. Throws `InvalidArgument` naming a bad field.
 */
export function workerConfigFromFlags(values: FlagValues<typeof workerFlags>, extra: WorkerConfigInput = {}): WorkerConfig {
  const {
    disableKvRouting,
    healthCheckPayload,
    customJinjaTemplate,
    dynToolCallParser,
    dynReasoningParser,
    dynEnableStructuralTag,
    dynStructuralTagScope,
    dynStructuralTagSchema,
    ...common
  } = values;
  return workerConfig({
    ...common,
    structuralTagMode: dynEnableStructuralTag ? 'on' : 'off',
    structuralTagScope: dynStructuralTagScope,
    structuralTagSchema: dynStructuralTagSchema,
    enableKvRouting: !disableKvRouting,
    ...(healthCheckPayload && { healthCheckPayload }),
    ...(customJinjaTemplate && { customJinjaTemplate }),
    ...(dynToolCallParser && { toolCallParser: dynToolCallParser }),
    ...(dynReasoningParser && { reasoningParser: dynReasoningParser }),
    ...extra,
  });
}

/** A JSON object given inline or as `@file`; a zod issue says what is wrong otherwise. */
function jsonObjectArgument(text: string, ctx: z.RefinementCtx): Record<string, unknown> {
  let json = text;
  if (text.startsWith('@')) {
    try {
      json = readFileSync(text.slice(1), 'utf8');
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `cannot read ${text.slice(1)}: ${(err as Error).message}` });
      return z.NEVER;
    }
  }
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not valid JSON: ${(err as Error).message}` });
  }
  return z.NEVER;
}
