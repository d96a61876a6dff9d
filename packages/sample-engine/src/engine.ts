import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  configOf,
  type Context,
  type DisaggregationMode,
  type EmbedRequest,
  type Embeddings,
  type EngineConfig,
  engineLog,
  type GenerateChunk,
  type GenerateRequest,
  InvalidArgument,
  type KvEventSource,
  LLMEngine,
  type SnapshotPublisher,
  loraId,
  parseFlags,
  usage,
  type WorkerConfig,
  workerConfigFromFlags,
} from '@dynamo/backend';
import { type SampleEngineFlagValues, sampleEngineFlags, sampleEngineHelp, sampleEngineSettings } from './settings.js';
import { GenerationHold, SAMPLE_CONTROLS } from './controls.js';
import { PagedPrefixCache } from './kv-cache.js';
import { TokenPacer } from './token-pacer.js';

/** Options of {@link SampleEngine}; every field has the sample's default. */
export interface SampleEngineOptions {
  /** Model name reported by `start()` (default `sample-model`). */
  modelName?: string;
  /** Tokens per request when the request has no `max_tokens` (default 16). */
  maxTokens?: number;
  /** Delay before each token in ms (default 10). */
  delayMs?: number;
  /** Context length the card announces (default 2048). */
  contextLength?: number;
  /**
   * Continue the prompt instead: token `i` is the prompt's last token + `i` + 1. A request resent
   * with the tokens generated so far (a migration) then goes on with the very same sequence, so a
   * client can check it got every token exactly once (default false).
   */
  followPrompt?: boolean;
  /** `agg` (default), `prefill` or `decode`. */
  disaggregationMode?: DisaggregationMode;
  /**
   * Simulate a paged prefix cache of `totalBlocks` blocks of `blockSize` tokens: its KV events
   * and load go to the router, and prefill takes `prefillMsPerToken` per uncached prompt token,
   * so a cache hit shows up as a shorter time to first token.
   */
  kvCache?: { blockSize?: number; totalBlocks?: number; prefillMsPerToken?: number };
}

/** The engine options parsed `dynamo-sample-engine` flags describe. */
export function sampleEngineOptions(values: SampleEngineFlagValues): SampleEngineOptions {
  const { model, engine, kvCache, worker } = configOf(sampleEngineSettings, values);
  const { enabled, ...cache } = kvCache;
  return { modelName: model.name, ...engine, disaggregationMode: worker.disaggregationMode, ...(enabled && { kvCache: cache }) };
}

const log = engineLog('sample');

/** Token ids cycle below this, like a small vocabulary. */
const VOCAB_SIZE = 32000;

/** Values of a sample embedding unless the request asks for `dimensions`. */
export const SAMPLE_EMBEDDING_DIMENSIONS = 16;

/**
 * The sample engine's embedding of some token ids: made up but deterministic, different for
 * different inputs, and of unit length (`dims` values).
 */
export function sampleEmbedding(tokenIds: readonly number[], dims = SAMPLE_EMBEDDING_DIMENSIONS): Float32Array {
  const vector = new Float32Array(dims);
  tokenIds.forEach((id, i) => {
    for (let j = 0; j < dims; j++) vector[j]! += Math.sin((id + 1) * (j + 1) + i);
  });
  const norm = Math.hypot(...vector) || 1;
  for (let j = 0; j < dims; j++) vector[j]! /= norm;
  return vector;
}

/**
 * The log probabilities the engine reports when a request asks for them (`output_options.logprobs`
 * = k): every token is drawn with probability 1/2, and the k most likely tokens at its position are
 * it and the k - 1 ids after it, with probabilities 1/2, 1/4, 1/8, ...
 */
export function sampleLogprobs(token: number, k: number): Pick<GenerateChunk, 'log_probs' | 'top_logprobs'> {
  const top = Array.from({ length: k }, (_, j) => ({ rank: j + 1, token_id: (token + j) % VOCAB_SIZE, logprob: -(j + 1) * Math.LN2 }));
  return { log_probs: [-Math.LN2], top_logprobs: [top] };
}

/**
 * An engine with no model: token `i` of every response is `(i + 1) % 32000`, one per chunk,
 * `delayMs` apart, with made-up log probabilities when asked ({@link sampleLogprobs}); each of a
 * request's `n` choices is the same. Registered for embeddings (`--endpoint-types embedding`), it
 * answers with {@link sampleEmbedding}s. It follows the whole engine contract (cancellation, usage, idempotent cleanup)
 * so it can stand in for a real engine when testing a serving pipeline.
 */
export class SampleEngine extends LLMEngine {
  readonly modelName: string;
  readonly maxTokens: number;
  readonly delayMs: number;
  readonly contextLength: number;
  readonly followPrompt: boolean;
  readonly disaggregationMode: DisaggregationMode;
  /** The simulated prefix cache, when enabled. */
  readonly kvCache: PagedPrefixCache | undefined;
  readonly prefillMsPerToken: number;
  #snapshots: SnapshotPublisher | undefined;
  readonly #hold = new GenerationHold();
  readonly #pacer = new TokenPacer();
  /** Loaded LoRA adapters by name, with their ids. */
  readonly #adapters = new Map<string, number>();

