import type { DistributedRuntime, RuntimeOptions } from '@dynamo/runtime';
import { z } from 'zod';

import { ROUTER_MODES, type RouterFactory } from './routing/router.js';

const weight = z.number().min(0).finite();

/** The KV router's settings, with stock's flag behind each. */
export const KvRouterSettingsSchema = z.strictObject({
  /** Tokens per block for hashing prompts (`--kv-cache-block-size`; default: the card's). */
  blockSize: z.number().int().min(1).max(65536).optional(),
  /** Follow workers' KV events (`--router-kv-events`); false guesses from past decisions. */
  useKvEvents: z.boolean().default(true),
  /** Softmax temperature over worker costs (`--router-temperature`; 0 picks the cheapest). */
  temperature: weight.optional(),
  /** Deprecated alias of `prefillLoadScale` (`--kv-overlap-score-weight`); wins when set. */
  overlapScoreWeight: weight.optional(),
  /** Weight of the prefill term (`--router-prefill-load-scale`, default 1). */
  prefillLoadScale: weight.optional(),
  /** Prompt work each cached block saves, 0 to 1 (`--router-kv-overlap-score-credit`, default 1). */
  overlapScoreCredit: z.number().min(0).max(1).optional(),
  /** Credit decay on workers behind in prefill (`--router-kv-overlap-score-credit-decay`, default 0). */
  overlapScoreCreditDecay: weight.optional(),
  /** Weight of each request in flight (`--router-decode-active-request-weight`, default 0). */
  decodeActiveRequestWeight: weight.optional(),
  /** Count blocks a worker already holds for other requests once (`--router-assume-kv-reuse`). */
  assumeKvReuse: z.boolean().default(true),
  /** Lifetime of a guessed block without KV events (`--router-ttl-secs`, default 120). */
  ttlSecs: z.number().positive().finite().optional(),
  /** Share each placed request with the model's other frontends (`--router-replica-sync`), so they do not double-book a worker. */
  replicaSync: z.boolean().default(false),
  /** Queue requests while every worker has more prompt tokens in prefill than this fraction of its batch (`--router-queue-threshold`, deprecated in stock). */
  queueThreshold: z.number().min(0).finite().optional(),
  /** The queue's order: `fcfs` (arrival) or `wspt` (shortest prompt first) (`--router-queue-policy`). */
  queuePolicy: z.enum(['fcfs', 'wspt']).default('fcfs'),
  /** Stock's router policy YAML (`--router-policy-config`): per-model queue classes with thresholds, order and limits. */
  policyConfig: z.string().min(1).optional(),
});

/**
 * When a worker is busy (left out of routing; 529 when all are), in every router mode, from the
 * workers' load reports (and in `kv` mode the KV router's own count). Unset: that check is off.
 * `POST /busy_threshold` changes them per model at run time.
 */
export const BusyThresholdSettingsSchema = z.strictObject({
  /** Busy above this fraction of its KV blocks in use (`--active-decode-blocks-threshold`). */
  activeDecodeBlocksThreshold: z.number().min(0).max(1).optional(),
  /** Busy above this many prompt tokens waiting for prefill (`--active-prefill-tokens-threshold`). */
  activePrefillTokensThreshold: z.number().int().min(0).optional(),
  /** The same as a fraction of its card's `max_num_batched_tokens` (`--active-prefill-tokens-threshold-frac`). */
  activePrefillTokensThresholdFrac: z.number().min(0).finite().optional(),
});

/** Session affinity (stock's `--router-session-affinity-*`): a session's requests stay on one worker. */
export const SessionAffinitySettingsSchema = z.strictObject({
  /** How long a binding outlives its session's last request, in seconds (1 to 31536000). */
  ttlSecs: z.number().int().min(1).max(31_536_000),
  /** `hard` (default): always its worker while that worker is there; `soft`: its worker while it is not busy. */
  mode: z.enum(['hard', 'soft']).default('hard'),
});

