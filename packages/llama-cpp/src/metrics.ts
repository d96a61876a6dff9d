import { Counter, Gauge, Registry } from 'prom-client';

/** How long the tokens/s gauges look back. */
const WINDOW_MS = 10_000;

/** Counts over the last {@link WINDOW_MS}, as a rate per second. */
class RateWindow {
  readonly #events: Array<[at: number, count: number]> = [];

  add(count: number): void {
    const now = performance.now();
    // Pruned here too, so a worker nobody scrapes keeps no more than a window of events.
    this.#prune(now);
    this.#events.push([now, count]);
  }

  perSecond(): number {
    this.#prune(performance.now());
    return this.#events.reduce((sum, [, count]) => sum + count, 0) / (WINDOW_MS / 1000);
  }

  #prune(now: number): void {
    while (this.#events.length > 0 && this.#events[0]![0] < now - WINDOW_MS) this.#events.shift();
  }
}

/**
 * The engine's Prometheus metrics, in its own registry (shown on the worker's `/metrics` through
 * `registerPrometheus`, with the worker's `dynamo_*` labels): queue depth and active sequences
 * read at scrape time, prompt, generated and prefix-cache token counters, and their rates over the last 10 s.
 */
export class EngineMetrics {
  readonly registry = new Registry();
  readonly #promptTotal: Counter;
  readonly #generatedTotal: Counter;
  readonly #cacheQueries: Counter;
  readonly #cacheHits: Counter;
  readonly #handoffFallbacks: Counter;
  #queried = 0;
  #hit = 0;
  readonly #promptRate = new RateWindow();
  readonly #generatedRate = new RateWindow();

  constructor(load: () => { queued: number; active: number }) {
    const registers = [this.registry];
    new Gauge({
      name: 'llamacpp:num_requests_waiting',
      help: 'Requests waiting for a free sequence',
      registers,
      collect() {
        this.set(load().queued);
      },
    });
    new Gauge({
      name: 'llamacpp:num_requests_running',
      help: 'Sequences generating (active requests)',
      registers,
      collect() {
        this.set(load().active);
      },
    });
    this.#promptTotal = new Counter({ name: 'llamacpp:prompt_tokens_total', help: 'Prompt tokens evaluated', registers });
    this.#generatedTotal = new Counter({ name: 'llamacpp:generation_tokens_total', help: 'Tokens generated', registers });
    // In tokens, as vLLM counts its prefix cache.
    this.#cacheQueries = new Counter({ name: 'llamacpp:prefix_cache_queries_total', help: 'Prompt tokens looked up in the prefix cache', registers });
    this.#cacheHits = new Counter({
      name: 'llamacpp:prefix_cache_hits_total',
      help: 'Prompt tokens found in the prefix cache (not evaluated again)',
      registers,
    });
    this.#handoffFallbacks = new Counter({
      name: 'llamacpp:kv_transfer_fallbacks_total',
      help: 'Decode requests whose prompt was evaluated here because its KV state could not be pulled from the prefill worker',
      registers,
    });
    const prompt = this.#promptRate;
    const generated = this.#generatedRate;
    new Gauge({
      name: 'llamacpp:prompt_tokens_per_second',
      help: 'Prompt tokens evaluated per second, over the last 10 s',
      registers,
      collect() {
        this.set(prompt.perSecond());
      },
    });
    new Gauge({
      name: 'llamacpp:generation_tokens_per_second',
      help: 'Tokens generated per second, over the last 10 s',
      registers,
      collect() {
        this.set(generated.perSecond());
      },
    });
  }

  /** A prompt of `tokens` tokens met the prefix cache, which held its first `hits`. */
  prefixQuery(tokens: number, hits: number): void {
    this.#cacheQueries.inc(tokens);
    this.#cacheHits.inc(hits);
    this.#queried += tokens;
    this.#hit += hits;
  }

  /** A decode request evaluated its prompt itself: the prefill worker's state could not be pulled. */
  handoffFallback(): void {
    this.#handoffFallbacks.inc();
  }

  /** Cached prompt tokens over all prompt tokens looked up so far (0 before any). */
  hitRate(): number {
    return this.#queried === 0 ? 0 : this.#hit / this.#queried;
  }

  /** `tokens` prompt tokens were evaluated. */
  prompt(tokens: number): void {
    this.#promptTotal.inc(tokens);
    this.#promptRate.add(tokens);
  }

  /** `tokens` more tokens were generated. */
  generated(tokens: number): void {
    this.#generatedTotal.inc(tokens);
    this.#generatedRate.add(tokens);
  }
}
