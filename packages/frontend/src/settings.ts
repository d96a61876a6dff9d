import type { DistributedRuntime, RuntimeOptions } from '@dynamo/runtime';
import {
  type ConfigOf,
  configFromOptions,
  flagsOf,
  type FlagValues,
  formatHelp,
  type OptionsOf,
  runtimeAddressSettings,
  runtimeSettings,
  setting,
} from '@dynamo/runtime';
import { z } from 'zod';

import { ROUTER_MODES, type RouterFactory } from './routing/router.js';

const count = (max: number) => z.coerce.number().int().min(0, 'must not be negative').max(max);
const positive = z.coerce.number().positive('must be positive').finite();
const fraction = z.coerce.number().min(0, 'must not be negative').finite();
/** An optional value that the word `None` or an empty string (stock's spellings) also leave unset. */
const unsettable = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && ['None', ''].includes(v.trim()) ? undefined : v), schema.optional());
const mib = (mb: number) => Math.round(mb * 1024 * 1024);
const ms = (secs: number) => Math.round(secs * 1000);

/**
 * Every setting of `dynamo-frontend`, each written once: its flag (stock Dynamo's name), its
 * `DYN_*` variable, its help and default, and where it goes in the config `startFrontend` hands
 * down (`config.http.port`, ...), converted to the unit the code uses. `startFrontend` takes the same
 * names as options (`{ httpPort: 8000, routerMode: 'kv' }`).
 */
