import { Counter, Gauge, Histogram, Registry } from 'prom-client';

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

/**
 * The runtime's Prometheus metrics, with Dynamo's names (`dynamo_component_*`), in a registry of
 * their own so several runtimes in one process (tests) do not collide.
 */
export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly #started = process.hrtime.bigint();
  readonly requests = new Counter({ name: 'dynamo_component_requests_total', help: 'Requests received by the endpoint', labelNames: endpointLabels, registers: [this.registry] });
  readonly duration = new Histogram({
    name: 'dynamo_component_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response stream',
    labelNames: endpointLabels,
    buckets: durationBuckets,
    registers: [this.registry],
  });
  readonly inflight = new Gauge({ name: 'dynamo_component_inflight_requests', help: 'Requests being processed', labelNames: endpointLabels, registers: [this.registry] });
  readonly requestBytes = new Counter({ name: 'dynamo_component_request_bytes_total', help: 'Request payload bytes received', labelNames: endpointLabels, registers: [this.registry] });
  readonly responseBytes = new Counter({ name: 'dynamo_component_response_bytes_total', help: 'Response payload bytes sent', labelNames: endpointLabels, registers: [this.registry] });
  readonly errors = new Counter({
    name: 'dynamo_component_errors_total',
    help: 'Requests that failed, by error type',
    labelNames: [...endpointLabels, 'error_type'],
    registers: [this.registry],
  });
  readonly cancellations = new Counter({ name: 'dynamo_component_cancellation_total', help: 'Requests cancelled by the caller', labelNames: endpointLabels, registers: [this.registry] });

  constructor() {
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

  /** Prometheus text exposition of every metric. */
  async expose(): Promise<string> {
    return this.registry.metrics();
  }
}
