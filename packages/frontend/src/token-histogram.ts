import type { Histogram, Registry } from 'prom-client';

/** Tokens a request counts on its own before adding them to the shared series (stock's figure too). */
const FLUSH_TOKENS = 64;

/** Cumulative-free bucket counts (the last slot is `+Inf`), with their sum and count. */
interface Series {
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A histogram observed once per output token, counted the way stock counts its inter-token
 * latency: into a request's own buckets ({@link LocalHistogram}), which are added to the shared
 * series every 64 tokens and when the request ends. prom-client's `observe` hashes the labels on
 * every call, which per token was ~3% of the frontend's time. It is exposed by a prom-client
 * registry with prom-client's own histogram text.
 */
export class TokenHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    // The registry reads only name, help, type, aggregator, get() and reset() of a metric.
    registry.registerMetric(this as unknown as Histogram);
  }

  /** A request's own counts, for `model`. */
  local(model: string): LocalHistogram {
    return new LocalHistogram(this, model);
  }

  /** Adds a request's counts to `model`'s series. */
  add(model: string, counts: Series): void {
    let series = this.#series.get(model);
    if (!series) this.#series.set(model, (series = { buckets: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 }));
    for (let i = 0; i < counts.buckets.length; i++) series.buckets[i]! += counts.buckets[i]!;
    series.sum += counts.sum;
    series.count += counts.count;
  }

  /** What prom-client's registry prints: `_bucket` per bound (cumulative), `_sum` and `_count`, per model. */
  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const [model, series] of this.#series) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += series.buckets[i]!;
        values.push({ labels: { le, model }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', model }, value: series.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { model }, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { model }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.#series.clear();
  }
}

/** One request's counts of a {@link TokenHistogram}, added to it every 64 tokens and on {@link flush}. */
export class LocalHistogram {
  readonly #shared: TokenHistogram;
  readonly #model: string;
  readonly #counts: Series;

  constructor(shared: TokenHistogram, model: string) {
    this.#shared = shared;
    this.#model = model;
    this.#counts = { buckets: new Float64Array(shared.upperBounds.length + 1), sum: 0, count: 0 };
  }

  /** `tokens` observations of `value`. */
  observe(value: number, tokens = 1): void {
    const bounds = this.#shared.upperBounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    const counts = this.#counts;
    counts.buckets[i]! += tokens;
    counts.sum += value * tokens;
    counts.count += tokens;
    if (counts.count >= FLUSH_TOKENS) this.flush();
  }

  /** Adds what was counted to the shared series. */
  flush(): void {
    const counts = this.#counts;
    if (counts.count === 0) return;
    this.#shared.add(this.#model, counts);
    counts.buckets.fill(0);
    counts.sum = 0;
    counts.count = 0;
  }
}
