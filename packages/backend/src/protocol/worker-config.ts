import { z } from 'zod';
import { parseOrThrow } from '@dynamo/runtime';
import { DisaggregationModeSchema } from './disaggregation.js';

const name = z.string().regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+');
const seconds = z.number().finite();

/** Overrides for the graceful-shutdown budget; unset fields come from `DYN_*` env, then defaults. */
export const ShutdownConfigSchema = z.strictObject({
  totalSecs: seconds.nonnegative().optional(),
  routerGraceSecs: seconds.optional(),
  inflightTimeoutSecs: seconds.optional(),
  kvTransferTimeoutSecs: seconds.optional(),
  cleanupTimeoutSecs: seconds.optional(),
  kvTransferFallback: z.enum(['wait', 'skip']).optional(),
});

/**
 * How a worker joins Dynamo: where it registers, how it is reached and what it serves. Field names
 * are Dynamo's `WorkerConfig` in camelCase, with the same defaults except `discoveryBackend`,
 * which defaults to the embedded `file` store so a single machine needs no servers.
 */
export const WorkerConfigSchema = z.strictObject({
  namespace: name.default('dynamo'),
  component: name.default('backend'),
  endpoint: name.default('generate'),
  modelName: z.string().default(''),
  servedModelName: z.string().optional(),
  modelInput: z.enum(['Tokens', 'Text', 'Tensor']).default('Tokens'),
  endpointTypes: z.string().default('chat,completions'),
  discoveryBackend: z.enum(['file', 'etcd', 'mem', 'kubernetes']).default('file'),
  requestPlane: z.enum(['tcp', 'nats']).default('tcp'),
  eventPlane: z.enum(['nats', 'zmq']).optional(),
  customJinjaTemplate: z.string().optional(),
  toolCallParser: z.string().optional(),
  reasoningParser: z.string().optional(),
  excludeToolsWhenToolChoiceNone: z.boolean().default(true),
  enableLocalIndexer: z.boolean().default(true),
  enableKvRouting: z.boolean().default(true),
  metricsLabels: z.array(z.tuple([z.string(), z.string()])).default([]),
  disaggregationMode: DisaggregationModeSchema.default('agg'),
  healthCheckPayload: z.record(z.string(), z.unknown()).optional(),
  /** How often a frontend may move a failed request to another worker (card `migration_limit`). */
  migrationLimit: z.number().int().min(0).max(0xffff_ffff).default(0),
  structuralTagMode: z.enum(['off', 'on']).default('off'),
  structuralTagScope: z.enum(['auto', 'always']).default('auto'),
  structuralTagSchema: z.enum(['auto', 'strict']).default('auto'),
  routeToEncoder: z.boolean().default(false),
  mediaDecoder: z.record(z.string(), z.unknown()).optional(),
  mediaFetcher: z.record(z.string(), z.unknown()).optional(),
  kvStateEndpoint: z.string().optional(),
  defaultThinkingMode: z.string().optional(),
  responsePlane: z.enum(['tcp', 'quic']).default('tcp'),
  shutdown: ShutdownConfigSchema.default({}),
});

/** A fully resolved worker configuration (defaults applied). */
export type WorkerConfig = z.output<typeof WorkerConfigSchema>;
/** What callers pass to {@link workerConfig}: any subset of the fields. */
export type WorkerConfigInput = z.input<typeof WorkerConfigSchema>;
/** Graceful-shutdown overrides (see {@link ShutdownConfigSchema}). */
export type ShutdownConfig = z.output<typeof ShutdownConfigSchema>;

/** Builds a {@link WorkerConfig} from a partial one, applying Dynamo's defaults; throws `InvalidArgument` naming bad fields. */
export function workerConfig(input: WorkerConfigInput = {}): WorkerConfig {
  return parseOrThrow(WorkerConfigSchema, input, 'WorkerConfig');
}
