import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  configFromEnv,
  configOf,
  type ConfigOf,
  flagsOf,
  type FlagValues,
  runtimeAddressSettings,
  runtimeSettings,
  setting,
  withDefault,
} from '@dynamo/runtime';
import { DisaggregationModeSchema } from './protocol/disaggregation.js';
import { type WorkerConfig, type WorkerConfigInput, workerConfig } from './protocol/worker-config.js';
import { DEFAULT_KV_TRANSFER_MAX_BYTES } from './worker/kv-transfer.js';

const name = (fallback: string) =>
  z
    .string()
    .regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+')
    .default(fallback);

/** A JSON object given inline or as `@file`; a zod issue says what is wrong otherwise. */
const jsonObjectArgument = z
  .string()
  .optional()
  .transform((text, ctx) => {
    if (text === undefined) return undefined;
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
  });

/**
 * The settings every worker takes on its command line, each written once (Dynamo's flag name, its
 * `DYN_*` variable, help and default) with the `WorkerConfig` field it sets. An engine spreads
 * {@link workerFlags} into its own flags and turns the values into a `WorkerConfig` with
 * {@link workerConfigFromFlags}.
 */
export const workerSettings = {
  /** Where the worker registers and what it serves: `WorkerConfig` fields. */
  worker: {
    namespace: setting('namespace', { schema: name('dynamo'), description: 'Dynamo namespace to register in', env: 'DYN_NAMESPACE', placeholder: 'NAME' }),
    component: setting('component', { schema: name('backend'), description: 'Component name of this worker', env: 'DYN_COMPONENT', placeholder: 'NAME' }),
    endpoint: setting('endpoint', { schema: name('generate'), description: 'Endpoint that serves requests', env: 'DYN_ENDPOINT', placeholder: 'NAME' }),
    endpointTypes: setting('endpointTypes', {
      schema: z.string().default('chat,completions'),
      description: 'Comma-separated OpenAI surfaces to expose (chat, completions, ...)',
      env: 'DYN_ENDPOINT_TYPES',
      placeholder: 'LIST',
    }),
    disaggregationMode: setting('disaggregationMode', {
      schema: DisaggregationModeSchema.default('agg'),
      description: 'Role of this worker: agg, prefill, decode or encode',
      env: 'DYN_DISAGGREGATION_MODE',
      placeholder: 'MODE',
    }),
    migrationLimit: setting('migrationLimit', {
      schema: z.coerce.number().int().min(0).max(0xffff_ffff).default(0),
      description: 'How many times a frontend may move a request to another worker when this one fails',
      placeholder: 'N',
    }),
    healthCheckPayload: setting('healthCheckPayload', {
      schema: jsonObjectArgument,
      description: "Health canary request: a JSON object, or @FILE holding one (default: the engine's)",
      env: 'DYN_HEALTH_CHECK_PAYLOAD',
      placeholder: 'JSON|@FILE',
    }),
    customJinjaTemplate: setting('customJinjaTemplate', {
      schema: z.string().min(1).optional(),
      description: "A Jinja chat template that replaces the model's",
      env: 'DYN_CUSTOM_JINJA_TEMPLATE',
      placeholder: 'FILE',
    }),
    toolCallParser: setting('dynToolCallParser', {
      schema: z.string().min(1).optional(),
      description: "Tool-call parser frontends apply to this model's output (hermes, qwen3_coder, llama3_json, mistral, pythonic, deepseek_v3, ...)",
      env: 'DYN_TOOL_CALL_PARSER',
      placeholder: 'NAME',
    }),
    reasoningParser: setting('dynReasoningParser', {
      schema: z.string().min(1).optional(),
      description: "Reasoning parser frontends apply to this model's output (basic, qwen3, deepseek_r1, ...)",
      env: 'DYN_REASONING_PARSER',
      placeholder: 'NAME',
    }),
    structuralTagMode: setting('dynEnableStructuralTag', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Let frontends constrain tool calls with structural tags (hermes, qwen3_coder)',
      env: 'DYN_ENABLE_STRUCTURAL_TAG',
      to: (on): WorkerConfig['structuralTagMode'] => (on ? 'on' : 'off'),
    }),
    structuralTagScope: setting('dynStructuralTagScope', {
      schema: z.enum(['auto', 'always']).default('auto'),
      description: 'Structural tags for tool_choice auto: auto (only for strict tools or parallel_tool_calls false) or always',
      env: 'DYN_STRUCTURAL_TAG_SCOPE',
      placeholder: 'SCOPE',
    }),
    structuralTagSchema: setting('dynStructuralTagSchema', {
      schema: z.enum(['auto', 'strict']).default('auto'),
      description: 'Hold tool arguments to their schema: auto (unless a tool says strict: false) or strict (always)',
      env: 'DYN_STRUCTURAL_TAG_SCHEMA',
      placeholder: 'MODE',
    }),
    enableKvRouting: setting('disableKvRouting', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Do not publish KV events or load snapshots',
      to: (off) => !off,
    }),
  },
  /** The runtime the worker serves on (unset: its `DYN_*` variable, then `WorkerConfig`'s default). */
  runtime: {
    discoveryBackend: runtimeSettings.discoveryBackend,
    requestPlane: runtimeSettings.requestPlane,
    eventPlane: runtimeSettings.eventPlane,
  },
};

