import { stat } from 'node:fs/promises';
import { basename } from 'node:path';

import {
  CannotConnect,
  configOf,
  type Context,
  type EmbedRequest,
  type Embeddings,
  type EngineConfig,
  engineLog,
  type GenerateChunk,
  type GenerateRequest,
  type ExportedKvState,
  InvalidArgument,
  type KvEventSource,
  type KvTransfer,
  LLMEngine,
  parseFlags,
  registerPrometheus,
  type SnapshotPublisher,
  usage,
  type WorkerConfig,
  workerConfigFromFlags,
} from '@dynamo/backend';
import {
  getLlama,
  type Llama,
  type LlamaContextSequence,
  type LlamaGrammar,
  LlamaGrammarEvaluationState,
  LlamaLogLevel,
  type LlamaModel,
  type Token,
  TokenBias,
} from 'node-llama-cpp';

import { BlockLedger } from './block-ledger.js';
import { Embedder } from './embedder.js';
import { defaultThreads, type GPU_CHOICES, llamaCppFlags, llamaCppHelp, llamaCppSettings } from './settings.js';
import { guidedGrammar } from './gbnf/guided.js';
import { resolveGguf } from './gguf-path.js';
import { type Lane, type LaneOptions, LoraLanes, openLane } from './lanes.js';
import { EngineMetrics } from './metrics.js';
import { acceptGrammarTokens } from './internals.js';
import { modelDigest } from './model-digest.js';
import { eogBan, logprobsWanted, numberOptions, repeatPenalty, samplerOptions, tokenLogprobs } from './sampling.js';
import type { Slot } from './sequence-slots.js';
import { checkStateHeader, stateLayout } from './state-header.js';
import { StateStore } from './state-store.js';
import { type FinishReason, type TokenBatch, TokenStream } from './token-stream.js';

/** Tokens per KV block, as the worker's card announces it (`kv_cache_block_size`) and KV events count them. */
const KV_BLOCK_SIZE = 16;

/** Options of {@link LlamaCppEngine}. */
export interface LlamaCppEngineOptions {
  /** The `.gguf` file to load. */
  modelPath: string;
  /** Name the model is served as (default: the file name without `.gguf`). */
  modelName?: string;
  /** llama.cpp's compute backend (default `false`: the CPU). */
  gpu?: Exclude<(typeof GPU_CHOICES)[number], 'false'> | false;
  /** CPU threads (default {@link defaultThreads}: one less than the cores this process may use). */
  threads?: number;
  /** Requests generated at once, one sequence each (default 4). */
  parallel?: number;
  /** Requests generated at once on each loaded LoRA adapter, one sequence each of the adapter's own context (default 1). */
  loraParallel?: number;
  /** Requests that may wait for a sequence before new ones are refused (default 64), per context. */
  maxQueued?: number;
  /** Tokens of KV cache per sequence: prompt plus answer (default 4096). */
  contextSize?: number;
  /** Compute embeddings (`embed`) instead of generating (default false). */
  embedding?: boolean;
  /**
   * Keep each sequence's KV cache when its request ends, so that a prompt starting alike (the next
   * turn of a conversation) evaluates only what is new, and tell routers which blocks are cached
   * (default true; always off for recurrent and sliding-window models).
   */
  prefixCaching?: boolean;
  /**
   * The least share of a prompt a sequence's cache must cover for the request to take that
   * sequence rather than an empty or the least recently used one (default 0.5), as llama-server's
   * `--slot-prompt-similarity`.
   */
  slotPromptSimilarity?: number;
  /**
   * The worker's part in disaggregated serving (default `agg`): a `prefill` worker evaluates the
   * prompt, makes the first token and hands the sequence's KV state to the decode worker that
   * pulls it; a `decode` worker loads that state and generates the rest.
   */
  disaggregationMode?: 'agg' | 'prefill' | 'decode';
  /** How long a prefill worker keeps a prompt's KV state for its decode worker to pull (default 60 s). */
  kvTransferTimeoutSecs?: number;
}