  constructor(options: SampleEngineOptions = {}) {
    super();
    this.modelName = options.modelName ?? 'sample-model';
    this.maxTokens = options.maxTokens ?? 16;
    this.delayMs = options.delayMs ?? 10;
    this.contextLength = options.contextLength ?? 2048;
    this.followPrompt = options.followPrompt ?? false;
    this.disaggregationMode = options.disaggregationMode ?? 'agg';
    const kv = options.kvCache;
    this.kvCache = kv ? new PagedPrefixCache(kv.blockSize ?? 16, kv.totalBlocks ?? 16384) : undefined;
    this.prefillMsPerToken = kv?.prefillMsPerToken ?? 0;
  }

  /** Builds the engine and its worker config from `dynamo-sample-engine`'s flags and `DYN_*` env. */
  static override async fromArgs(
    argv: string[] = process.argv.slice(2),
    env: Record<string, string | undefined> = process.env,
  ): Promise<[SampleEngine, WorkerConfig]> {
    const parsed = parseFlags(sampleEngineFlags, argv, env);
    if (parsed.help) {
      // Same contract as argparse in Dynamo's from_args: help ends the program.
      process.stdout.write(sampleEngineHelp());
      process.exit(0);
    }
    const { model } = configOf(sampleEngineSettings, parsed.values);
    const engine = new SampleEngine(sampleEngineOptions(parsed.values));
    return [engine, workerConfigFromFlags(parsed.values, { modelName: model.path, servedModelName: model.name })];
  }

  override async start(_workerId: bigint): Promise<EngineConfig> {
    return {
      model: this.modelName,
      servedModelName: this.modelName,
      llm: {
        contextLength: this.contextLength,
        kvCacheBlockSize: this.kvCache?.blockSize ?? 16,
        totalKvBlocks: this.kvCache?.totalBlocks ?? 1000,
        maxNumSeqs: this.kvCache ? 256 : 64,
        maxNumBatchedTokens: this.kvCache ? 8192 : 2048,
      },
    };
  }

  /** Rank 0's cache gauges and load, when the cache is simulated. */
  override componentMetricsDpRanks(): number[] {
    return this.kvCache && this.disaggregationMode !== 'encode' ? [0] : [];
  }

  override attachSnapshotPublisher(publisher: SnapshotPublisher): void {
    this.#snapshots = publisher;
    this.#report();
  }

  /** The simulated cache's events, pushed by the engine itself. */
  override async kvEventSources(): Promise<KvEventSource[]> {
    // An encoder holds no KV cache.
    const cache = this.disaggregationMode === 'encode' ? undefined : this.kvCache;
    return cache ? [{ kind: 'push', onReady: (events) => cache.attach(events) }] : [];
  }

