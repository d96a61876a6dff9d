import { engineLog, type GenerateRequest, InvalidArgument } from '@dynamo/backend';
import type { LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp';

import { adapterFile, checkAdapter } from './lora.js';
import { freeLoraWeights, gateSampling } from './internals.js';
import { SequenceSlots, type SlotsOptions } from './sequence-slots.js';

const log = engineLog('llama-cpp');

/** A llama.cpp context and the requests on its sequences: the base model's, or one LoRA adapter's. */
export interface Lane {
  context: LlamaContext;
  slots: SequenceSlots<LlamaContextSequence>;
  /** Requests on it, from when they picked it until their last token. */
  users: number;
  /** Set by unload() while requests are still on it: called when the last one leaves. */
  drained?: () => void;
}

/** How a lane's context is made. */
export interface LaneOptions {
  sequences: number;
  threads: number;
  /** Tokens of KV cache per sequence. */
  contextSize: number;
  /** How its sequences are shared (the adapter's name is added for an adapter's lane). */
  slots: Omit<SlotsOptions, 'loraName'>;
}

/** A context of `options.sequences` sequences, with the LoRA adapter `lora` (its name and file) applied when given. */
export async function openLane(model: LlamaModel, options: LaneOptions, lora?: { name: string; file: string }): Promise<Lane> {
  // contextSize is per sequence (llama.cpp allocates it once for each).
  const context = await model.createContext({
    sequences: options.sequences,
    threads: options.threads,
    contextSize: options.contextSize,
    ...(lora !== undefined && { lora: { adapters: [{ filePath: lora.file }] } }),
  });
  gateSampling(context);
  const sequences = Array.from({ length: options.sequences }, () => context.getSequence());
  return { context, slots: new SequenceSlots(sequences, { ...options.slots, ...(lora !== undefined && { loraName: lora.name }) }), users: 0 };
}

/** A loaded LoRA adapter: its lane, and the file it came from. */
interface Adapter extends Lane {
  file: string;
  /** Set when unload() is called: it takes no more requests. */
  unloading?: boolean;
}

/**
 * The LoRA adapters loaded on a model, each with a lane of its own; loads and unloads run one after
 * another, and an unload waits for the requests already on the adapter.
 */
export class LoraLanes {
  readonly #model: LlamaModel;
  readonly #options: LaneOptions;
  /** The base model's names, which no adapter may take. */
  readonly #reserved: readonly string[];
  readonly #adapters = new Map<string, Adapter>();
  #changes: Promise<unknown> = Promise.resolve();

  constructor(model: LlamaModel, options: LaneOptions, reserved: readonly string[]) {
    this.#model = model;
    this.#options = options;
    this.#reserved = reserved;
  }

  /** Every adapter's lane. */
  lanes(): Lane[] {
    return [...this.#adapters.values()];
  }

  /**
   * Where a request runs: on the adapter its `routing.lora_name` (stock Dynamo's routing hint,
   * which frontends set for every adapter request) names, which must be loaded; else on the
   * adapter its `model` names, if one of that name is loaded or being unloaded; else on `base`,
   * whatever `model` says (a library caller may name the model differently).
   */
  laneFor(base: Lane, request: GenerateRequest): Lane {
    const hint = request.routing?.lora_name;
    const explicit = typeof hint === 'string' && hint !== '';
    const name = explicit ? hint : request.model;
    if (name === undefined || name === '' || (!explicit && !this.#adapters.has(name))) return base;
    const adapter = this.#adapters.get(name);
    if (!adapter || adapter.unloading) throw new InvalidArgument(`unknown model or LoRA adapter: '${name}'`);
    return adapter;
  }

  /** See `LlamaCppEngine.loadLora`. */
  load(name: string, uri: string): Promise<void> {
    return this.#change(async () => {
      if (this.#reserved.includes(name)) throw new InvalidArgument(`LoRA adapter name '${name}' is the base model's; pick another`);
      const file = await adapterFile(uri);
      const loadedAs = this.#adapters.get(name);
      if (loadedAs?.file === file) return;
      if (loadedAs) throw new InvalidArgument(`LoRA adapter '${name}' is already loaded from ${loadedAs.file}; unload it before loading ${file}`);
      await checkAdapter(file, this.#model.fileInfo);
      let lane: Lane;
      try {
        lane = await openLane(this.#model, this.#options, { name, file });
      } catch (err) {
        throw new InvalidArgument(`LoRA adapter ${file}: llama.cpp could not load it (${(err as Error).message})`, { cause: err });
      }
      this.#adapters.set(name, { ...lane, file });
      log.info({ lora: name, file, sequences: this.#options.sequences }, 'LoRA adapter loaded');
    });
  }

  /** See `LlamaCppEngine.unloadLora`. */
  async unload(name: string): Promise<void> {
    // Refused from the call on, also while an earlier load or unload still runs.
    const now = this.#adapters.get(name);
    if (now) now.unloading = true;
    await this.#change(async () => {
      // Looked up again: a load queued before this call may have added it since.
      const adapter = this.#adapters.get(name);
      const model = this.#model;
      if (!adapter) return;
      adapter.unloading = true;
      if (adapter.users > 0) {
        log.info({ lora: name, requests: adapter.users }, 'LoRA adapter unloading after its requests finish');
        await new Promise<void>((resolve) => {
          adapter.drained = resolve;
        });
      }
      // Its blocks leave the routers' view before the context goes.
      await adapter.slots.clearFree();
      await adapter.context.dispose();
      this.#adapters.delete(name);
      if (!model.disposed && ![...this.#adapters.values()].some((other) => other.file === adapter.file)) {
        // adapterFile() resolved the path, as node-llama-cpp keys its cache.
        await freeLoraWeights(model, adapter.file);
      }
      log.info({ lora: name, file: adapter.file }, 'LoRA adapter unloaded');
    });
  }

  /** Disposes every adapter's context (the engine's cleanup). */
  async dispose(): Promise<void> {
    const adapters = [...this.#adapters.values()];
    this.#adapters.clear();
    for (const adapter of adapters) await adapter.context.dispose();
  }

  /** Runs `change` after the loads and unloads called before it have finished. */
  #change(change: () => Promise<void>): Promise<void> {
    const next = this.#changes.then(change);
    this.#changes = next.catch(() => {});
    return next;
  }
}