/** A request's part in disaggregated serving, as it changes the request's run. */
interface Role {
  /** Hand the evaluated prompt over: stage its state, and end with the handle to it. */
  prefill?: true;
  /** The answer's first tokens, made by the prefill worker: sent first, then continued from. */
  made?: readonly Token[];
  /** Their log probabilities, when the request asked for them. */
  madeLogprobs?: ChunkLogprobs;
  /** The pulled state of the prompt, to load instead of evaluating it. */
  state?: string;
}

/** A chunk's log probability fields. */
type ChunkLogprobs = Pick<GenerateChunk, 'log_probs' | 'top_logprobs'>;

/** The log probability fields of a batch's chunk, when it has them. */
function chunkLogprobs(batch: TokenBatch): ChunkLogprobs | undefined {
  return batch.logprobs && { log_probs: batch.logprobs.map((l) => l.logprob), top_logprobs: batch.logprobs.map((l) => l.top) };
}

const log = engineLog('llama-cpp');

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  /** Generation: the base model's context of `parallel` sequences (absent for an embedding engine). */
  base?: Lane;
  /** Generation: the LoRA adapters' lanes. */
  adapters?: LoraLanes;
  /** Embeddings (only for an embedding engine). */
  embedder?: Embedder;
  /** Token ids at or above this are not the model's. */
  vocab: number;
  /** Whether sequences keep their tokens between requests (the option, unless the model cannot). */
  prefixCaching: boolean;
  /** Prefill and decode workers: where states are staged, and the model's digest their headers name. */
  handoff?: { store: StateStore; digest: string };
}

/**
 * An engine that generates with llama.cpp through node-llama-cpp: one context with `parallel`
 * sequences evaluated in the same batches (continuous batching), sampling from each request's
 * `sampling_options`, stopping at EOS, `max_tokens` or a stop token id, and streaming every token
 * produced since the last chunk. With prefix caching (the default) a sequence keeps its KV cache
 * between requests, a request takes the sequence holding most of its prompt and evaluates only the
 * rest, and the cached blocks are published as KV events for KV-aware routers. Each loaded LoRA
 * adapter ({@link LlamaCppEngine.loadLora}) gets a context of its own with `loraParallel` sequences.
 */
export class LlamaCppEngine extends LLMEngine {
  readonly modelPath: string;
  readonly modelName: string;
  readonly gpu: LlamaCppEngineOptions['gpu'];
  readonly threads: number;
  readonly parallel: number;
  readonly loraParallel: number;
  readonly maxQueued: number;
  readonly contextSize: number;
  readonly embedding: boolean;
  readonly prefixCaching: boolean;
  readonly slotPromptSimilarity: number;
  readonly disaggregationMode: 'agg' | 'prefill' | 'decode';
  readonly kvTransferTimeoutSecs: number;
  #transfer: KvTransfer | undefined;
  #loaded: Loaded | undefined;
  #loading: Promise<Loaded> | undefined;
  /** The blocks every sequence holds, over the base model and its adapters. */
  readonly #ledger = new BlockLedger(KV_BLOCK_SIZE);
  readonly #metrics = new EngineMetrics(() => this.load());
  #unregisterMetrics: (() => void) | undefined;
  #snapshots: SnapshotPublisher | undefined;

  constructor(options: LlamaCppEngineOptions) {
    super();
    this.modelPath = options.modelPath;
    this.modelName = options.modelName ?? basename(options.modelPath).replace(/\.gguf$/i, '');
    this.gpu = options.gpu ?? false;
    this.threads = options.threads ?? defaultThreads();
    this.parallel = options.parallel ?? 4;
    this.loraParallel = options.loraParallel ?? 1;
    this.maxQueued = options.maxQueued ?? 64;
    this.contextSize = options.contextSize ?? 4096;
    this.embedding = options.embedding ?? false;
    this.prefixCaching = options.prefixCaching ?? true;
    this.slotPromptSimilarity = options.slotPromptSimilarity ?? 0.5;
    this.disaggregationMode = options.disaggregationMode ?? 'agg';
    this.kvTransferTimeoutSecs = options.kvTransferTimeoutSecs ?? 60;
    if (this.embedding && this.disaggregationMode !== 'agg')
      throw new InvalidArgument(`--embedding with --disaggregation-mode ${this.disaggregationMode}: an embedding worker has no prefill or decode to split`);
  }

