import type { DistributedRuntime, RuntimeOptions } from '@dynamo/runtime';
import { z } from 'zod';

import { ROUTER_MODES, type RouterFactory } from './routing/router.js';

/** The settings of {@link startFrontend} that have plain values; checked with this schema. */
export const FrontendSettingsSchema = z.object({
  /** Address to listen on. */
  host: z.string().min(1).default('0.0.0.0'),
  /** Port to listen on; 0 picks a free one (see the handle's `port`). */
  port: z.number().int().min(0).max(65535).default(8000),
  /** Built-in routing: `round-robin`, `random` or `direct` (ignored when `router` is given). */
  routerMode: z.enum(ROUTER_MODES).default('round-robin'),
  /** Resends allowed when a worker fails mid-request; overrides the cards' `migration_limit`. */
  migrationLimit: z.number().int().min(0).max(1000).optional(),
  /** Serve only the models registered in this namespace. */
  namespace: z.string().regex(/^[a-zA-Z0-9_-]+$/, 'must match [a-zA-Z0-9_-]+').optional(),
  /** TLS certificate and key (PEM files); both or neither. */
  tlsCertPath: z.string().min(1).optional(),
  tlsKeyPath: z.string().min(1).optional(),
  /** Largest request body accepted (413 beyond); stock's default is 45 MiB. */
  bodyLimitBytes: z.number().int().positive().default(45 * 1024 * 1024),
  /** How long a client may take to send a whole request before a 408. */
  requestTimeoutMs: z.number().int().positive().default(30_000),
  /** How long shutdown waits for in-flight responses before cutting them off. */
  gracefulShutdownMs: z.number().int().min(0).default(5_000),
  /** A local model directory used when a card's files cannot be read where the card says. */
  modelPath: z.string().min(1).optional(),
  /** Prefix of the Prometheus metric names. */
  metricsPrefix: z.string().regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a Prometheus name prefix').default('dynamo_frontend'),
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
