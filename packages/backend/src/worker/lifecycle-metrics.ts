import { Gauge } from 'prom-client';
import type { DistributedRuntime } from '@dynamo/runtime';

/** Labels of the lifecycle metrics: the endpoint's, plus the model names. */
export type LifecycleLabels = {
  dynamo_namespace: string;
  dynamo_component: string;
  dynamo_endpoint: string;
  model: string;
  model_name: string;
};

/**
 * The Worker's lifecycle metrics, with Dynamo's names, on the runtime's registry (so `/metrics` on
 * the system port shows them): how long `start` took, how long drain and cleanup took, and how
 * long each shutdown stage ran and why it ended.
 */
export class LifecycleMetrics {
  /** The labels every worker metric carries. */
  readonly labels: LifecycleLabels;
  readonly #modelLoad: Gauge;
  readonly #drain: Gauge;
  readonly #cleanup: Gauge;
  readonly #stage: Gauge;

  constructor(runtime: DistributedRuntime, labels: LifecycleLabels) {
    this.labels = labels;
    const registers = [runtime.metrics.registry];
    const labelNames = Object.keys(labels);
    this.#modelLoad = new Gauge({ name: 'dynamo_component_model_load_time_seconds', help: 'Time engine.start() took', labelNames, registers });
    this.#drain = new Gauge({ name: 'dynamo_component_drain_time_seconds', help: 'Time the drain / KV-transfer shutdown stage took', labelNames, registers });
    this.#cleanup = new Gauge({ name: 'dynamo_component_cleanup_time_seconds', help: 'Time engine.cleanup() took', labelNames, registers });
    this.#stage = new Gauge({
      name: 'dynamo_component_shutdown_stage_seconds',
      help: 'Time each graceful-shutdown stage took, by stage and how it ended',
      labelNames: [...labelNames, 'stage', 'reason'],
      registers,
    });
    // Present from the start, so a scrape during shutdown never misses them.
    this.#drain.set(labels, 0);
  }

  modelLoaded(seconds: number): void {
    this.#modelLoad.set(this.labels, seconds);
  }

  /** A shutdown stage ended. */
  stage(stage: string, reason: string, seconds: number): void {
    this.#stage.set({ ...this.labels, stage, reason }, seconds);
    if (stage === 'kv_transfer') this.#drain.set(this.labels, seconds);
    if (stage === 'cleanup') this.#cleanup.set(this.labels, seconds);
  }
}
