import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * The KV router's decision metrics, with stock Dynamo's names: the share of each prompt found
 * cached on the chosen worker, decisions made, cached prompt tokens selected, and the time a
 * decision takes.
 */
export class KvRouterMetrics {
  readonly hitRate: Histogram<'model'>;
  readonly requests: Counter<'model'>;
  readonly selectedCachedTokens: Counter<'model'>;
  readonly bestCachedTokens: Counter<'model'>;
  readonly busyRejections: Counter<'model'>;
  readonly overheadMs: Histogram<'model'>;

  constructor(registry: Registry) {
    const registers = [registry];
    const labelNames = ['model'] as const;
    this.hitRate = new Histogram({
      name: 'dynamo_component_router_kv_hit_rate',
      help: 'Fraction of the prompt blocks cached on the worker the KV router chose',
      labelNames,
      buckets: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1],
      registers,
    });
    this.requests = new Counter({ name: 'dynamo_component_router_requests_total', help: 'Requests the KV router placed', labelNames, registers });
    this.selectedCachedTokens = new Counter({
      name: 'dynamo_component_router_kv_selected_cached_prefix_tokens_total',
      help: 'Cached prompt prefix tokens on the chosen workers',
      labelNames,
      registers,
    });
    this.bestCachedTokens = new Counter({
      name: 'dynamo_component_router_kv_best_eligible_cached_prefix_tokens_total',
      help: 'Cached prompt prefix tokens on the best-cached eligible worker',
      labelNames,
      registers,
    });
    this.busyRejections = new Counter({ name: 'dynamo_frontend_router_admission_rejected_total', help: 'Requests refused because every worker was busy', labelNames, registers });
    this.overheadMs = new Histogram({
      name: 'dynamo_router_overhead_total_ms',
      help: 'Time the KV router took to place a request, in milliseconds',
      labelNames,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25],
      registers,
    });
  }
}
