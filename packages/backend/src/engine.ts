import { type Context, InvalidArgument } from '@dynamo/runtime';
import type { GenerateChunk } from './protocol/chunk.js';
import type { EmbedRequest, Embeddings } from './protocol/embedding.js';
import type { EngineConfig } from './protocol/engine-config.js';
import type { KvEventSource } from './protocol/kv-events.js';
import type { ExportedKvState, KvTransfer } from './protocol/kv-transfer.js';
import type { GenerateRequest } from './protocol/request.js';
import type { WorkerConfig } from './protocol/worker-config.js';
import type { SnapshotPublisher } from './worker/snapshot-publisher.js';

/**
 * The contract between an inference engine and Dynamo. Subclass it, implement `start`,
 * `generate` and `cleanup` (and `fromArgs`). The framework that serves it (`run()`) owns signals,
 * registration, serving, cancellation and graceful shutdown; `runConformance` checks the engine's
 * side of the contract.
 *
 * Lifecycle guarantees the framework gives you:
 * - `start` is called once, after the runtime is connected; once it returns, `generate` must
 *   accept concurrent calls.
 * - `cleanup` is called exactly once after `start` was attempted (even if it threw), never if
 *   `start` never ran, and never concurrently with `start`. It must tolerate partial state and a
 *   second call must succeed without tearing down twice.
 *
 * And what you owe it, pinned by `runConformance`:
 * - every `generate` stream ends with exactly one terminal chunk (with `finish_reason`) and
 *   nothing after it; non-terminal chunks have no `finish_reason`;
 * - check `context.isStopped()` between chunks and, when stopped, end with an empty chunk whose
 *   `finish_reason` is `"cancelled"`;
 * - per-request resources are released in the generator's `finally`, not in `abort`;
 * - do not install SIGTERM/SIGINT handlers.
 */
export abstract class LLMEngine {
  /**
   * Builds an engine and its worker configuration from command-line arguments (`argv` defaults to
   * `process.argv.slice(2)`). The engine is constructed but not started. Subclasses override this:
   *
   * ```ts
   * static override async fromArgs(argv = process.argv.slice(2)): Promise<[MyEngine, WorkerConfig]> { ... }
   * ```
   */
  static async fromArgs(_argv?: string[]): Promise<[LLMEngine, WorkerConfig]> {
    throw new InvalidArgument(`${this.name}.fromArgs() is not implemented: override the static fromArgs(argv)`);
  }

  /**
   * Loads the model and returns what to register. `workerId` is this process's discovery instance
   * id (opaque; useful for logs and per-worker resources).
   */
  abstract start(workerId: bigint): Promise<EngineConfig>;

  /** Streams the output for one request; see the class docs for the rules the stream follows. */
  abstract generate(request: GenerateRequest, context: Context): AsyncIterable<GenerateChunk>;

  /**
   * Whether `generate` itself makes all `sampling_options.n` choices of a request, each chunk
   * tagged with its choice's `index`. Default false: the worker calls `generate` once per choice
   * (with `n: 1`, and the seed plus the choice's index when the request has a seed) and tags the
   * chunks for you.
   */
  get generatesChoices(): boolean {
    return false;
  }

  /**
   * Embeds each input of `request.token_ids` (one vector per input, in order), for a worker
   * registered for embeddings (`--endpoint-types embedding`). The worker sends the vectors as
   * base64 float32, as Dynamo's wire carries them. Default: refuses, naming the engine.
   */
  async embed(_request: EmbedRequest, _context: Context): Promise<Embeddings> {
    throw new InvalidArgument(`${this.constructor.name} does not compute embeddings (it does not implement embed())`);
  }

  /**
   * Called only when the caller stopped or killed a request (never when a stream simply ends), to
   * release engine-side work such as a scheduler slot. Default: nothing.
   */
  async abort(_context: Context): Promise<void> {}

  /**
   * Runs once during graceful shutdown, after this worker has left discovery, the router grace
   * period has passed and in-flight requests have finished, while discovery and the request plane
   * are still up: flush state, hand work over, say goodbye to peers. Bounded by the drain timeout
   * (`DYN_PREFILL_DRAIN_TIMEOUT_S`, 30 s by default) and the shutdown budget. Default: nothing.
   */
  async drain(): Promise<void> {}

  /**
   * Polled during shutdown on prefill workers: true once no KV transfer is outstanding, false
   * while some is, null if the engine cannot tell (the default).
   */
  async isQuiescent(): Promise<boolean | null> {
    return null;
  }

  /** Releases everything `start` acquired; see the class docs for when it runs. */
  abstract cleanup(): Promise<void>;