/** The settings of {@link startFrontend} that have plain values; checked with this schema. */
export const FrontendSettingsSchema = z.object({
  /** Address to listen on. */
  host: z.string().min(1).default('0.0.0.0'),
  /** Port to listen on; 0 picks a free one (see the handle's `port`). */
  port: z.number().int().min(0).max(65535).default(8000),
  /** Built-in routing: `round-robin`, `random`, `power-of-two`, `least-loaded`, `kv` or `direct` (ignored when `router` is given). */
  routerMode: z.enum(ROUTER_MODES).default('round-robin'),
  /** The KV router's settings (`routerMode: 'kv'`), stock's defaults when unset. */
  kvRouter: KvRouterSettingsSchema.prefault({}),
  /** When a worker counts as busy (all checks off by default, as in stock). */
  busyThresholds: BusyThresholdSettingsSchema.prefault({}),
  /** Keep each session's requests (`x-dynamo-session-id` and coding agents' session headers) on one worker; off when unset. */
  sessionAffinity: SessionAffinitySettingsSchema.optional(),
  /** Serve the admin routes (`/busy_threshold`); stock's `DYN_DISABLE_FRONTEND_ADMIN_API` turns them off. */
  adminApi: z.boolean().default(true),
  /** Resends allowed when a worker fails mid-request; overrides the cards' `migration_limit`. */
  migrationLimit: z.number().int().min(0).max(1000).optional(),
  /** Past this many tokens (prompt and output) a request is not migrated any more; default: the model's context length. */
  migrationMaxSeqLen: z.number().int().min(1).optional(),
  /** Silence after which a worker's stream is given up and the request migrated (stock's `DYN_HTTP_BACKEND_STREAM_TIMEOUT_SECS`); 0: never. */
  backendStreamTimeoutMs: z.number().int().min(0).default(0),
  /** Serve only the models registered in this namespace. */
  namespace: z
    .string()
    .regex(/^[a-zA-Z0-9_-]+$/, 'must match [a-zA-Z0-9_-]+')
    .optional(),
  /** TLS certificate and key (PEM files); both or neither. */
  tlsCertPath: z.string().min(1).optional(),
  tlsKeyPath: z.string().min(1).optional(),
  /** Largest request body accepted (413 beyond); stock's default is 45 MiB. */
  bodyLimitBytes: z
    .number()
    .int()
    .positive()
    .default(45 * 1024 * 1024),
  /** How long a client may take to send a whole request before a 408. */
  requestTimeoutMs: z.number().int().positive().default(30_000),
  /** How long a connected client may take to send a request's headers before a 408 and the socket closed. */
  headersTimeoutMs: z.number().int().positive().default(30_000),
  /** How long an idle keep-alive connection stays open after a response. */
  keepAliveTimeoutMs: z.number().int().positive().default(5_000),
  /** Connections open at once from all clients; more are closed at once (0: no limit). */
  maxConnections: z.number().int().min(0).default(16_384),
  /** Connections open at once from one address; more are closed at once (0: no limit). */
  maxConnectionsPerIp: z.number().int().min(0).default(4_096),
  /** How long shutdown waits for in-flight responses before cutting them off. */
  gracefulShutdownMs: z.number().int().min(0).default(5_000),
  /** A local model directory used when a card's files cannot be read where the card says. */
  modelPath: z.string().min(1).optional(),
  /** Prefix of the Prometheus metric names. */
  metricsPrefix: z
    .string()
    .regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a Prometheus name prefix')
    .default('dynamo_frontend'),
  /** The status of an answer from a worker with no room (stock's `DYN_HTTP_OVERLOAD_STATUS_CODE`, 529). */
  overloadStatus: z.number().int().min(200).max(999).default(529),
  /** Silence after which a stream gets an SSE keep-alive comment (`:`); 0 sends none. */
  sseKeepAliveMs: z.number().int().min(0).default(15_000),
  /** Largest `data:` URL a media content part may carry (stock's `DYN_MM_MAX_DATA_URL_MB`, 16 MiB). */
  maxDataUrlBytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 * 1024),
  /** Serve the Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`), off by default as in stock. */
  enableAnthropicApi: z.boolean().default(false),
  /** Drop Claude Code's per-session billing-header line from Anthropic system prompts, on by default as in stock. */
  stripAnthropicPreamble: z.boolean().default(true),
  /** Always end streams with the usage chunk (as if every request set `stream_options.include_usage`). */
  forceIncludeUsage: z.boolean().default(false),
  /** Accept unknown top-level request fields instead of answering 400. */
  ignoreUnknownFields: z.boolean().default(false),
  /** Tool-call parser for models whose cards name none. */
  toolCallParser: z.string().min(1).optional(),
  /** Reasoning parser for models whose cards name none. */
  reasoningParser: z.string().min(1).optional(),
  /** The response field reasoning goes in. */
  reasoningFieldName: z.enum(['reasoning_content', 'reasoning']).default('reasoning_content'),
});

/** Plain settings of the frontend, before defaults. */
export type FrontendSettings = z.input<typeof FrontendSettingsSchema>;

/** Everything {@link startFrontend} accepts. */
export interface FrontendOptions extends FrontendSettings {
  /** A router per model instead of the built-in `routerMode` (e.g. a KV-aware one). */
  router?: RouterFactory;
  /** A runtime to use (the caller shuts it down); else one is created from `runtimeOptions`. */
  runtime?: DistributedRuntime;
  /** How to create the runtime: discovery backend, request plane, environment. */
  runtimeOptions?: RuntimeOptions;
}