/**
 * {@link workerSettings} with an engine's own default component name (`--component`): spread it
 * into the engine's table beside its own sections.
 */
export function workerSettingsFor(component: string) {
  return { worker: { ...workerSettings.worker, component: withDefault(workerSettings.worker.component, component) }, runtime: workerSettings.runtime };
}

/**
 * The options every worker accepts, with Dynamo's flag names and `DYN_*` variables (from
 * {@link workerSettings}). Spread them into an engine's own flags and turn the values into a
 * `WorkerConfig` with {@link workerConfigFromFlags}.
 */
export const workerFlags = flagsOf(workerSettings);

/**
 * The `WorkerConfig` that parsed {@link workerFlags} values describe, with `extra` (the model path
 * as `modelName`, the served name, ...) on top. Throws `InvalidArgument` naming a bad field.
 */
export function workerConfigFromFlags(values: FlagValues<typeof workerFlags>, extra: WorkerConfigInput = {}): WorkerConfig {
  const { worker, runtime } = configOf(workerSettings, values);
  // Unset rows are undefined: WorkerConfig's defaults fill them.
  return workerConfig({ ...worker, ...runtime, ...extra });
}

/**
 * The settings a worker reads from its environment only, as stock's workers do (no flag): each
 * row's variable, help and default, and where it goes in {@link WorkerEnvConfig}. A bad value
 * stops the worker with an error naming the variable.
 */
export const workerEnvSettings = {
  lora: {
    /** Mount `/v1/loras` on the system server. */
    enabled: setting('loraEnabled', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Serve /v1/loras (load adapters by URI) on the system server',
      env: 'DYN_LORA_ENABLED',
    }),
    cacheDir: setting('loraPath', {
      schema: z.string().min(1).optional(),
      description: 'Where downloaded LoRA adapters are kept (default: ~/.cache/dynamo_loras)',
      env: 'DYN_LORA_PATH',
      placeholder: 'DIR',
    }),
  },
  kvTransfer: {
    maxBytes: setting('kvTransferMaxBytes', {
      schema: z.coerce.number().int().positive().default(DEFAULT_KV_TRANSFER_MAX_BYTES),
      description: 'Largest KV state a prefill or decode worker transfers, on both sides',
      env: 'DYN_KV_TRANSFER_MAX_BYTES',
      placeholder: 'BYTES',
    }),
  },
  health: {
    /** Used when the `WorkerConfig` has no payload of its own. */
    payload: workerSettings.worker.healthCheckPayload,
  },
};

/** A worker's environment-only settings (see {@link workerEnvSettings}). */
export type WorkerEnvConfig = ConfigOf<typeof workerEnvSettings>;

/**
 * The variables a worker's `--help` lists under "Environment (no flag)": its own
 * ({@link workerEnvSettings}) and the addresses it advertises to other hosts.
 */
export const workerEnvironmentHelp = { ...flagsOf(workerEnvSettings), ...flagsOf(runtimeAddressSettings) };

/** Reads {@link workerEnvSettings} from `env`; throws `InvalidArgument` naming a bad variable. */
export function workerEnvConfig(env: Readonly<Record<string, string | undefined>>): WorkerEnvConfig {
  return configFromEnv(workerEnvSettings, env);
}
