import { Counter, Gauge, Histogram, type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';

import { processMetrics } from './process-metrics.js';

/** Labels Dynamo attaches to every endpoint metric. */
export interface EndpointLabels {
  dynamo_namespace: string;
  dynamo_component: string;
  dynamo_endpoint: string;
}

/** Why a request failed, as Dynamo's `dynamo_component_errors_total{error_type}` spells it. */
export type ErrorType = 'deserialization' | 'invalid_message' | 'response_stream' | 'generate' | 'publish_response' | 'publish_final' | 'serialization';

const endpointLabels = ['dynamo_namespace', 'dynamo_component', 'dynamo_endpoint'] as const;

/** Request-duration buckets from 5 ms to 10 min, like Dynamo's. */
const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Which of a registry's metrics {@link registerPrometheus} shows. */
export interface RegisterPrometheusOptions {
  /** Only metrics whose names start with one of these (e.g. `['myengine_']`); default all. */
  prefixes?: readonly string[];
  /** Never metrics whose names start with one of these. */
  excludePrefixes?: readonly string[];
}

const foreign = new Map<Registry, RegisterPrometheusOptions>();

/**
 * Shows `registry`'s metrics (an engine's own prom-client metrics) on `/metrics` of every runtime
 * in this process, beside Dynamo's, filtered by name prefix as stock Dynamo filters `vllm:` or
 * `sglang:` metrics. A metric whose name the runtime already uses is left out. Registering the
 * same registry again replaces its options. Returns a function that takes it off again.
 */
export function registerPrometheus(registry: Registry, options: RegisterPrometheusOptions = {}): () => void {
  foreign.set(registry, { ...options });
  return () => {
    foreign.delete(registry);
  };
}

const startsWithAny = (name: string, prefixes: readonly string[]) => prefixes.some((p) => name.startsWith(p));

const escapeLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const formatValue = (value: number) => (Number.isNaN(value) ? 'NaN' : value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value));

/** One metric in the text format, each sample with `labels` added where it has no label of that name. */
function withLabels({ name, help, type, values }: MetricObjectWithValues<MetricValue<string>>, labels: Readonly<Record<string, string>>): string {
  const lines = [`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${String(type)}`];
  for (const sample of values) {
    const all = { ...labels, ...(sample.labels as Record<string, string | number>) };
    const rendered = Object.entries(all).map(([k, v]) => `${k}="${escapeLabel(String(v))}"`);
    const sampleName = (sample as { metricName?: string }).metricName ?? name;
    lines.push(`${sampleName}${rendered.length > 0 ? `{${rendered.join(',')}}` : ''} ${formatValue(sample.value)}`);
  }
  return lines.join('\n');
}

/**
 * The exposition text of the registered registries' metrics that pass their filters, with
 * `labels` (the worker's endpoint and model) added to each sample that lacks them: the sample's
 * own labels win, as in stock's `gather_with_labels`.
 */
async function foreignMetrics(taken: ReadonlySet<string>, labels: Readonly<Record<string, string>>): Promise<string> {
  const parts: string[] = [];
  const plain = Object.keys(labels).length === 0;
  for (const [registry, { prefixes, excludePrefixes = [] }] of foreign) {
    const shown = ({ name }: { name: string }) => !taken.has(name) && (!prefixes || startsWithAny(name, prefixes)) && !startsWithAny(name, excludePrefixes);
    if (plain) {
      for (const metric of registry.getMetricsAsArray().filter(shown)) parts.push(await registry.getSingleMetricAsString(metric.name));
    } else {
      for (const metric of (await registry.getMetricsAsJSON()).filter(shown))
        parts.push(withLabels(metric as MetricObjectWithValues<MetricValue<string>>, labels));
    }
  }
  return parts.length === 0 ? '' : `${parts.join('\n')}\n`;
}

/**
 * The runtime's Prometheus metrics, with Dynamo's names (`dynamo_component_*`), in a registry of
 * their own so several runtimes in one process (tests) do not collide.
 */
export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly #started = process.hrtime.bigint();
  readonly requests = new Counter({
    name: 'dynamo_component_requests_total',
    help: 'Requests received by the endpoint',
    labelNames: endpointLabels,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'dynamo_component_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response stream',
    labelNames: endpointLabels,
    buckets: durationBuckets,
    registers: [this.registry],
  });
  readonly inflight = new Gauge({
    name: 'dynamo_component_inflight_requests',
    help: 'Requests being processed',
    labelNames: endpointLabels,
    registers: [this.registry],
  });
  readonly requestBytes = new Counter({
    name: 'dynamo_component_request_bytes_total',
    help: 'Request payload bytes received',
    labelNames: endpointLabels,
    registers: [this.registry],
  });
  readonly responseBytes = new Counter({
    name: 'dynamo_component_response_bytes_total',
    help: 'Response payload bytes sent',
    labelNames: endpointLabels,
    registers: [this.registry],
  });
  readonly errors = new Counter({
    name: 'dynamo_component_errors_total',
    help: 'Requests that failed, by error type',
    labelNames: [...endpointLabels, 'error_type'],
    registers: [this.registry],
  });
  readonly cancellations = new Counter({
    name: 'dynamo_component_cancellation_total',
    help: 'Requests cancelled by the caller',
    labelNames: endpointLabels,
    registers: [this.registry],
  });

  constructor() {
    // Made now, so the event-loop delay is measured from the start.
    processMetrics();
    const started = this.#started;
    new Gauge({
      name: 'dynamo_component_uptime_seconds',
      help: 'Seconds since the runtime started',
      registers: [this.registry],
      collect() {
        this.set(Number(process.hrtime.bigint() - started) / 1e9);
      },
    });
  }

  /** Labels added to the metrics of {@link registerPrometheus}'s registries (the worker sets its endpoint and model). */
  engineLabels: Readonly<Record<string, string>> = {};

  /** Prometheus text exposition of every metric, the process's own ({@link processMetrics}), then those of {@link registerPrometheus}'s registries. */
  async expose(): Promise<string> {
    const own = (await this.registry.metrics()) + (await processMetrics().metrics());
    if (foreign.size === 0) return own;
    const taken = new Set([this.registry, processMetrics()].flatMap((r) => r.getMetricsAsArray().map((m) => m.name)));
    return own + (await foreignMetrics(taken, this.engineLabels));
  }
}