  /** Builds the engine and its worker config from `dynamo-llama-cpp`'s flags and `DYN_*` env. */
  static override async fromArgs(
    argv: string[] = process.argv.slice(2),
    env: Record<string, string | undefined> = process.env,
  ): Promise<[LlamaCppEngine, WorkerConfig]> {
    const parsed = parseFlags(llamaCppFlags, argv, env);
    if (parsed.help) {
      process.stdout.write(llamaCppHelp());
      process.exit(0);
    }
    const { model, engine: options, worker } = configOf(llamaCppSettings, parsed.values);
    const mode = worker.disaggregationMode;
    if (mode === 'encode') throw new InvalidArgument('--disaggregation-mode encode: dynamo-llama-cpp has no multimodal encoder (agg, prefill or decode)');
    const file = await resolveGguf(model.path, model.ggufFile, env);
    const engine = new LlamaCppEngine({ modelPath: file, ...(model.name && { modelName: model.name }), ...options, disaggregationMode: mode });
    const config = workerConfigFromFlags(options.embedding ? { ...parsed.values, endpointTypes: 'embedding' } : parsed.values, {
      modelName: file,
      servedModelName: engine.modelName,
    });
    return [engine, config];
  }

  override async start(_workerId: bigint): Promise<EngineConfig> {
    const loaded = await (this.#loading ??= this.#load());
    this.#loaded = loaded;
    this.#unregisterMetrics ??= registerPrometheus(this.#metrics.registry, { prefixes: ['llamacpp:'] });
    return {
      model: this.modelName,
      servedModelName: this.modelName,
      llm: { contextLength: this.contextSize, kvCacheBlockSize: KV_BLOCK_SIZE, maxNumSeqs: this.parallel, totalKvBlocks: this.#totalBlocks(loaded) },
    };
  }

  async #load(): Promise<Loaded> {
    const file = this.modelPath;
    const info = await stat(file).catch((err: NodeJS.ErrnoException) => {
      throw new InvalidArgument(`model file ${file}: ${err.code === 'ENOENT' ? 'does not exist' : err.message}`);
    });
    if (!info.isFile()) throw new InvalidArgument(`model file ${file} is not a file`);
    const llama = await getLlama({ gpu: this.gpu ?? false, build: 'never', logLevel: LlamaLogLevel.error });
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: file });
    } catch (err) {
      await llama.dispose();
      throw new InvalidArgument(`llama.cpp could not load ${file}: ${(err as Error).message}`, { cause: err });
    }
    const vocab = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? Number.POSITIVE_INFINITY;
    if (this.embedding) {
      const context = await model.createEmbeddingContext({ contextSize: this.contextSize, threads: this.threads });
      log.info({ model: file, gpu: llama.gpu, threads: this.threads, context_size: this.contextSize }, 'model loaded for embeddings');
      return {
        llama,
        model,
        embedder: new Embedder(context, { modelName: this.modelName, vocab, contextSize: this.contextSize }),
        vocab,
        prefixCaching: false,
      };
    }
    const prefixCaching = this.prefixCaching && prefixReusable(model);
    const lane = (sequences: number): LaneOptions => ({
      sequences,
      threads: this.threads,
      contextSize: this.contextSize,
      slots: {
        maxQueued: this.maxQueued,
        prefixCaching,
        blockSize: KV_BLOCK_SIZE,
        similarity: this.slotPromptSimilarity,
        ...(prefixCaching && { ledger: this.#ledger }),
      },
    });
    const base = await openLane(model, lane(this.parallel));
    const adapters = new LoraLanes(model, lane(this.loraParallel), [this.modelName, this.modelPath]);
    const handoff =
      this.disaggregationMode === 'agg'
        ? undefined
        : {
            store: await StateStore.open(this.kvTransferTimeoutSecs * 1000),
            digest: await modelDigest(file, model.fileInfo.infoEndOffset ?? model.fileInfo.metadataSize),
          };
    log.info(
      {
        model: file,
        gpu: llama.gpu,
        threads: this.threads,
        parallel: this.parallel,
        context_size: this.contextSize,
        prefix_caching: prefixCaching,
        disaggregation_mode: this.disaggregationMode,
      },
      'model loaded',
    );
    return { llama, model, base, adapters, vocab, prefixCaching, ...(handoff && { handoff }) };
  }

  /** The base context's KV cells in blocks. */
  #totalBlocks(loaded: Loaded): number {
    return Math.floor(((loaded.base?.context.contextSize ?? this.contextSize) * this.parallel) / KV_BLOCK_SIZE);
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const loaded = this.#loaded;
    if (!loaded) throw new InvalidArgument('generate() before start()');
    if (!loaded.base || !loaded.adapters) throw new InvalidArgument(`this worker computes embeddings of ${this.modelName} (--embedding); it does not generate`);
    const prompt = request.token_ids;
    const { vocab } = loaded;
    if (prompt.length === 0) throw new InvalidArgument('token_ids is empty: a prompt needs at least one token');
    const bad = prompt.find((id) => id >= vocab);
    if (bad !== undefined) throw new InvalidArgument(`token id ${bad} is outside the model's vocabulary of ${vocab}`);
    if (prompt.length >= this.contextSize) {
      throw new InvalidArgument(`the prompt has ${prompt.length} tokens; the context holds ${this.contextSize} (prompt and answer together, --context-size)`);
    }
    const lane = loaded.adapters.laneFor(loaded.base, request);
    // Counted from here (no await in between) to the last token, so that unloadLora() never
    // disposes a context under a request.
    lane.users++;
    try {
      if (this.disaggregationMode === 'prefill') yield* this.#generateOn(loaded, lane, request, context, { prefill: true });
      else if (this.disaggregationMode === 'decode' && request.prefill_result != null) yield* this.#decode(loaded, lane, request, context);
      // A decode worker serves a request without a prefill result whole, as stock frontends send
      // when no prefill worker is left (and the health canary does).
      else yield* this.#generateOn(loaded, lane, request, context, {});
    } finally {
      lane.users--;
      if (lane.users === 0) lane.drained?.();
    }
  }

  /**
   * A decode worker's request: pulls the prompt's state from the prefill worker that evaluated it,
   * checks that it fits (model, layout), and continues the answer from the prefill's first token.
   * When the prefill worker cannot be reached (it died, or dropped the state), the prompt is
   * evaluated here instead and the answer is the same.
   */
  async *#decode(loaded: Loaded, lane: Lane, request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const handoff = loaded.handoff!;
    const params = request.prefill_result?.disaggregated_params as Record<string, unknown> | undefined;
    const made = params?.completed_tokens;
    if (!Array.isArray(made) || made.length === 0 || !made.every((id) => Number.isInteger(id) && id >= 0 && id < loaded.vocab)) {
      throw new InvalidArgument(
        `prefill_result.disaggregated_params.completed_tokens must list the prefill worker's token ids, got ${JSON.stringify(made ?? null)}`,
      );
    }
    const madeLogprobs = params?.completed_logprobs as ChunkLogprobs | undefined;
    let state: string | undefined;
    try {
      if (!this.#transfer) throw new InvalidArgument('decode worker has no KV transfer (attachKvTransfer was not called)');
      const pulled = await this.#transfer.pull(params?.kv_transfer, context);
      checkStateHeader(pulled.header, stateLayout(lane.context, handoff.digest, lane.slots.loraName));
      state = await handoff.store.receive(pulled);
    } catch (err) {
      if (!(err instanceof CannotConnect)) throw err;
      log.warn({ err: (err as Error).message }, 'KV state not pulled from the prefill worker; evaluating the prompt here');
      this.#metrics.handoffFallback();
    }
    try {
      yield* this.#generateOn(loaded, lane, request, context, {
        made: made as Token[],
        ...(madeLogprobs && { madeLogprobs }),
        ...(state !== undefined && { state }),
      });
    } finally {
      if (state !== undefined) await handoff.store.discard(state);
    }
  }

  /** One request on one of `lane`'s sequences, once it gets one. */
  async *#generateOn(loaded: Loaded, lane: Lane, request: GenerateRequest, context: Context, role: Role): AsyncGenerator<GenerateChunk> {
    const grammar = await this.#grammar(loaded, request);
    const slot = await lane.slots.acquire(request.token_ids, context);
    // With a loaded state the prompt's cached tokens are those the prefill worker found cached.
    const cached = role.state === undefined ? (slot?.reused ?? 0) : cachedTokens(request);
    const usageOf = (completion: number) => ({
      ...usage(request.token_ids.length, completion),
      ...(loaded.prefixCaching && { prompt_tokens_details: { cached_tokens: cached } }),
    });
    if (slot === undefined) {
      if (!context.isKilled()) yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usageOf(0) };
      return;
    }
    const stream = new TokenStream();
    let production: Promise<boolean> = Promise.resolve(false);
    let produced = 0;
    try {
      if (role.state !== undefined) {
        const state = role.state;
        await lane.slots.loadState(slot, (sequence) => sequence.loadStateFromFile(state, { acceptRisk: true }));
      }
      this.#report();
      if (loaded.prefixCaching) this.#metrics.prefixQuery(request.token_ids.length, cached);
      const made = role.made ?? [];
      // The prefill worker's tokens open the answer: sent first, and evaluated before the rest is drawn.
      if (made.length > 0) {
        produced = made.length;
        this.#metrics.generated(made.length);
        yield { token_ids: [...made], ...role.madeLogprobs };
      }
      production = this.#produce(loaded, slot, request, made, context, stream, grammar, () => lane.slots.evaluated(slot));
      // A prefill worker's answer is one chunk: the handoff comes with its token.
      const held = new TokenStream();
      for (;;) {
        const batch = await stream.take();
        produced += batch.tokens.length;
        this.#metrics.generated(batch.tokens.length);
        if (role.prefill && batch.finish === undefined) {
          held.pushBatch(batch);
          continue;
        }
        if (batch.finish === 'cancelled' && context.isKilled()) return;
        if (role.prefill) held.pushBatch(batch);
        const whole = role.prefill ? await held.take() : batch;
        const logprobs = chunkLogprobs(whole);
        if (batch.finish === undefined) {
          yield { token_ids: whole.tokens, ...logprobs };
          continue;
        }
        // The prefill ended at its one token (not at EOS or a stop): the decode worker goes on from its state.
        const handoff =
          role.prefill &&
          batch.finish === 'length' &&
          whole.tokens.length > 0 &&
          (await this.#stage(loaded, lane, slot, production, whole.tokens as Token[], logprobs));
        yield {
          token_ids: whole.tokens,
          ...logprobs,
          finish_reason: batch.finish,
          completion_usage: usageOf(produced),
          ...(handoff && { disaggregated_params: handoff }),
        };
        return;
      }
    } finally {
      stream.abandoned = true;
      const clean = await production;
      await lane.slots.release(slot, clean);
      this.#report();
    }
  }

  /** Stages the evaluated prompt in `slot` for the decode worker; returns the terminal chunk's `disaggregated_params`. */
  async #stage(
    loaded: Loaded,
    lane: Lane,
    slot: Slot<LlamaContextSequence>,
    production: Promise<boolean>,
    made: Token[],
    logprobs: ChunkLogprobs | undefined,
  ): Promise<Record<string, unknown>> {
    const transfer = this.#transfer;
    if (!transfer || !loaded.handoff) throw new InvalidArgument('prefill worker has no KV transfer (attachKvTransfer was not called)');
    // The sequence is still: its llama.cpp loop ended with the one token.
    if (!(await production)) throw new InvalidArgument('llama.cpp failed while evaluating the prompt; nothing to hand over');
    const layout = stateLayout(lane.context, loaded.handoff.digest, lane.slots.loraName);
    const { id, bytes } = await loaded.handoff.store.stage(slot.sequence, layout, transfer.maxBytes);
    return { kv_transfer: transfer.handle(id, bytes), completed_tokens: made, ...(logprobs && { completed_logprobs: logprobs }) };
  }

  /**
   * Loads the LoRA adapter GGUF at `source.uri` (a `file://` URI or an absolute path, of the file
   * or of a folder holding exactly one `.gguf`) as `name`. Requests whose `routing.lora_name` or
   * `model` is `name` then run on a llama.cpp context of their own, of `loraParallel` sequences
   * with the adapter applied and a prefix cache of its own; the base model's context is untouched.
   * Another scheme, a missing file, or a file that is not a LoRA adapter fitting this model is
   * refused with an `InvalidArgument` naming the file and what is wrong, and the engine serves on
   * as before. Loading a name again from the same file does nothing.
   */
  override async loadLora(name: string, source: { uri: string }): Promise<void> {
    const loaded = this.#loaded;
    if (!loaded) throw new InvalidArgument('loadLora() before start()');
    if (!loaded.adapters) throw new InvalidArgument(`this worker computes embeddings of ${this.modelName} (--embedding); LoRA adapters apply to generation`);
    await loaded.adapters.load(name, source.uri);
  }

  /**
   * Unloads adapter `name` without cutting requests short: requests naming it are refused from
   * the call on, those already on it (generating or waiting for a sequence) run to their end,
   * and then its cached blocks are reported removed, its context is disposed and its weights freed
   * (unless another name was loaded from the same file). Resolves once that is done; an unknown
   * name does nothing.
   */
  override async unloadLora(name: string): Promise<void> {
    await this.#loaded?.adapters?.unload(name);
  }

  /** The model's embedding of each input (llama.cpp's embedding context, one input at a time), cut to `dimensions` when asked. */
  override async embed(request: EmbedRequest): Promise<Embeddings> {
    const loaded = this.#loaded;
    if (!loaded) throw new InvalidArgument('embed() before start()');
    if (!loaded.embedder) throw new InvalidArgument(`this worker generates with ${this.modelName}; start it with --embedding to compute embeddings`);
    return loaded.embedder.embed(request);
  }

  /** Prefill and decode workers: the transfer of prompts' KV states between them. */
  override attachKvTransfer(transfer: KvTransfer): void {
    this.#transfer = transfer;
  }

  /** A prefill worker: the staged state `id`, for the decode worker pulling it (once). */
  override async exportKvState(id: string): Promise<ExportedKvState> {
    const store = this.#loaded?.handoff?.store;
    if (!store) throw new InvalidArgument(`this worker is not a prefill worker; it holds no KV state '${id}'`);
    return store.export(id);
  }

  /** A prefill worker is quiescent once no staged state waits for its decode worker. */
  override async isQuiescent(): Promise<boolean | null> {
    const store = this.#loaded?.handoff?.store;
    return store === undefined ? null : store.pending === 0;
  }

  /** The cached blocks, as KV events the engine pushes itself (with prefix caching). */
  override async kvEventSources(): Promise<KvEventSource[]> {
    const loaded = this.#loaded ?? (await this.#loading);
    return loaded?.prefixCaching ? [{ kind: 'push', onReady: (events) => this.#ledger.attach(events) }] : [];
  }

  /** Rank 0's KV cache gauges and load, for a generating engine. */
  override componentMetricsDpRanks(): number[] {
    return this.embedding ? [] : [0];
  }

  override attachSnapshotPublisher(publisher: SnapshotPublisher): void {
    this.#snapshots = publisher;
    this.#report();
  }

  /** `clear_kv_blocks`: empties every sequence no request is on (telling routers), as stock's engines drop their unused cache. */
  override supportedControls(): readonly string[] {
    return ['clear_kv_blocks'];
  }

  override async engineControl(name: string, _body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (name !== 'clear_kv_blocks') return { status: 'error', message: `unsupported engine control: ${name}` };
    const lanes = this.#lanes();
    let sequences = 0;
    for (const lane of lanes) sequences += await lane.slots.clearFree();
    this.#report();
    log.info({ sequences }, 'KV cache cleared');
    return { status: 'success', message: 'KV cache cleared' };
  }

  /**
   * What each sequence's KV cache holds (the base model's first, then each adapter's): the tokens
   * its blocks, as published, are made of. For checks and debugging.
   */
  kvContents(): Array<{ loraName?: string; tokens: number[] }> {
    return this.#lanes().flatMap((lane) =>
      lane.slots.contents().map((tokens) => ({ ...(lane.slots.loraName !== undefined && { loraName: lane.slots.loraName }), tokens })),
    );
  }

  #lanes(): Lane[] {
    const loaded = this.#loaded;
    return loaded?.base ? [loaded.base, ...(loaded.adapters?.lanes() ?? [])] : [];
  }

  /** Publishes the load routers see: blocks of the requests in progress, of the base context's total. */
  #report(): void {
    const loaded = this.#loaded;
    if (!this.#snapshots || !loaded) return;
    const used = this.#lanes().reduce((sum, lane) => sum + lane.slots.usedBlocks, 0);
    const total = this.#totalBlocks(loaded);
    this.#snapshots.publish(0, { kvUsedBlocks: used, kvTotalBlocks: total, gpuCacheUsage: Math.min(1, used / total), kvCacheHitRate: this.#metrics.hitRate() });
  }

  /** The llama.cpp grammar for the request's `guided_decoding`, if it has one. */
  async #grammar(loaded: Loaded, request: GenerateRequest): Promise<LlamaGrammar | undefined> {
    const text = guidedGrammar(request.sampling_options?.guided_decoding);
    if (text === undefined) return undefined;
    try {
      return await loaded.llama.createGrammar({ grammar: text });
    } catch (err) {
      throw new InvalidArgument(`sampling_options.guided_decoding: llama.cpp cannot use the grammar (${(err as Error).message}): ${text.slice(0, 200)}`, {
        cause: err,
      });
    }
  }

  /**
   * Runs llama.cpp for one request, pushing its tokens to `stream`, and calls `evaluated` once its
   * prompt is in the KV cache. Never rejects: resolves false when llama.cpp failed (the sequence's
   * state is then not to be trusted).
   */
  async #produce(
    loaded: Loaded,
    slot: Slot<LlamaContextSequence>,
    request: GenerateRequest,
    made: readonly Token[],
    context: Context,
    stream: TokenStream,
    grammar: LlamaGrammar | undefined,
    evaluated: () => void,
  ): Promise<boolean> {
    const { model } = loaded;
    const { sequence } = slot;
    const stop = request.stop_conditions ?? {};
    const num = numberOptions(request);
    const budget = this.contextSize - request.token_ids.length;
    // A prefill worker makes one token whatever it is asked; tokens made before count against the rest.
    const maxTokens = (this.disaggregationMode === 'prefill' ? 1 : Math.min(stop.max_tokens ?? budget, budget)) - made.length;
    const stopIds = new Set(stop.stop_token_ids ?? []);
    const ignoreEos = stop.ignore_eos === true;
    const minTokens = stop.min_tokens ?? 0;
    // Before min_tokens (or always, with ignore_eos) the end-of-generation tokens cannot be drawn.
    const noEog = ignoreEos || minTokens > 0 ? eogBan(model) : undefined;
    const noBias = new TokenBias(model.tokenizer);
    let count = made.length;
    let finish: FinishReason = 'length';
    try {
      if (maxTokens <= 0) {
        stream.end('length');
        return true;
      }
      if (context.isStopped()) {
        stream.end('cancelled');
        return true;
      }
      // The sequence holds the first `reused` prompt tokens already; evaluation appends the rest,
      // and the answer's tokens made elsewhere.
      const fresh = [...request.token_ids.slice(slot.reused), ...made] as Token[];
      this.#metrics.prompt(fresh.length);
      const topCount = logprobsWanted(request);
      const options = {
        ...samplerOptions(num, noEog !== undefined),
        ...repeatPenalty(num, () => sequence.contextTokens.slice(request.token_ids.length)),
        tokenBias: () => (noEog && (ignoreEos || count < minTokens) ? noEog : noBias),
        ...(grammar && { grammarEvaluationState: grammarState(loaded, grammar, made) }),
        yieldEogToken: true,
      };
      // With log probabilities asked for, every step also returns the distribution it drew from.
      const steps: AsyncIterable<{ token: Token; probabilities?: Map<Token, number> }> =
        topCount === undefined
          ? (async function* () {
              for await (const token of sequence.evaluate(fresh, options)) yield { token };
            })()
          : sequence.evaluateWithMetadata(fresh, { probabilities: true }, options);
      let first = true;
      for await (const { token, probabilities } of steps) {
        if (first) evaluated();
        first = false;
        if (stream.abandoned || context.isStopped()) {
          finish = 'cancelled';
          break;
        }
        if (model.isEogToken(token)) {
          finish = 'eos';
          break;
        }
        stream.push(token, probabilities && tokenLogprobs(model, token, probabilities, topCount ?? 0));
        count++;
        if (stopIds.has(token)) {
          finish = 'stop';
          break;
        }
        if (count - made.length >= maxTokens) break;
      }
      stream.end(finish);
      return true;
    } catch (err) {
      stream.fail(err);
      return false;
    }
  }

  /** Requests waiting for a sequence, and sequences generating, over the base model and its adapters. */
  load(): { queued: number; active: number } {
    const lanes = this.#lanes();
    return { queued: lanes.reduce((sum, lane) => sum + lane.slots.queued, 0), active: lanes.reduce((sum, lane) => sum + lane.slots.active, 0) };
  }

  /** A one-token greedy generation from BOS. */
  override async healthCheckPayload(): Promise<Record<string, unknown>> {
    const bos = this.#loaded?.model.tokens.bos ?? 1;
    return { token_ids: [bos], stop_conditions: { max_tokens: 1, ignore_eos: true }, sampling_options: { temperature: 0 } };
  }

  override async cleanup(): Promise<void> {
    this.#unregisterMetrics?.();
    this.#unregisterMetrics = undefined;
    const loading = this.#loading;
    this.#loading = undefined;
    this.#loaded = undefined;
    if (!loading) return;
    const loaded = await loading.catch(() => undefined);
    if (!loaded) return;
    await loaded.handoff?.store.close();
    await loaded.adapters?.dispose();
    await loaded.base?.context.dispose();
    await loaded.embedder?.context.dispose();
    await loaded.model.dispose();
    await loaded.llama.dispose();
  }
}