export const frontendSettings = {
  /** The HTTP server and the APIs it serves. */
  http: {
    host: setting('httpHost', { schema: z.string().min(1).default('0.0.0.0'), description: 'Address to listen on', env: 'DYN_HTTP_HOST', placeholder: 'HOST' }),
    port: setting('httpPort', {
      schema: count(65535).default(8000),
      description: 'Port to listen on (0: any free port)',
      env: 'DYN_HTTP_PORT',
      placeholder: 'PORT',
    }),
    tlsCertPath: setting('tlsCertPath', {
      schema: z.string().min(1).optional(),
      description: 'TLS certificate (PEM); serve HTTPS with --tls-key-path',
      placeholder: 'PATH',
    }),
    tlsKeyPath: setting('tlsKeyPath', { schema: z.string().min(1).optional(), description: 'TLS private key (PEM)', placeholder: 'PATH' }),
    bodyLimitBytes: setting('httpBodyLimitMb', {
      schema: positive.default(45),
      description: 'Largest request body, in MiB (413 beyond)',
      env: 'DYN_HTTP_BODY_LIMIT_MB',
      placeholder: 'MB',
      to: mib,
    }),
    requestTimeoutMs: setting('httpRequestTimeoutSecs', {
      schema: positive.default(30),
      description: 'Time a client has to send a whole request (408 beyond)',
      env: 'DYN_HTTP_REQUEST_TIMEOUT_SECS',
      placeholder: 'SECS',
      to: ms,
    }),
    headersTimeoutMs: setting('httpHeadersTimeoutSecs', {
      schema: positive.default(30),
      description: "Time a connected client has to send a request's headers (408 and closed beyond)",
      env: 'DYN_HTTP_HEADERS_TIMEOUT_SECS',
      placeholder: 'SECS',
      to: ms,
    }),
    keepAliveTimeoutMs: setting('httpKeepAliveTimeoutSecs', {
      schema: positive.default(5),
      description: 'Time an idle keep-alive connection stays open after a response',
      env: 'DYN_HTTP_KEEP_ALIVE_TIMEOUT_SECS',
      placeholder: 'SECS',
      to: ms,
    }),
    maxConnections: setting('httpMaxConnections', {
      schema: count(10_000_000).default(16_384),
      description: 'Connections open at once from all clients; more are closed (0: no limit)',
      env: 'DYN_HTTP_MAX_CONNECTIONS',
      placeholder: 'N',
    }),
    maxConnectionsPerIp: setting('httpMaxConnectionsPerIp', {
      schema: count(10_000_000).default(4_096),
      description: 'Connections open at once from one address; more are closed (0: no limit)',
      env: 'DYN_HTTP_MAX_CONNECTIONS_PER_IP',
      placeholder: 'N',
    }),
    maxRequestsPerSocket: setting('httpMaxRequestsPerSocket', {
      schema: count(10_000_000).default(0),
      description: 'Requests one keep-alive connection may carry before it is closed, so clients reconnect and spread over frontend replicas (0: no limit)',
      env: 'DYN_HTTP_MAX_REQUESTS_PER_SOCKET',
      placeholder: 'N',
    }),
    gracefulShutdownMs: setting('httpGracefulShutdownTimeoutSecs', {
      schema: z.coerce.number().min(0, 'must not be negative').finite().default(5),
      description: 'On SIGTERM, time in-flight responses get to finish',
      env: 'DYN_HTTP_GRACEFUL_SHUTDOWN_TIMEOUT_SECS',
      placeholder: 'SECS',
      to: ms,
    }),
    overloadStatus: setting('httpOverloadStatusCode', {
      schema: z.coerce.number().int().min(200, 'must be 200 to 999').max(999, 'must be 200 to 999').default(529),
      description: 'Status of an answer when every worker is too busy (overloaded)',
      env: 'DYN_HTTP_OVERLOAD_STATUS_CODE',
      placeholder: 'CODE',
    }),
    sseKeepAliveMs: setting('httpSseKeepAliveIntervalMs', {
      schema: count(3_600_000).default(15_000),
      description: 'Send an SSE keep-alive comment after this much silence in a stream (0: never)',
      env: 'DYN_HTTP_SSE_KEEP_ALIVE_INTERVAL_MS',
      placeholder: 'MS',
    }),
    maxDataUrlBytes: setting('mmMaxDataUrlMb', {
      schema: positive.default(16),
      description: 'Largest data: URL in an image, video or audio content part, in MiB (400 beyond)',
      env: 'DYN_MM_MAX_DATA_URL_MB',
      placeholder: 'MB',
      to: mib,
    }),
    adminApi: setting('disableFrontendAdminApi', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Do not serve the admin routes (/busy_threshold)',
      env: 'DYN_DISABLE_FRONTEND_ADMIN_API',
      to: (off: boolean) => !off,
    }),
    anthropicApi: setting('enableAnthropicApi', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Serve the Anthropic Messages API: /v1/messages and /v1/messages/count_tokens',
      env: 'DYN_ENABLE_ANTHROPIC_API',
    }),
    stripAnthropicPreamble: setting('stripAnthropicPreamble', {
      schema: z.boolean().default(true),
      boolean: true,
      description:
        "Anthropic API: drop Claude Code's x-anthropic-billing-header line from the start of the system prompt (it changes per session and spoils prefix caching)",
      env: 'DYN_STRIP_ANTHROPIC_PREAMBLE',
    }),
    forceIncludeUsage: setting('enableForceIncludeUsage', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'End every stream with a usage chunk',
      env: 'DYN_ENABLE_FORCE_INCLUDE_USAGE',
    }),
    ignoreUnknownFields: setting('ignoreOpenaiFeUnsupportedFields', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Accept unknown request fields instead of answering 400',
      env: 'DYN_IGNORE_OPENAI_FE_UNSUPPORTED_FIELDS',
    }),
    reasoningField: setting('reasoningFieldName', {
      schema: z.enum(['reasoning_content', 'reasoning']).default('reasoning_content'),
      description: 'Response field that carries reasoning: reasoning_content or reasoning',
      env: 'DYN_REASONING_FIELD_NAME',
      placeholder: 'FIELD',
    }),
    metricsPrefix: setting('metricsPrefix', {
      schema: z
        .string()
        .regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a Prometheus name prefix')
        .default('dynamo_frontend'),
      description: 'Prefix of the metric names',
      env: 'DYN_METRICS_PREFIX',
      placeholder: 'PREFIX',
    }),
  },
  /** Where requests go. */
  routing: {
    mode: setting('routerMode', {
      schema: z.enum(ROUTER_MODES).default('round-robin'),
      description: `How requests are spread over workers: ${ROUTER_MODES.join(', ')}`,
      env: 'DYN_ROUTER_MODE',
      placeholder: 'MODE',
    }),
    policyConfig: setting('routerPolicyConfig', {
      schema: z.string().min(1).optional(),
      description: "KV router: stock's router policy YAML (queue classes: busy threshold, queue_policy, request_queue_limit_per_worker; root or per model)",
      env: 'DYN_ROUTER_POLICY_CONFIG',
      placeholder: 'PATH',
    }),
    sessionAffinityTtlSecs: setting('routerSessionAffinityTtlSecs', {
      schema: z.coerce
        .number()
        .int('must be a whole number')
        .min(1, 'must be between 1 and 31536000')
        .max(31_536_000, 'must be between 1 and 31536000')
        .optional(),
      description:
        "Keep the requests of a session (x-dynamo-session-id, or a coding agent's session header) on one worker until it has been idle this long (default: off)",
      env: 'DYN_ROUTER_SESSION_AFFINITY_TTL_SECS',
      placeholder: 'SECS',
    }),
    sessionAffinityMode: setting('routerSessionAffinityMode', {
      schema: z.enum(['hard', 'soft']).default('hard'),
      description: "hard: a session's requests always go to its worker; soft: while that worker is not busy, else elsewhere and the session follows",
      env: 'DYN_ROUTER_SESSION_AFFINITY_MODE',
      placeholder: 'MODE',
    }),
  },
  /** The KV router's weights and switches (`--router-mode kv`); unset ones are stock's defaults. */
  kvRouter: {
    blockSize: setting('kvCacheBlockSize', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(65536).optional(),
      description: "KV router: tokens per block (default: the model card's)",
      env: 'DYN_KV_CACHE_BLOCK_SIZE',
      placeholder: 'N',
    }),
    useKvEvents: setting('routerKvEvents', {
      schema: z.boolean().default(true),
      boolean: true,
      aliases: ['kv-events'],
      description: "KV router: follow workers' KV events; --no-router-kv-events guesses each worker's cache from past routing instead",
      env: 'DYN_ROUTER_USE_KV_EVENTS',
    }),
    temperature: setting('routerTemperature', {
      schema: fraction.optional(),
      description: 'KV router: softmax temperature over worker costs (0: always the cheapest)',
      env: 'DYN_ROUTER_TEMPERATURE',
      placeholder: 'T',
    }),
    overlapScoreWeight: setting('routerKvOverlapScoreWeight', {
      schema: fraction.optional(),
      aliases: ['kv-overlap-score-weight'],
      description: 'KV router: deprecated alias of --router-prefill-load-scale (wins when set; 0 also drops the cache credit)',
      env: 'DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT',
      placeholder: 'W',
    }),
    prefillLoadScale: setting('routerPrefillLoadScale', {
      schema: fraction.optional(),
      description: 'KV router: weight of the prompt work a worker would still do (default 1)',
      env: 'DYN_ROUTER_PREFILL_LOAD_SCALE',
      placeholder: 'W',
    }),
    overlapScoreCredit: setting('routerKvOverlapScoreCredit', {
      schema: fraction.max(1, 'must be at most 1').optional(),
      description: 'KV router: prompt blocks each cached block saves, 0 to 1 (default 1)',
      env: 'DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT',
      placeholder: 'C',
    }),
    overlapScoreCreditDecay: setting('routerKvOverlapScoreCreditDecay', {
      schema: fraction.optional(),
      description: 'KV router: how fast that credit shrinks on a worker behind in prefill (default 0)',
      env: 'DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT_DECAY',
      placeholder: 'D',
    }),
    decodeActiveRequestWeight: setting('routerDecodeActiveRequestWeight', {
      schema: fraction.optional(),
      description: 'KV router: weight of each request in flight on a worker (default 0)',
      env: 'DYN_ROUTER_DECODE_ACTIVE_REQUEST_WEIGHT',
      placeholder: 'W',
    }),
    assumeKvReuse: setting('routerAssumeKvReuse', {
      schema: z.boolean().default(true),
      boolean: true,
      description: 'KV router: count blocks a worker holds for other requests once (--no-router-assume-kv-reuse counts them again)',
      env: 'DYN_ROUTER_ASSUME_KV_REUSE',
    }),
    ttlSecs: setting('routerTtlSecs', {
      schema: positive.optional(),
      description: 'KV router without KV events: how long a guessed cached block lives (default 120)',
      env: 'DYN_ROUTER_TTL_SECS',
      placeholder: 'SECS',
    }),
    replicaSync: setting('routerReplicaSync', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'KV router: share what this frontend placed with the other frontends of a model, so they do not double-book a worker',
      env: 'DYN_ROUTER_REPLICA_SYNC',
    }),
    queueThreshold: setting('routerQueueThreshold', {
      schema: unsettable(fraction),
      description:
        'KV router: queue requests while every worker has more prompt tokens in prefill than this fraction of its max_num_batched_tokens (deprecated in stock 1.6; None: no queue)',
      env: 'DYN_ROUTER_QUEUE_THRESHOLD',
      placeholder: 'FRAC',
    }),
    queuePolicy: setting('routerQueuePolicy', {
      schema: z.enum(['fcfs', 'wspt']).default('fcfs'),
      description: 'KV router: order of the queue, fcfs or wspt (shortest prompt first)',
      env: 'DYN_ROUTER_QUEUE_POLICY',
      placeholder: 'POLICY',
    }),
  },
  /** When a worker is busy, in the wire names `/busy_threshold` uses (unset: that check is off). */
  busyThresholds: {
    active_decode_blocks_threshold: setting('activeDecodeBlocksThreshold', {
      schema: unsettable(fraction.max(1, 'must be at most 1')),
      description: 'A worker is busy past this fraction of its KV blocks in use; busy workers get no requests, and 529 when all are (None: off, the default)',
      env: 'DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD',
      placeholder: 'FRAC',
    }),
    active_prefill_tokens_threshold: setting('activePrefillTokensThreshold', {
      schema: unsettable(count(1e15)),
      description: 'A worker is busy past this many prompt tokens waiting for prefill (None: off)',
      env: 'DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD',
      placeholder: 'N',
    }),
    active_prefill_tokens_threshold_frac: setting('activePrefillTokensThresholdFrac', {
      schema: unsettable(fraction),
      description: 'A worker is busy past this fraction of its max_num_batched_tokens waiting for prefill (None: off)',
      env: 'DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC',
      placeholder: 'FRAC',
    }),
  },
  /** Resending a request whose worker failed. */
  migration: {
    limit: setting('migrationLimit', {
      schema: count(1000).optional(),
      description: "Times a request is resent to another worker when its worker fails mid-stream (default: the model card's migration_limit)",
      env: 'DYN_MIGRATION_LIMIT',
      placeholder: 'N',
    }),
    maxSeqLen: setting('migrationMaxSeqLen', {
      schema: z.coerce.number().int().min(1, 'must be at least 1').max(0xffff_ffff).optional(),
      description: "Past this many tokens (prompt and output) a request is not migrated any more (default: the model's context length)",
      env: 'DYN_MIGRATION_MAX_SEQ_LEN',
      placeholder: 'N',
    }),
    backendStreamTimeoutMs: setting('httpBackendStreamTimeoutSecs', {
      schema: count(86_400).default(0),
      description: "A worker's stream that sends nothing this long (its first token included) is given up and the request migrated (0: never)",
      env: 'DYN_HTTP_BACKEND_STREAM_TIMEOUT_SECS',
      placeholder: 'SECS',
      to: ms,
    }),
  },
  /** Which models are served, and how their output is parsed. */
  models: {
    namespace: setting('namespace', {
      schema: z
        .string()
        .regex(/^[a-zA-Z0-9_-]+$/, 'must match [a-zA-Z0-9_-]+')
        .optional(),
      description: 'Serve only models in this namespace (default: all)',
      env: 'DYN_NAMESPACE',
      placeholder: 'NAME',
    }),
    modelPath: setting('modelPath', {
      schema: z.string().min(1).optional(),
      description: "Local model directory to use when a card's files are not readable here",
      placeholder: 'PATH',
    }),
    toolCallParser: setting('dynToolCallParser', {
      schema: z.string().min(1).optional(),
      description: 'Tool-call parser for models whose workers name none (hermes, qwen3_coder, llama3_json, mistral, pythonic, deepseek_v3)',
      env: 'DYN_TOOL_CALL_PARSER',
      placeholder: 'NAME',
    }),
    reasoningParser: setting('dynReasoningParser', {
      schema: z.string().min(1).optional(),
      description: 'Reasoning parser for models whose workers name none (basic, qwen3, deepseek_r1, ...)',
      env: 'DYN_REASONING_PARSER',
      placeholder: 'NAME',
    }),
  },
  /** The distributed runtime (unset: its own `DYN_*` settings). */
  runtime: {
    discoveryBackend: runtimeSettings.discoveryBackend,
    requestPlane: runtimeSettings.requestPlane,
    eventPlane: runtimeSettings.eventPlane,
  },
};

