import { stat } from 'node:fs/promises';
import { basename } from 'node:path';

import {
  type Context,
  type EmbedRequest,
  type Embeddings,
  type EngineConfig,
  engineLog,
  type GenerateChunk,
  type GenerateRequest,
  InvalidArgument,
  LLMEngine,
  parseFlags,
  registerPrometheus,
  usage,
  type WorkerConfig,
  workerConfigFromFlags,
} from '@dynamo/backend';
import {
  getLlama,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaGrammar,
  LlamaGrammarEvaluationState,
  LlamaLogLevel,
  type LlamaModel,
  type Token,
  TokenBias,
} from 'node-llama-cpp';

import { defaultThreads, type GPU_CHOICES, llamaCppFlags, llamaCppHelp } from './flags.js';
import { guidedGrammar } from './gbnf/guided.js';
import { resolveGguf } from './gguf-path.js';
import { gateSampling } from './sample-gate.js';
import { adapterFile, checkAdapter } from './lora.js';
import { EngineMetrics } from './metrics.js';
import { SequencePool } from './sequence-pool.js';
import { type FinishReason, TokenStream, type TopLogprob } from './token-stream.js';

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
}

const log = engineLog('llama-cpp');

/** A llama.cpp context and the requests on its sequences: the base model's, or one LoRA adapter's. */
interface Lane {
  context: LlamaContext;
  pool: SequencePool<LlamaContextSequence>;
  /** How many sequences the context has. */
  size: number;
  /** Requests on it, from when they picked it until their last token. */
  users: number;
  /** Set by unloadLora() while requests are still on it: called when the last one leaves. */
  drained?: () => void;
}

/** A loaded LoRA adapter: its lane, and the file it came from. */
interface Adapter extends Lane {
  file: string;
  /** Set when unloadLora() is called: it takes no more requests. */
  unloading?: boolean;
}

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  /** Generation: the base model's context of `parallel` sequences (absent for an embedding engine). */
  base?: Lane;
  /** Embeddings: the embedding context (only for an embedding engine). */
  embedder?: LlamaEmbeddingContext;
  /** Token ids at or above this are not the model's. */
  vocab: number;
}