/**
 * Whether a sequence's cache can be cut back to a prefix and extended: not for recurrent models
 * (one state, no per-position cache) nor sliding-window ones (the cache keeps only the window).
 */
function prefixReusable(model: LlamaModel): boolean {
  const insights = model.fileInsights;
  if (!insights.isRecurrent && insights.swaSize === undefined) return true;
  log.warn(
    { architecture: model.fileInfo.metadata.general.architecture },
    `prefix caching is off: the model ${insights.isRecurrent ? 'is recurrent' : 'uses sliding-window attention'}, so a cached prefix cannot be cut and extended`,
  );
  return false;
}

/** A grammar's state for a request whose answer starts with `made` (drawn under the same grammar elsewhere). */
function grammarState(loaded: Loaded, grammar: LlamaGrammar, made: readonly Token[]): LlamaGrammarEvaluationState {
  const state = new LlamaGrammarEvaluationState({ model: loaded.model, grammar });
  acceptGrammarTokens(loaded.llama, state, made);
  return state;
}

/** The prompt's cached tokens the prefill worker reported with its result. */
function cachedTokens(request: GenerateRequest): number {
  const details = request.prefill_result?.prompt_tokens_details as { cached_tokens?: unknown } | undefined;
  return typeof details?.cached_tokens === 'number' ? details.cached_tokens : 0;
}