  #report(): void {
    if (!this.kvCache || !this.#snapshots) return;
    const u = this.kvCache.usage();
    this.#snapshots.publish(0, {
      kvUsedBlocks: u.activeBlocks,
      kvTotalBlocks: u.totalBlocks,
      gpuCacheUsage: u.activeBlocks / u.totalBlocks,
      kvCacheHitRate: u.hitRate,
    });
  }

  // Returns the stream that makes the tokens itself rather than delegating to it with `yield*`:
  // each level of async generators costs every token a promise and a resume.
  override generate(request: GenerateRequest, context: Context): AsyncIterable<GenerateChunk> {
    if (this.disaggregationMode === 'encode') return this.#encoded(request, context);
    if (!this.kvCache || request._HEALTH_CHECK === true) return this.#tokens(request, context, 0);
    return this.#cached(request, context, this.kvCache);
  }

  async *#encoded(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    yield await this.#encode(request, context);
  }

  /** A request through the simulated prefix cache: admitted, prefilled, then its tokens. */
  async *#cached(request: GenerateRequest, context: Context, cache: PagedPrefixCache): AsyncGenerator<GenerateChunk> {
    const adapter = request.model !== undefined && this.#adapters.has(request.model) ? request.model : undefined;
    const admission = cache.admit(request.token_ids, adapter);
    this.#report();
    try {
      const uncached = request.token_ids.length - admission.cachedTokens;
      if (uncached > 0 && this.prefillMsPerToken > 0) await sleep(uncached * this.prefillMsPerToken);
      yield* this.#tokens(request, context, admission.cachedTokens);
    } finally {
      cache.release(admission.blocks);
      this.#report();
    }
  }

  /**
   * An encoder's one handoff chunk: no tokens, `stop`, and an `encoder_result` naming the media it
   * "encoded" under a fresh handle (the media itself stays with the request), after `delayMs`.
   */
  async #encode(request: GenerateRequest, context: Context): Promise<GenerateChunk> {
    const handoffUsage = usage(request.token_ids.length, 0);
    const cancelled: GenerateChunk = { token_ids: [], index: 0, finish_reason: 'cancelled', completion_usage: handoffUsage };
    if (context.isStopped()) return cancelled;
    if (this.delayMs > 0) await sleep(this.delayMs);
    if (context.isStopped()) return cancelled;
    const media = Object.fromEntries(Object.entries(request.multi_modal_data ?? {}).map(([kind, items]) => [kind, Array.isArray(items) ? items.length : 1]));
    return {
      token_ids: [],
      index: 0,
      finish_reason: 'stop',
      completion_usage: handoffUsage,
      encoder_result: { handle: `sample-encoder:${randomUUID().replaceAll('-', '')}`, media, mm_processor_kwargs: request.mm_processor_kwargs ?? {} },
    };
  }

  async *#tokens(request: GenerateRequest, context: Context, cachedTokens: number): AsyncGenerator<GenerateChunk> {
    const prompt = request.token_ids.length;
    const k = request.output_options?.logprobs;
    const logprobsOf = (token: number) => (typeof k === 'number' && k >= 0 ? sampleLogprobs(token, k) : {});
    const usageOf = (completion: number) => ({
      ...usage(prompt, completion),
      ...(this.kvCache ? { prompt_tokens_details: { cached_tokens: cachedTokens } } : {}),
    });
    let maxNew = request.stop_conditions?.max_tokens || this.maxTokens;
    // A LoRA adapter shifts the sequence by its id, so each adapter's output differs.
    const shift = (this.#adapters.get(request.model ?? '') ?? 0) % 1000;
    const first = (this.followPrompt ? (request.token_ids.at(-1) ?? 0) : 0) + shift;
    if (this.disaggregationMode === 'prefill') maxNew = 1;
    if (this.disaggregationMode === 'decode' && request._HEALTH_CHECK !== true && request.prefill_result == null) {
      throw new InvalidArgument('decode worker requires request.prefill_result (disaggregation mode decode)');
    }
    const stream = this.#hold.open();
    try {
      for (let i = 0; i < maxNew; i++) {
        const go = this.#hold.next(stream, context.signal);
        if (!(typeof go === 'boolean' ? go : await go) || context.isStopped()) {
          yield { token_ids: [], index: 0, finish_reason: 'cancelled', completion_usage: usageOf(i) };
          return;
        }
        if (this.delayMs > 0) await this.#pacer.wait(this.delayMs);
        const token = (first + i + 1) % VOCAB_SIZE;
        if (i < maxNew - 1) {
          yield { token_ids: [token], index: 0, ...logprobsOf(token) };
          continue;
        }
        yield {
          token_ids: [token],
          index: 0,
          ...logprobsOf(token),
          finish_reason: 'length',
          completion_usage: usageOf(maxNew),
          ...(this.disaggregationMode === 'prefill'
            ? { disaggregated_params: { sample_handle: randomUUID().replaceAll('-', ''), completed_tokens: [token] } }
            : {}),
        };
      }
    } finally {
      this.#hold.close(stream);
    }
  }

  /** {@link sampleEmbedding} of each input (`dimensions` values when the request asks, up to 4096). */
  override async embed(request: EmbedRequest): Promise<Embeddings> {
    const dims = request.dimensions ?? SAMPLE_EMBEDDING_DIMENSIONS;
    if (dims > 4096) throw new InvalidArgument(`dimensions: the sample engine makes at most 4096, got ${dims}`);
    return { embeddings: request.token_ids.map((ids) => sampleEmbedding(ids, dims)) };
  }

  /** Nothing to free per request; logged so operators can see cancellations reach the engine. */
  override async abort(context: Context): Promise<void> {
    log.debug({ id: context.id() }, 'request aborted');
  }

  /** A one-token greedy request starting from BOS (id 1). */
  override async healthCheckPayload(): Promise<Record<string, unknown>> {
    return { token_ids: [1], stop_conditions: { max_tokens: 1, ignore_eos: true }, sampling_options: { temperature: 0 } };
  }

  /** `sleep` / `wake_up`, `pause_generation` / `resume_generation` and `clear_kv_blocks`. */
  override supportedControls(): readonly string[] {
    return SAMPLE_CONTROLS;
  }

  override async engineControl(name: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (name !== 'clear_kv_blocks') return this.#hold.control(name, body);
    const dropped = this.kvCache?.clearUnused() ?? 0;
    this.#report();
    log.info({ blocks: dropped }, 'KV cache cleared');
    return { status: 'success', message: 'KV cache cleared' };
  }

  /**
   * Simulated LoRA adapters: the source (a `file://` URI or a path) must exist, but its files are
   * not read. Requests whose `model` names the adapter get a sequence shifted by its id
   * ({@link loraId} mod 1000).
   */
  override async loadLora(name: string, source: { uri: string }): Promise<void> {
    const path = source.uri.startsWith('file://') ? fileURLToPath(source.uri) : source.uri;
    if (!existsSync(path)) throw new InvalidArgument(`LoRA source ${source.uri}: no such file or folder`);
    this.#adapters.set(name, loraId(name));
  }

  override async unloadLora(name: string): Promise<void> {
    this.#adapters.delete(name);
  }

  /** Nothing to release: the engine holds no resources. */
  override async cleanup(): Promise<void> {}
}