/** `dynamo-frontend`'s flags, from {@link frontendSettings}. */
export const frontendFlags = flagsOf(frontendSettings);

/** Parsed `dynamo-frontend` flags: {@link startFrontend}'s options with their defaults applied. */
export type FrontendFlagValues = FlagValues<typeof frontendFlags>;

/** The frontend's config: {@link frontendSettings} section by section, in the units the code uses. */
export type FrontendConfig = ConfigOf<typeof frontendSettings>;

/** The settings {@link startFrontend} takes by name, as `dynamo-frontend` takes them as flags. */
export type FrontendSettings = OptionsOf<typeof frontendSettings>;

/** Everything {@link startFrontend} accepts. */
export interface FrontendOptions extends FrontendSettings {
  /** A router per model instead of the built-in `routerMode` (e.g. a KV-aware one). */
  router?: RouterFactory;
  /** A runtime to use (the caller shuts it down); else one is created from `runtimeOptions`. */
  runtime?: DistributedRuntime;
  /** How to create the runtime (its environment, for one); the `runtime` settings override it. */
  runtimeOptions?: RuntimeOptions;
}

/** Checks settings (defaults applied, unknown names refused with `InvalidArgument`) and makes the config. */
export function frontendConfig(settings: FrontendSettings): FrontendConfig {
  return configFromOptions(frontendSettings, settings);
}

/** `--help` text. */
export function frontendHelp(): string {
  return formatHelp(
    'dynamo-frontend [options]',
    'OpenAI-compatible HTTP frontend for Dynamo: serves every model its workers register (chat and completions, streaming or not), routes requests and migrates them when a worker fails.',
    frontendFlags,
    flagsOf(runtimeAddressSettings),
  );
}
