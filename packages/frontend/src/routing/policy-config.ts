import { readFileSync } from 'node:fs';
import { InvalidArgument } from '@dynamo/runtime';
import { parse } from 'yaml';
import { z } from 'zod';

import type { QueueLimits, QueuePolicy } from './request-queue.js';

/** One queue's policy: when a worker is too busy to take more, the order, the limits. */
export interface QueueClass {
  name: string;
  policy: QueuePolicy;
  /** A worker is busy past this many prompt tokens in prefill (by the router's count). */
  prefillBusyThreshold?: number;
  /** The same, as a fraction of its card's `max_num_batched_tokens`. */
  prefillBusyThresholdFrac?: number;
  limits: QueueLimits;
}

const identifier = z.string().regex(/^[A-Za-z0-9_.-]+$/, 'must match [A-Za-z0-9_.-]+');
const count = z.number().int().min(0);

const PolicyClassSchema = z.strictObject({
  name: identifier,
  policy_family: identifier.optional(),
  cache_bucket: identifier.optional(),
  queue_policy: z.enum(['fcfs', 'wspt']).default('fcfs'),
  quantum: z.number().int().min(1, 'must be greater than zero'),
  prefill_busy_threshold: count.optional(),
  prefill_busy_threshold_frac: z.number().min(0).finite().optional(),
  request_queue_limit_per_worker: count.optional(),
  raw_isl_token_queue_limit_per_worker: count.optional(),
  cached_token_queue_limit_per_worker: count.optional(),
});

const ProfileSchema = z.strictObject({
  default_policy_family: identifier,
  policy_classes: z.array(PolicyClassSchema).min(1, 'must not be empty'),
  uncached_isl_buckets: z.array(z.strictObject({ min_tokens: count, bucket: identifier })).min(1, 'must not be empty'),
});

const ConfigSchema = z.strictObject({
  default_policy_family: identifier.optional(),
  policy_classes: ProfileSchema.shape.policy_classes.optional(),
  uncached_isl_buckets: ProfileSchema.shape.uncached_isl_buckets.optional(),
  models: z.record(z.string().min(1, 'model profile name must not be empty'), ProfileSchema).default({}),
  router: z.unknown().optional(),
  worker_selection: z.unknown().optional(),
  request_classifier: z.unknown().optional(),
});

type Profile = z.output<typeof ProfileSchema>;

/**
 * A profile's one queue. Stock 1.6.1 can split a model's requests over several classes (by
 * policy family and uncached prompt length); this frontend keeps one queue per model, so it
 * takes profiles whose families and buckets name a single class, and says so otherwise.
 */
function queueClass(profile: Profile, where: string): QueueClass {
  const routed = profile.policy_classes.filter((c) => c.policy_family !== undefined || c.cache_bucket !== undefined);
  for (const c of routed) {
    if (c.policy_family === undefined || c.cache_bucket === undefined) {
      throw new InvalidArgument(`${where} policy class "${c.name}" must specify both policy_family and cache_bucket or neither for an explicit class`);
    }
    if (!profile.uncached_isl_buckets.some((b) => b.bucket === c.cache_bucket))
      throw new InvalidArgument(`${where} policy class "${c.name}" references unknown cache bucket "${c.cache_bucket}"`);
  }
  if (!routed.some((c) => c.policy_family === profile.default_policy_family)) {
    throw new InvalidArgument(`${where} default_policy_family "${profile.default_policy_family}" does not name a configured family`);
  }
  if (profile.policy_classes.length !== 1 || profile.uncached_isl_buckets.length !== 1) {
    throw new InvalidArgument(
      `${where}: this frontend serves one policy class per profile (one class, one uncached_isl_bucket); got ${profile.policy_classes.length} class(es) and ${profile.uncached_isl_buckets.length} bucket(s)`,
    );
  }
  const c = profile.policy_classes[0]!;
  if (c.cached_token_queue_limit_per_worker !== undefined)
    throw new InvalidArgument(`${where} policy class "${c.name}": cached_token_queue_limit_per_worker is not supported by this frontend`);
  return {
    name: c.name,
    policy: c.queue_policy,
    ...(c.prefill_busy_threshold === undefined ? {} : { prefillBusyThreshold: c.prefill_busy_threshold }),
    ...(c.prefill_busy_threshold_frac === undefined ? {} : { prefillBusyThresholdFrac: c.prefill_busy_threshold_frac }),
    limits: {
      ...(c.request_queue_limit_per_worker === undefined ? {} : { requestsPerWorker: c.request_queue_limit_per_worker }),
      ...(c.raw_isl_token_queue_limit_per_worker === undefined ? {} : { islTokensPerWorker: c.raw_isl_token_queue_limit_per_worker }),
    },
  };
}

