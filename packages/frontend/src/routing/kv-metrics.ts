import type { KvWorkerLoad } from '@dynamo/core';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

type QueueLabels = 'model' | 'worker_type' | 'policy_class';

/**
 * The KV router's metrics, with stock Dynamo's names: the share of each prompt found cached on
 * the chosen worker, decisions made, cached prompt tokens selected, the time a decision takes,
 * the request queue, and each worker's load as the routers count it.
 */
export class KvRouterMetrics {
  readonly hitRate: Histogram<'model'>;
  readonly requests: Counter<'model'>;
  readonly selectedCachedTokens: Counter<'model'>;
  readonly bestCachedTokens: Counter<'model'>;
  readonly overheadMs: Histogram<'model'>;
  readonly queuePending: Gauge<QueueLabels>;
  readonly queuePendingIslTokens: Gauge<QueueLabels>;
  readonly queueBackpressure: Counter<QueueLabels | 'reason'>;
  readonly #loadSources = new Set<() => KvWorkerLoad[]>();

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
    this.overheadMs = new Histogram({
      name: 'dynamo_router_overhead_total_ms',
      help: 'Time the KV router took to place a request, in milliseconds',
      labelNames,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25],
      registers,
    });
    const queueLabels = ['model', 'worker_type', 'policy_class'] as const;
    this.queuePending = new Gauge({
      name: 'dynamo_frontend_router_queue_pending_requests',
      help: 'Requests waiting in the router queue for a worker with room',
      labelNames: queueLabels,
      registers,
    });
    this.queuePendingIslTokens = new Gauge({
      name: 'dynamo_frontend_router_queue_pending_isl_tokens',
      help: 'Prompt tokens of the requests waiting in the router queue',
      labelNames: queueLabels,
      registers,
    });
    this.queueBackpressure = new Counter({
      name: 'dynamo_frontend_router_queue_backpressure_total',
      help: 'Requests refused because the router queue was full',
      labelNames: [...queueLabels, 'reason'],
      registers,
    });
    const sources = this.#loadSources;
    const workerGauge = (name: string, help: string, value: (load: KvWorkerLoad) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['worker_id', 'dp_rank', 'worker_type'] as const,
        registers,
        collect() {
          this.reset();
          for (const source of sources)
            for (const load of source()) this.set({ worker_id: load.workerId.toString(), dp_rank: String(load.dpRank), worker_type: 'decode' }, value(load));
        },
      });
    workerGauge('dynamo_frontend_worker_active_decode_blocks', 'KV blocks the routers count in use on each worker rank', (l) => l.decodeBlocks);
    workerGauge(
      'dynamo_frontend_worker_active_prefill_tokens',
      'Prompt tokens the routers count waiting for prefill on each worker rank',
      (l) => l.prefillTokens,
    );
  }

  /** Adds a router's per-worker loads to the worker gauges; returns the removal. */
  addLoadSource(loads: () => KvWorkerLoad[]): () => void {
    this.#loadSources.add(loads);
    return () => this.#loadSources.delete(loads);
  }
}