  /**
   * A request body the health canary sends to this engine, or null (the default) to rely on
   * traffic-based health only.
   */
  async healthCheckPayload(): Promise<Record<string, unknown> | null> {
    return null;
  }

  /**
   * The data-parallel ranks whose KV cache state this engine reports (see
   * {@link attachSnapshotPublisher}); the worker then serves `dynamo_component_total_blocks`,
   * `_gpu_cache_usage_percent` and `_kv_cache_hit_rate` labelled `dp_rank`. Called once after
   * `start`. Default: none.
   */
  componentMetricsDpRanks(): number[] {
    return [];
  }

  /**
   * Hands the engine the publisher of its per-rank KV cache snapshots; call
   * `publisher.publish(dpRank, { kvUsedBlocks, kvTotalBlocks, gpuCacheUsage, kvCacheHitRate })`
   * whenever they change. Called once after `start`, only when
   * {@link componentMetricsDpRanks} named ranks and KV routing is enabled. Default: ignores it.
   */
  attachSnapshotPublisher(_publisher: SnapshotPublisher): void {}

  /**
   * The engine controls this engine serves at `/engine/control/<name>` on the worker's system port
   * (`DYN_SYSTEM_PORT`), by stock Dynamo's names where they apply: `sleep` / `wake_up`,
   * `pause_generation` / `resume_generation`, `release_memory_occupation` /
   * `resume_memory_occupation`, `start_profile` / `stop_profile`, or your own. Called once, after
   * the worker starts serving. Default: none.
   */
  supportedControls(): readonly string[] {
    return [];
  }

  /**
   * Runs control `name` (one of {@link supportedControls}) with the request's JSON object `body`,
   * and returns the JSON reply: `{ status: 'ok', message }` on success, `{ status: 'error',
   * message }` to refuse. Controls run one at a time. For `sleep`, `pause_generation` and
   * `release_memory_occupation` the worker has already left discovery; after `wake_up`,
   * `resume_generation` and `resume_memory_occupation` it rejoins unless the reply is an error or
   * says `is_sleeping: true`. A throw answers HTTP 500. Default: refuses every control.
   */
  async engineControl(name: string, _body: Record<string, unknown>): Promise<Record<string, unknown>> {
    return { status: 'error', message: `unsupported engine control: ${name}` };
  }

  /**
   * Loads LoRA adapter `name` from `source.uri`, always a `file://` URI of a local file or folder
   * (the worker downloads an `hf://` source into `DYN_LORA_PATH` first and refuses schemes it
   * cannot fetch), so requests whose `model` is `name` use it. Throw
   * (`InvalidArgument` for a bad source) to refuse. An engine that overrides this gets
   * `/engine/update/load_lora`, `unload_lora` and `list_loras` (and `/v1/loras` with
   * `DYN_LORA_ENABLED`), and the worker registers each loaded adapter as a model. Default: no LoRA.
   */
  async loadLora(name: string, _source: { uri: string }): Promise<void> {
    throw new InvalidArgument(`${this.constructor.name} does not load LoRA adapters (cannot load '${name}')`);
  }

  /** Unloads adapter `name` (one {@link loadLora} loaded; the worker checks). */
  async unloadLora(_name: string): Promise<void> {}

  /**
   * Hands a prefill or decode engine the KV transfer between them (called once after `start`, on
   * `prefill` and `decode` workers only). A prefill engine puts `transfer.handle(id, bytes)` in its
   * terminal chunk's `disaggregated_params.kv_transfer`; a decode engine passes that object from
   * `request.prefill_result.disaggregated_params.kv_transfer` to `transfer.pull()` and loads the
   * bytes. Default: ignores it (an engine whose handoff goes elsewhere, such as NIXL).
   */
  attachKvTransfer(_transfer: KvTransfer): void {}

  /**
   * On a prefill worker: the KV state `id` a decode worker asks for (one this engine named in a
   * `kv_transfer` handle), header first, then its bytes. The worker serves it on the
   * `kv_transfer` endpoint and calls `done` when the transfer ended. Throw (`InvalidArgument`) for
   * an unknown or expired id. Default: no states to give.
   */
  async exportKvState(id: string, _context: Context): Promise<ExportedKvState> {
    throw new InvalidArgument(`${this.constructor.name} does not export KV states (asked for '${id}')`);
  }

  /** Where the router gets this engine's KV cache events from; one source per DP rank. Default: none. */
  async kvEventSources(): Promise<KvEventSource[]> {
    return [];
  }
}

/** Something that makes a fresh, unstarted engine: a function returning one (or a promise of one). */
export type EngineFactory = () => LLMEngine | Promise<LLMEngine>;