/**
 * Stock's `--router-policy-config` YAML, as far as this frontend serves it: a root profile and
 * per-model profiles (`models:`), each of one policy class, which sets the KV router's queue
 * (busy threshold, order, limits). The `router`, `worker_selection` and `request_classifier`
 * sections are refused. Throws `InvalidArgument` naming the file and what is wrong.
 */
export class RouterPolicyConfig {
  readonly #root: QueueClass | undefined;
  readonly #models: Map<string, QueueClass>;

  private constructor(root: QueueClass | undefined, models: Map<string, QueueClass>) {
    this.#root = root;
    this.#models = models;
  }

  static load(path: string): RouterPolicyConfig {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new InvalidArgument(`failed to read router policy config ${path}: ${(err as Error).message}`, { cause: err });
    }
    let raw: unknown;
    try {
      // An empty file is an empty document.
      raw = parse(text) ?? {};
    } catch (err) {
      throw new InvalidArgument(`failed to parse router policy config ${path}: ${(err as Error).message}`, { cause: err });
    }
    const parsed = ConfigSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new InvalidArgument(`failed to parse router policy config ${path}: ${issue.path.join('.') || '(document)'}: ${issue.message}`);
    }
    const config = parsed.data;
    const invalid = (why: string) => new InvalidArgument(`invalid router policy config ${path}: ${why}`);
    for (const section of ['router', 'worker_selection', 'request_classifier'] as const) {
      if (config[section] !== undefined) throw invalid(`the ${section} section is not supported by this frontend`);
    }
    const rootFields = [config.default_policy_family, config.policy_classes, config.uncached_isl_buckets].filter((f) => f !== undefined).length;
    if (rootFields !== 0 && rootFields !== 3)
      throw invalid('root profile must specify default_policy_family, uncached_isl_buckets, and policy_classes when any root profile field is present');
    const wrap = <T>(make: () => T): T => {
      try {
        return make();
      } catch (err) {
        throw invalid((err as Error).message);
      }
    };
    const root = rootFields === 3 ? wrap(() => queueClass(config as Profile, 'root')) : undefined;
    const models = new Map(Object.entries(config.models).map(([name, profile]) => [name, wrap(() => queueClass(profile, `model "${name}"`))]));
    if (!root && models.size === 0) throw invalid('router policy config must define a root profile or at least one model profile');
    return new RouterPolicyConfig(root, models);
  }

  /** The queue class of `model`: its own profile's, else the root's. */
  classFor(model: string): QueueClass | undefined {
    return this.#models.get(model) ?? this.#root;
  }
}

/**
 * The queue class of a model: the policy config's, else the one stock's deprecated flags make
 * (`--router-queue-threshold`, `--router-queue-policy`; class `default`, no limits); undefined
 * when neither queues.
 */
export function queueClassFor(
  model: string,
  config: RouterPolicyConfig | undefined,
  threshold: number | undefined,
  policy: QueuePolicy,
): QueueClass | undefined {
  const configured = config?.classFor(model);
  if (configured) return configured.prefillBusyThreshold === undefined && configured.prefillBusyThresholdFrac === undefined ? undefined : configured;
  return threshold === undefined ? undefined : { name: 'default', policy, prefillBusyThresholdFrac: threshold, limits: {} };
}
