import { processMetrics } from '@dynamo/runtime/internal';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

import { type LocalHistogram, TokenHistogram } from './token-histogram.js';

/** Which OpenAI surface a request came through (the `endpoint` label). */
export type EndpointLabel = 'chat_completions' | 'completions' | 'embeddings' | 'responses' | 'messages';

/**
 * The frontend's Prometheus metrics, with stock Dynamo's names, labels and buckets
 * (`dynamo_frontend_*`; the prefix follows `--metrics-prefix` / `DYN_METRICS_PREFIX`). Model
 * labels are lowercased, as stock does.
 */
export class FrontendMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'model' | 'endpoint' | 'request_type' | 'status'>;
  readonly inflight: Gauge<'model'>;
  readonly duration: Histogram<'model'>;
  readonly inputTokens: Histogram<'model'>;
  readonly outputTokens: Histogram<'model'>;
  readonly ttft: Histogram<'model'>;
  readonly itl: TokenHistogram;
  readonly migrations: Counter<'model'>;
  readonly disconnects: Counter<'model'>;
  readonly migrationMaxSeqLenExceeded: Counter<'model'>;
  readonly rejections: Counter<'model' | 'endpoint'>;

  constructor(prefix = 'dynamo_frontend') {
    // The process's own metrics (memory, fds, event-loop delay) follow ours on /metrics; made now, so the delay is measured from the start.
    processMetrics();
    const registers = [this.registry];
    const name = (suffix: string) => `${prefix}_${suffix}`;
    this.requests = new Counter({
      name: name('requests_total'),
      help: 'Total number of LLM requests processed',
      labelNames: ['model', 'endpoint', 'request_type', 'status'],
      registers,
    });
    this.inflight = new Gauge({ name: name('inflight_requests'), help: 'Number of inflight requests', labelNames: ['model'], registers });
    this.duration = new Histogram({
      name: name('request_duration_seconds'),
      help: 'Duration of LLM requests',
      labelNames: ['model'],
      buckets: [0, 1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers,
    });
    this.inputTokens = new Histogram({
      name: name('input_sequence_tokens'),
      help: 'Input sequence length in tokens',
      labelNames: ['model'],
      buckets: [0, 50, 100, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000],
      registers,
    });
    this.outputTokens = new Histogram({
      name: name('output_sequence_tokens'),
      help: 'Output sequence length in tokens',
      labelNames: ['model'],
      buckets: [0, 50, 100, 500, 1000, 2000, 4000, 8000, 16000, 32000],
      registers,
    });
    this.ttft = new Histogram({
      name: name('time_to_first_token_seconds'),
      help: 'Time to first token in seconds',
      labelNames: ['model'],
      buckets: [0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 240, 480],
      registers,
    });
    this.itl = new TokenHistogram(
      name('inter_token_latency_seconds'),
      'Inter-token latency in seconds',
      [0, 0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2],
      this.registry,
    );
    this.migrations = new Counter({
      name: name('model_migration_total'),
      help: 'Requests resent to another worker after theirs failed',
      labelNames: ['model'],
      registers,
    });
    this.migrationMaxSeqLenExceeded = new Counter({
      name: name('model_migration_max_seq_len_exceeded_total'),
      help: 'Requests that grew past the migration max sequence length, so were not migrated any more',
      labelNames: ['model'],
      registers,
    });
    this.rejections = new Counter({
      name: name('model_rejection_total'),
      help: 'Requests refused because every worker was busy',
      labelNames: ['model', 'endpoint'],
      registers,
    });
    this.disconnects = new Counter({
      name: name('disconnected_clients'),
      help: 'Clients that went away before their response was complete',
      labelNames: ['model'],
      registers,
    });
  }

  /** Prometheus text of every metric here, then the process's own (memory, fds, handles, event-loop delay). */
  async expose(): Promise<string> {
    return (await this.registry.metrics()) + (await processMetrics().metrics());
  }

  /** Starts observing one request; call the returned tracker's methods as it progresses. */
  track(model: string, endpoint: EndpointLabel, streaming: boolean): RequestTracker {
    return new RequestTracker(this, model.toLowerCase(), endpoint, streaming);
  }
}

/** One request's metrics: inflight while it lasts, TTFT / ITL per response chunk, totals at the end. */
export class RequestTracker {
  readonly #metrics: FrontendMetrics;
  readonly #model: string;
  readonly #endpoint: EndpointLabel;
  readonly #streaming: boolean;
  readonly #start = performance.now();
  /** The request's own ITL counts, added to the shared histogram every 64 tokens and at the end. */
  readonly #itl: LocalHistogram;
  #last = 0;
  #outputTokens = 0;
  #done = false;

  constructor(metrics: FrontendMetrics, model: string, endpoint: EndpointLabel, streaming: boolean) {
    this.#metrics = metrics;
    this.#model = model;
    this.#endpoint = endpoint;
    this.#streaming = streaming;
    this.#itl = metrics.itl.local(model);
    metrics.inflight.inc({ model });
  }

  /** A response chunk carrying `tokens` new tokens, for a prompt of `inputTokens`. */
  tokens(tokens: number, inputTokens: number): void {
    if (tokens === 0) return;
    const now = performance.now();
    if (this.#outputTokens === 0) {
      this.#metrics.ttft.observe({ model: this.#model }, (now - this.#start) / 1000);
      this.#metrics.inputTokens.observe({ model: this.#model }, inputTokens);
    } else {
      this.#itl.observe((now - this.#last) / 1000 / tokens, tokens);
    }
    this.#last = now;
    this.#outputTokens += tokens;
  }

  /**
   * Output timed natively (`StreamProcessor.takeGaps`): pairs of seconds per token since the
   * previous output (negative for the first, which is timed now) and the output's tokens.
   */
  timed(gaps: Float64Array, inputTokens: number): void {
    for (let i = 0; i + 1 < gaps.length; i += 2) {
      const gap = gaps[i]!;
      const tokens = gaps[i + 1]!;
      if (gap < 0 || this.#outputTokens === 0) {
        this.tokens(tokens, inputTokens);
        continue;
      }
      this.#itl.observe(gap, tokens);
      this.#outputTokens += tokens;
      this.#last = performance.now();
    }
  }

  /** The request ended (once): `ok` for a complete response. */
  finish(ok: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#itl.flush();
    const model = this.#model;
    this.#metrics.inflight.dec({ model });
    this.#metrics.requests.inc({ model, endpoint: this.#endpoint, request_type: this.#streaming ? 'stream' : 'unary', status: ok ? 'success' : 'error' });
    this.#metrics.duration.observe({ model }, (performance.now() - this.#start) / 1000);
    if (this.#outputTokens > 0) this.#metrics.outputTokens.observe({ model }, this.#outputTokens);
  }
}
