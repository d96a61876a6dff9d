import { type Flags, type FlagValues, formatHelp } from '@dynamo/runtime';
import { z } from 'zod';

import type { FrontendOptions } from './options.js';
import { ROUTER_MODES } from './routing/router.js';

const count = (max: number) => z.coerce.number().int().min(0, 'must not be negative').max(max);
const positive = z.coerce.number().positive('must be positive').finite();

/** `dynamo-frontend`'s options: stock Dynamo's flag names and `DYN_*` variables. */
export const frontendFlags = {
  httpHost: { schema: z.string().min(1).default('0.0.0.0'), description: 'Address to listen on', env: 'DYN_HTTP_HOST', placeholder: 'HOST' },
  httpPort: { schema: count(65535).default(8000), description: 'Port to listen on (0: any free port)', env: 'DYN_HTTP_PORT', placeholder: 'PORT' },
  routerMode: { schema: z.enum(ROUTER_MODES).default('round-robin'), description: `How requests are spread over workers: ${ROUTER_MODES.join(', ')}`, env: 'DYN_ROUTER_MODE', placeholder: 'MODE' },
  migrationLimit: {
    schema: count(1000).optional(),
    description: "Times a request is resent to another worker when its worker fails mid-stream (default: the model card's migration_limit)",
    env: 'DYN_MIGRATION_LIMIT',
    placeholder: 'N',
  },
  namespace: { schema: z.string().regex(/^[a-zA-Z0-9_-]+$/, 'must match [a-zA-Z0-9_-]+').optional(), description: 'Serve only models in this namespace (default: all)', env: 'DYN_NAMESPACE', placeholder: 'NAME' },
  discoveryBackend: { schema: z.enum(['file', 'etcd', 'mem']).optional(), description: 'Where workers register: file (default), etcd or mem', env: 'DYN_DISCOVERY_BACKEND', placeholder: 'KIND' },
  requestPlane: { schema: z.enum(['tcp', 'nats']).optional(), description: 'How requests reach workers: tcp (default) or nats', env: 'DYN_REQUEST_PLANE', placeholder: 'KIND' },
  tlsCertPath: { schema: z.string().min(1).optional(), description: 'TLS certificate (PEM); serve HTTPS with --tls-key-path', placeholder: 'PATH' },
  tlsKeyPath: { schema: z.string().min(1).optional(), description: 'TLS private key (PEM)', placeholder: 'PATH' },
  modelPath: { schema: z.string().min(1).optional(), description: "Local model directory to use when a card's files are not readable here", placeholder: 'PATH' },
  metricsPrefix: { schema: z.string().regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a Prometheus name prefix').default('dynamo_frontend'), description: 'Prefix of the metric names', env: 'DYN_METRICS_PREFIX', placeholder: 'PREFIX' },
  httpBodyLimitMb: { schema: positive.default(45), description: 'Largest request body, in MiB (413 beyond)', env: 'DYN_HTTP_BODY_LIMIT_MB', placeholder: 'MB' },
  httpRequestTimeoutSecs: { schema: positive.default(30), description: 'Time a client has to send a whole request (408 beyond)', env: 'DYN_HTTP_REQUEST_TIMEOUT_SECS', placeholder: 'SECS' },
  httpGracefulShutdownTimeoutSecs: {
    schema: z.coerce.number().min(0, 'must not be negative').finite().default(5),
    description: 'On SIGTERM, time in-flight responses get to finish',
    env: 'DYN_HTTP_GRACEFUL_SHUTDOWN_TIMEOUT_SECS',
    placeholder: 'SECS',
  },
  enableForceIncludeUsage: { schema: z.boolean().default(false), boolean: true, description: 'End every stream with a usage chunk', env: 'DYN_ENABLE_FORCE_INCLUDE_USAGE' },
  ignoreOpenaiFeUnsupportedFields: { schema: z.boolean().default(false), boolean: true, description: 'Accept unknown request fields instead of answering 400', env: 'DYN_IGNORE_OPENAI_FE_UNSUPPORTED_FIELDS' },
  dynToolCallParser: {
    schema: z.string().min(1).optional(),
    description: "Tool-call parser for models whose workers name none (hermes, qwen3_coder, llama3_json, mistral, pythonic, deepseek_v3)",
    env: 'DYN_TOOL_CALL_PARSER',
    placeholder: 'NAME',
  },
  dynReasoningParser: {
    schema: z.string().min(1).optional(),
    description: 'Reasoning parser for models whose workers name none (basic, qwen3, deepseek_r1, ...)',
    env: 'DYN_REASONING_PARSER',
    placeholder: 'NAME',
  },
  reasoningFieldName: {
    schema: z.enum(['reasoning_content', 'reasoning']).default('reasoning_content'),
    description: 'Response field that carries reasoning: reasoning_content or reasoning',
    env: 'DYN_REASONING_FIELD_NAME',
    placeholder: 'FIELD',
  },
} satisfies Flags;

/** Parsed `dynamo-frontend` options. */
export type FrontendFlagValues = FlagValues<typeof frontendFlags>;

/** `--help` text. */
export function frontendHelp(): string {
  return formatHelp(
    'dynamo-frontend [options]',
    'OpenAI-compatible HTTP frontend for Dynamo: serves every model its workers register (chat and completions, streaming or not), routes requests and migrates them when a worker fails.',
    frontendFlags,
  );
}

/** The {@link FrontendOptions} that parsed flags describe; `env` feeds the runtime. */
export function frontendOptionsFromFlags(values: FrontendFlagValues, env: Readonly<Record<string, string | undefined>> = process.env): FrontendOptions {
  const optional = <K extends string, V>(key: K, value: V | undefined) => (value === undefined ? {} : ({ [key]: value } as Record<K, V>));
  return {
    host: values.httpHost,
    port: values.httpPort,
    routerMode: values.routerMode,
    ...optional('migrationLimit', values.migrationLimit),
    ...optional('namespace', values.namespace),
    ...optional('tlsCertPath', values.tlsCertPath),
    ...optional('tlsKeyPath', values.tlsKeyPath),
    ...optional('modelPath', values.modelPath),
    ...optional('toolCallParser', values.dynToolCallParser),
    ...optional('reasoningParser', values.dynReasoningParser),
    reasoningFieldName: values.reasoningFieldName,
    metricsPrefix: values.metricsPrefix,
    bodyLimitBytes: Math.round(values.httpBodyLimitMb * 1024 * 1024),
    requestTimeoutMs: Math.round(values.httpRequestTimeoutSecs * 1000),
    gracefulShutdownMs: Math.round(values.httpGracefulShutdownTimeoutSecs * 1000),
    forceIncludeUsage: values.enableForceIncludeUsage,
    ignoreUnknownFields: values.ignoreOpenaiFeUnsupportedFields,
    runtimeOptions: {
      env,
      overrides: { ...optional('discoveryBackend', values.discoveryBackend), ...optional('requestPlane', values.requestPlane) },
    },
  };
}