/**
 * An engine that generates with llama.cpp through node-llama-cpp: one context with `parallel`
 * sequences evaluated in the same batches (continuous batching), sampling from each request's
 * `sampling_options`, stopping at EOS, `max_tokens` or a stop token id, and streaming every token
 * produced since the last chunk. Each loaded LoRA adapter ({@link LlamaCppEngine.loadLora}) gets
 * a context of its own with `loraParallel` sequences.
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
  #loaded: Loaded | undefined;
  /** Embedding requests run one after another on the one embedding context. */
  #embedQueue: Promise<unknown> = Promise.resolve();
  #loading: Promise<Loaded> | undefined;
  /** Loaded LoRA adapters by name. */
  readonly #adapters = new Map<string, Adapter>();
  /** Loads and unloads of adapters run one after another. */
  #adapterChanges: Promise<unknown> = Promise.resolve();
  readonly #metrics = new EngineMetrics(() => this.load());
  #unregisterMetrics: (() => void) | undefined;

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
  }

  /** Builds the engine and its worker config from `dynamo-llama-cpp`'s flags and `DYN_*` env. */
  static override async fromArgs(argv: string[] = process.argv.slice(2), env: Record<string, string | undefined> = process.env): Promise<[LlamaCppEngine, WorkerConfig]> {
    const parsed = parseFlags(llamaCppFlags, argv, env);
    if (parsed.help) {
      process.stdout.write(llamaCppHelp());
      process.exit(0);
    }
    const { modelPath, ggufFile, modelName, gpu, threads, parallel, loraParallel, maxQueued, contextSize, embedding, ...common } = parsed.values;
    if (common.disaggregationMode !== 'agg') {
      // Prefill/decode need a KV cache handoff llama.cpp does not offer, and encode a multimodal encoder.
      throw new InvalidArgument(`--disaggregation-mode ${common.disaggregationMode}: dynamo-llama-cpp serves aggregated workers only (agg)`);
    }
    const file = await resolveGguf(modelPath, ggufFile, env);
    const engine = new LlamaCppEngine({ modelPath: file, ...(modelName && { modelName }), gpu: gpu === 'false' ? false : gpu, threads, parallel, loraParallel, maxQueued, contextSize, embedding });
    const config = workerConfigFromFlags(embedding ? { ...common, endpointTypes: 'embedding' } : common, { modelName: file, servedModelName: engine.modelName });
    return [engine, config];
  }

  override async start(_workerId: bigint): Promise<EngineConfig> {
    const loaded = await (this.#loading ??= this.#load());
    this.#loaded = loaded;
    this.#unregisterMetrics ??= registerPrometheus(this.#metrics.registry, { prefixes: ['llamacpp:'] });
    return {
      model: this.modelName,
      servedModelName: this.modelName,
      llm: { contextLength: this.contextSize, kvCacheBlockSize: 16, maxNumSeqs: this.parallel, totalKvBlocks: Math.floor(((loaded.base?.context.contextSize ?? this.contextSize) * this.parallel) / 16) },
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
      const embedder = await model.createEmbeddingContext({ contextSize: this.contextSize, threads: this.threads });
      log.info({ model: file, gpu: llama.gpu, threads: this.threads, context_size: this.contextSize }, 'model loaded for embeddings');
      return { llama, model, embedder, vocab };
    }
    const base = await this.#lane(model, this.parallel);
    log.info({ model: file, gpu: llama.gpu, threads: this.threads, parallel: this.parallel, context_size: this.contextSize }, 'model loaded');
    return { llama, model, base, vocab };
  }

  /** A context of `size` sequences, with the LoRA adapter at `lora` applied when given. */
  async #lane(model: LlamaModel, size: number, lora?: string): Promise<Lane> {
    // contextSize is per sequence (llama.cpp allocates it once for each).
    const context = await model.createContext({ sequences: size, threads: this.threads, contextSize: this.contextSize, ...(lora !== undefined && { lora: { adapters: [{ filePath: lora }] } }) });
    gateSampling(context);
    const sequences = Array.from({ length: size }, () => context.getSequence());
    return { context, pool: new SequencePool(sequences, this.maxQueued), size, users: 0 };
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const loaded = this.#loaded;
    if (!loaded) throw new InvalidArgument('generate() before start()');
    if (!loaded.base) throw new InvalidArgument(`this worker computes embeddings of ${this.modelName} (--embedding); it does not generate`);
    const prompt = request.token_ids;
    const { vocab } = loaded;
    if (prompt.length === 0) throw new InvalidArgument('token_ids is empty: a prompt needs at least one token');
    const bad = prompt.find((id) => id >= vocab);
    if (bad !== undefined) throw new InvalidArgument(`token id ${bad} is outside the model's vocabulary of ${vocab}`);
    if (prompt.length >= this.contextSize) {
      throw new InvalidArgument(`the prompt has ${prompt.length} tokens; the context holds ${this.contextSize} (prompt and answer together, --context-size)`);
    }
    const lane = this.#laneFor(loaded.base, request);
    // Counted from here (no await in between) to the last token, so that unloadLora() never
    // disposes a context under a request.
    lane.users++;
    try {
      yield* this.#generateOn(loaded, lane, request, context);
    } finally {
      lane.users--;
      if (lane.users === 0) lane.drained?.();
    }
  }

  /**
   * Where a request runs: on the adapter its `routing.lora_name` (stock Dynamo's routing hint,
   * which frontends set for every adapter request) names, which must be loaded; else on the
   * adapter its `model` names, if one of that name is loaded or being unloaded; else on the base
   * model, whatever `model` says (a library caller may name the model differently).
   */
  #laneFor(base: Lane, request: GenerateRequest): Lane {
    const hint = request.routing?.lora_name;
    const explicit = typeof hint === 'string' && hint !== '';
    const name = explicit ? hint : request.model;
    if (name === undefined || name === '' || (!explicit && !this.#adapters.has(name))) return base;
    const adapter = this.#adapters.get(name);
    if (!adapter || adapter.unloading) throw new InvalidArgument(`unknown model or LoRA adapter: '${name}'`);
    return adapter;
  }

  /** One request on one of `lane`'s sequences, once it gets one. */
  async *#generateOn(loaded: Loaded, lane: Lane, request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const usageOf = (completion: number) => usage(request.token_ids.length, completion);
    const grammar = await this.#grammar(loaded, request);
    const sequence = await lane.pool.acquire(context);
    if (sequence === undefined) {
      if (!context.isKilled()) yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usageOf(0) };
      return;
    }
    const stream = new TokenStream();
    const production = this.#produce(loaded, sequence, request, context, stream, grammar);
    let produced = 0;
    try {
      for (;;) {
        const batch = await stream.take();
        produced += batch.tokens.length;
        this.#metrics.generated(batch.tokens.length);
        const logprobs = batch.logprobs && { log_probs: batch.logprobs.map((l) => l.logprob), top_logprobs: batch.logprobs.map((l) => l.top) };
        if (batch.finish === undefined) {
          yield { token_ids: batch.tokens, ...logprobs };
          continue;
        }
        if (batch.finish === 'cancelled' && context.isKilled()) return;
        yield { token_ids: batch.tokens, ...logprobs, finish_reason: batch.finish, completion_usage: usageOf(produced) };
        return;
      }
    } finally {
      stream.abandoned = true;
      await production;
      await sequence.clearHistory();
      lane.pool.release(sequence);
    }
  }

  /**
   * Loads the LoRA adapter GGUF at `source.uri` (a `file://` URI or an absolute path, of the file
   * or of a folder holding exactly one `.gguf`) as `name`. Requests whose `routing.lora_name` or
   * `model` is `name` then run on a llama.cpp context of their own, of `loraParallel` sequences
   * with the adapter applied; the base model's context is untouched. Another scheme, a missing
   * file, or a file that is not a LoRA adapter fitting this model is refused with an
   * `InvalidArgument` naming the file and what is wrong, and the engine serves on as before.
   * Loading a name again from the same file does nothing.
   */
  override async loadLora(name: string, source: { uri: string }): Promise<void> {
    await this.#adapterChange(async () => {
      const loaded = this.#loaded;
      if (!loaded) throw new InvalidArgument('loadLora() before start()');
      if (!loaded.base) throw new InvalidArgument(`this worker computes embeddings of ${this.modelName} (--embedding); LoRA adapters apply to generation`);
      if (name === this.modelName || name === this.modelPath) throw new InvalidArgument(`LoRA adapter name '${name}' is the base model's; pick another`);
      const file = await adapterFile(source.uri);
      const loadedAs = this.#adapters.get(name);
      if (loadedAs?.file === file) return;
      if (loadedAs) throw new InvalidArgument(`LoRA adapter '${name}' is already loaded from ${loadedAs.file}; unload it before loading ${file}`);
      await checkAdapter(file, loaded.model.fileInfo);
      let lane: Lane;
      try {
        lane = await this.#lane(loaded.model, this.loraParallel, file);
      } catch (err) {
        throw new InvalidArgument(`LoRA adapter ${file}: llama.cpp could not load it (${(err as Error).message})`, { cause: err });
      }
      this.#adapters.set(name, { ...lane, file });
      log.info({ lora: name, file, sequences: this.loraParallel }, 'LoRA adapter loaded');
    });
  }

  /**
   * Unloads adapter `name` without cutting requests short: requests naming it are refused from
   * the call on, those already on it (generating or waiting for a sequence) run to their end,
   * and then its context is disposed and its weights freed (unless another name was loaded from
   * the same file). Resolves once that is done; an unknown name does nothing.
   */
  override async unloadLora(name: string): Promise<void> {
    // Refused from the call on, also while an earlier load or unload still runs.
    const now = this.#adapters.get(name);
    if (now) now.unloading = true;
    await this.#adapterChange(async () => {
      // Looked up again: a load queued before this call may have added it since.
      const adapter = this.#adapters.get(name);
      const model = this.#loaded?.model;
      if (!adapter || !model) return;
      adapter.unloading = true;
      if (adapter.users > 0) {
        log.info({ lora: name, requests: adapter.users }, 'LoRA adapter unloading after its requests finish');
        await new Promise<void>((resolve) => {
          adapter.drained = resolve;
        });
      }
      await adapter.context.dispose();
      this.#adapters.delete(name);
      if (!model.disposed && ![...this.#adapters.values()].some((other) => other.file === adapter.file)) {
        // node-llama-cpp keeps an adapter's weights until the model is disposed, and would give a
        // later load of the same path those weights even if the file changed; its cache is keyed
        // by the resolved path, which adapterFile() returns.
        const cache = (model as unknown as { _loraAdapters: Map<string, { dispose(): Promise<void> }> })._loraAdapters;
        const weights = cache.get(adapter.file);
        cache.delete(adapter.file);
        await weights?.dispose();
      }
      log.info({ lora: name, file: adapter.file }, 'LoRA adapter unloaded');
    });
  }

  /** Runs `change` after the loads and unloads called before it have finished. */
  #adapterChange(change: () => Promise<void>): Promise<void> {
    const next = this.#adapterChanges.then(change);
    this.#adapterChanges = next.catch(() => {});
    return next;
  }

  /**
   * The model's embedding of each input (llama.cpp's embedding context, one input at a time),
   * cut to the first `dimensions` values when the request asks for fewer.
   */
  override async embed(request: EmbedRequest): Promise<Embeddings> {
    const loaded = this.#loaded;
    if (!loaded) throw new InvalidArgument('embed() before start()');
    const embedder = loaded.embedder;
    if (!embedder) throw new InvalidArgument(`this worker generates with ${this.modelName}; start it with --embedding to compute embeddings`);
    request.token_ids.forEach((ids, i) => {
      const bad = ids.find((id) => id >= loaded.vocab);
      if (bad !== undefined) throw new InvalidArgument(`token_ids.${i}: token id ${bad} is outside the model's vocabulary of ${loaded.vocab}`);
      if (ids.length > this.contextSize) throw new InvalidArgument(`token_ids.${i}: ${ids.length} tokens; the context holds ${this.contextSize} (--context-size)`);
    });
    const run = this.#embedQueue.then(async () => {
      const vectors: number[][] = [];
      for (const ids of request.token_ids) vectors.push([...(await embedder.getEmbeddingFor(ids as Token[])).vector]);
      return vectors;
    });
    this.#embedQueue = run.catch(() => {});
    const vectors = await run;
    const dims = request.dimensions;
    const size = vectors[0]?.length ?? 0;
    if (dims != null && dims > size) throw new InvalidArgument(`dimensions: ${this.modelName}'s embeddings have ${size} values, fewer than the ${dims} asked for`);
    const embeddings = dims == null ? vectors : vectors.map((v) => v.slice(0, dims));
    return { embeddings, prompt_tokens: request.token_ids.reduce((sum, ids) => sum + ids.length, 0) };
  }

  /** The llama.cpp grammar for the request's `guided_decoding`, if it has one. */
  async #grammar(loaded: Loaded, request: GenerateRequest): Promise<LlamaGrammar | undefined> {
    const text = guidedGrammar(request.sampling_options?.guided_decoding);
    if (text === undefined) return undefined;
    try {
      return await loaded.llama.createGrammar({ grammar: text });
    } catch (err) {
      throw new InvalidArgument(`sampling_options.guided_decoding: llama.cpp cannot use the grammar (${(err as Error).message}): ${text.slice(0, 200)}`, { cause: err });
    }
  }

  /** Runs llama.cpp for one request, pushing its tokens to `stream`; never rejects. */
  async #produce(loaded: Loaded, sequence: LlamaContextSequence, request: GenerateRequest, context: Context, stream: TokenStream, grammar: LlamaGrammar | undefined): Promise<void> {
    const { model } = loaded;
    const sampling = request.sampling_options ?? {};
    const stop = request.stop_conditions ?? {};
    const num = (key: string): number | undefined => (typeof sampling[key] === 'number' ? (sampling[key] as number) : undefined);
    const budget = this.contextSize - request.token_ids.length;
    const maxTokens = Math.min(stop.max_tokens ?? budget, budget);
    const stopIds = new Set(stop.stop_token_ids ?? []);
    const ignoreEos = stop.ignore_eos === true;
    const minTokens = stop.min_tokens ?? 0;
    const eog = [model.tokens.eos, model.tokens.eot].filter((t): t is Token => t !== null);
    // Before min_tokens (or always, with ignore_eos) the end-of-generation tokens cannot be drawn.
    const noEog = new TokenBias(model.tokenizer);
    // TokenBias.set() skips end-of-generation tokens on purpose; node-llama-cpp (pinned) reads the
    // biases from this map, so banning them goes there directly.
    for (const token of eog) (noEog as unknown as { _biases: Map<Token, number> })._biases.set(token, Number.NEGATIVE_INFINITY);
    const noBias = new TokenBias(model.tokenizer);
    let count = 0;
    const penalties = [num('repetition_penalty'), num('frequency_penalty'), num('presence_penalty')];
    let finish: FinishReason = 'length';
    try {
      if (context.isStopped()) {
        stream.end('cancelled');
        return;
      }
      this.#metrics.prompt(request.token_ids.length);
      const topCount = logprobsWanted(request);
      const options = {
        ...samplerOptions(num, ignoreEos || minTokens > 0),
        ...(penalties.some((p) => p !== undefined) && {
          repeatPenalty: {
            punishTokens: () => sequence.contextTokens.slice(request.token_ids.length),
            ...(penalties[0] !== undefined && { penalty: penalties[0] }),
            ...(penalties[1] !== undefined && { frequencyPenalty: penalties[1] }),
            ...(penalties[2] !== undefined && { presencePenalty: penalties[2] }),
          },
        }),
        tokenBias: () => (ignoreEos || count < minTokens ? noEog : noBias),
        ...(grammar && { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) }),
        yieldEogToken: true,
      };
      // With log probabilities asked for, every step also returns the distribution it drew from.
      const steps: AsyncIterable<{ token: Token; probabilities?: Map<Token, number> }> =
        topCount === undefined
          ? (async function* () {
              for await (const token of sequence.evaluate(request.token_ids as Token[], options)) yield { token };
            })()
          : sequence.evaluateWithMetadata(request.token_ids as Token[], { probabilities: true }, options);
      for await (const { token, probabilities } of steps) {
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
        if (count >= maxTokens) break;
      }
      stream.end(finish);
    } catch (err) {
      stream.fail(err);
    }
  }

  /** Requests waiting for a sequence, and sequences generating, over the base model and its adapters. */
  load(): { queued: number; active: number } {
    const lanes = [this.#loaded?.base, ...this.#adapters.values()].filter((lane) => lane !== undefined);
    return { queued: lanes.reduce((sum, lane) => sum + lane.pool.queued, 0), active: lanes.reduce((sum, lane) => sum + lane.pool.active(lane.size), 0) };
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
    const adapters = [...this.#adapters.values()];
    this.#loading = undefined;
    this.#loaded = undefined;
    this.#adapters.clear();
    if (!loading) return;
    const loaded = await loading.catch(() => undefined);
    if (!loaded) return;
    for (const adapter of adapters) await adapter.context.dispose();
    await loaded.base?.context.dispose();
    await loaded.embedder?.dispose();
    await loaded.model.dispose();
    await loaded.llama.dispose();
  }
}

/**
 * node-llama-cpp's sampler settings for a request's `sampling_options`, with OpenAI's defaults
 * where the request is silent (temperature 1, top_p 1, no top_k or min_p; node-llama-cpp's own are
 * greedy, 0.95 and 40). llama.cpp's greedy path ignores token biases, so a greedy request that
 * must not end early (`ignore_eos`, `min_tokens`) samples with top_k 1 instead: the same argmax,
 * over the biased logits.
 */
function samplerOptions(num: (key: string) => number | undefined, biased: boolean) {
  const temperature = num('temperature') ?? 1;
  const seed = num('seed');
  if (temperature === 0) return biased ? { temperature: 1, topK: 1 } : { temperature: 0 };
  const topK = num('top_k');
  return {
    temperature,
    topP: num('top_p') ?? 1,
    // Dynamo's "no top_k" is -1 (or 0); node-llama-cpp disables it with 0.
    topK: topK !== undefined && topK > 0 ? topK : 0,
    minP: num('min_p') ?? 0,
    ...(seed !== undefined && { seed }),
  };
}

/** How many alternatives per token the request wants log probabilities for (`output_options.logprobs`), if any. */
function logprobsWanted(request: GenerateRequest): number | undefined {
  const wanted = request.output_options?.logprobs;
  return typeof wanted === 'number' && Number.isInteger(wanted) && wanted >= 0 ? wanted : undefined;
}

/** The chosen token's log probability and the `top` most likely tokens', from the step's distribution (sorted, most likely first). */
function tokenLogprobs(model: LlamaModel, token: Token, probabilities: Map<Token, number>, top: number) {
  const best: TopLogprob[] = [];
  for (const [id, probability] of probabilities) {
    if (best.length >= top) break;
    best.push({ rank: best.length + 1, token_id: id, token: model.detokenize([id], true), logprob: Math.log(probability) });
  }
  return { logprob: Math.log(probabilities.get(token) ?? 0), top: best };
}
