import { type ModelDeploymentCard, ModelType, type Preprocessor } from '@dynamo/llm';
import { type ModelParsers, modelParsers } from '@dynamo/llm/internal';
import type { Client } from '@dynamo/runtime';

import type { ModelRouting } from '../routing/model-routing.js';
import type { Candidate } from '../routing/router.js';

/** The OpenAI surfaces a request can come through. */
export type Surface = 'chat' | 'completions' | 'embeddings';
/** The surfaces that generate text. */
export type GenerationSurface = Exclude<Surface, 'embeddings'>;

/** What an instance serves: an OpenAI surface, or the prefill of a disaggregated model. */
export type Role = Surface | 'prefill';

const SURFACE_TYPE: Record<Role, number> = {
  chat: ModelType.Chat,
  completions: ModelType.Completions,
  embeddings: ModelType.Embedding,
  prefill: ModelType.Prefill,
};

/** One instance's model record: which endpoint of which instance serves the model. */
export interface ModelInstance {
  instanceId: bigint;
  /** `ns/comp/ep` of the endpoint. */
  endpoint: string;
  /** Whether its worker makes a request's `n` choices itself (see {@link generatesChoices}). */
  generatesChoices: boolean;
  /** The model types (`ModelType` flags) its card registered: a model's chat and embedding workers may differ. */
  types: number;
}

/**
 * A model as the frontend serves it: the card its first worker registered, the instances that
 * registered the same card, the clients that reach them, its routing, and (Tokens input) its
 * preprocessor once its files are loaded.
 *
 * A LoRA adapter is served as a view of its base model ({@link adapterView}): the base's card,
 * pipeline and routing, over only the base's instances that have the adapter loaded.
 */
export class ServedModel {
  readonly name: string;
  /** The LoRA adapter requests for this name are for (`routing.lora_name`); undefined for a base model. */
  readonly loraName: string | undefined;
  readonly card: ModelDeploymentCard;
  /** The card's `mdcsum`: a worker registering a different card under this name is refused. */
  readonly checksum: string;
  /** How its requests are placed (an adapter view shares its base's). */
  readonly routing: ModelRouting;
  /** The tool-call and reasoning parsers applied to its chat output. */
  readonly parsers: ModelParsers;
  /** Why a parser its card names is not applied (this frontend does not have it). */
  readonly parserProblems: string[];
  /** Model records (discovery keys) → instance. */
  readonly #records = new Map<string, ModelInstance>();
  /** Endpoint → its client and the instances on it that serve this model. */
  readonly #endpoints = new Map<string, { client: Client; instances: Set<bigint> }>();
  /** The base model of an adapter view: its pipeline is the base's, and its routing is the base's to keep. */
  readonly #base: ServedModel | undefined;
  #preprocessor: Promise<Preprocessor> | undefined;
  #loadError: Error | undefined;
  #loaded: boolean;
  /**
   * A disaggregated model's prefill workers (in the namespace of its decode workers), once any
   * registered: the registry keeps them.
   */
  prefillWorkers: (() => ServedModel | undefined) | undefined;

  constructor(
    card: ModelDeploymentCard,
    checksum: string,
    routing: ModelRouting,
    defaultParsers: ModelParsers = {},
    adapter?: { base: ServedModel; name: string },
  ) {
    this.name = adapter?.name ?? card.display_name;
    this.loraName = adapter?.name;
    this.#base = adapter?.base;
    if (adapter) ({ parsers: this.parsers, parserProblems: this.parserProblems } = adapter.base);
    else {
      const named = { toolCallParser: card.runtime_config.tool_call_parser, reasoningParser: card.runtime_config.reasoning_parser };
      ({ parsers: this.parsers, problems: this.parserProblems } = modelParsers(named, defaultParsers));
    }
    this.card = card;
    this.checksum = checksum;
    this.routing = routing;
    this.#loaded = card.model_input !== 'Tokens';
  }

  /**
   * The view of this (base) model that serves its LoRA adapter `name`, as stock 1.6.1 serves
   * one: the base's card, tokenizer, template, parsers and routing; instances join it through
   * {@link addRecord} with their adapter records.
   */
  adapterView(name: string): ServedModel {
    return new ServedModel(this.card, this.checksum, this.routing, {}, { base: this, name });
  }

  /** The base model this adapter view serves through, or undefined for a base model. */
  get base(): ServedModel | undefined {
    return this.#base;
  }

  /** Whether requests can be served now (a Tokens-input model's files are loaded). */
  get ready(): boolean {
    return this.#base ? this.#base.ready : this.#loaded;
  }

  /** Whether the model takes Tokens (the frontend preprocesses) or Text (raw OpenAI bodies). */
  get input(): 'Tokens' | 'Text' {
    return this.card.model_input === 'Tokens' ? 'Tokens' : 'Text';
  }

  /** Whether its workers are decode workers: requests go to a prefill worker first. */
  get disaggregated(): boolean {
    return (this.#base?.card ?? this.card).worker_type === 'decode';
  }

  /** Whether its decode workers need a prefill worker to serve (every clause of their card's `needs` names one). */
  get needsPrefill(): boolean {
    const { needs } = this.card;
    return this.disaggregated && needs.length > 0 && needs.every((clause) => clause.includes('prefill'));
  }

  /** Whether an instance of the model serves `surface`. */
  serves(surface: Surface): boolean {
    for (const instance of this.#records.values()) if ((instance.types & SURFACE_TYPE[surface]) !== 0) return true;
    return false;
  }

  /** The ids of the instances whose cards serve `surface`. */
  #servingIds(surface: Role): Set<bigint> {
    const ids = new Set<bigint>();
    for (const instance of this.#records.values()) if ((instance.types & SURFACE_TYPE[surface]) !== 0) ids.add(instance.instanceId);
    return ids;
  }

  /** The migration limit its card asks for. */
  get cardMigrationLimit(): number {
    return this.card.migration_limit;
  }

  /** Starts loading the preprocessor; requests await it. A failed load is kept and reported. */
  setPreprocessor(loading: Promise<Preprocessor>): void {
    this.#preprocessor = loading;
    loading.then(
      () => (this.#loaded = true),
      (err: unknown) => (this.#loadError = err as Error),
    );
  }

  /** The preprocessor (Tokens input); rejects with the load's error. */
  preprocessor(): Promise<Preprocessor> {
    if (this.#base) return this.#base.preprocessor();
    if (!this.#preprocessor) return Promise.reject(new Error(`model ${this.name} takes Text input; it has no preprocessor`));
    return this.#preprocessor;
  }

  /** Why the model's files could not be loaded, if they could not. */
  get loadError(): Error | undefined {
    return this.#base ? this.#base.loadError : this.#loadError;
  }

  /** Adds an instance's record of this model. */
  addRecord(key: string, instance: ModelInstance, client: Client): void {
    this.#records.set(key, instance);
    let endpoint = this.#endpoints.get(instance.endpoint);
    if (!endpoint) {
      endpoint = { client, instances: new Set() };
      this.#endpoints.set(instance.endpoint, endpoint);
      // An adapter's instances are its base's: the base keeps the routing's bookkeeping.
      const [namespace = '', component = '', name = ''] = instance.endpoint.split('/');
      if (!this.#base) this.routing.addEndpoint({ namespace, component, endpoint: name });
    }
    endpoint.instances.add(instance.instanceId);
    if (!this.#base) this.routing.addInstance(instance.instanceId);
  }

  /** Removes a record; returns whether the model has records left. */
  removeRecord(key: string): boolean {
    const instance = this.#records.get(key);
    if (instance) {
      this.#records.delete(key);
      const stillThere = [...this.#records.values()].some((i) => i.endpoint === instance.endpoint && i.instanceId === instance.instanceId);
      const endpoint = this.#endpoints.get(instance.endpoint);
      if (endpoint && !stillThere) {
        endpoint.instances.delete(instance.instanceId);
        if (!this.#base) this.routing.removeInstance(instance.instanceId);
        if (endpoint.instances.size === 0) this.#endpoints.delete(instance.endpoint);
      }
    }
    return this.#records.size > 0;
  }

  /** Whether `key` is one of this model's records. */
  hasRecord(key: string): boolean {
    return this.#records.has(key);
  }

  /**
   * Whether every instance's worker makes a request's `n` choices itself; when one does not,
   * the frontend asks for each choice separately.
   */
  get generatesChoices(): boolean {
    for (const instance of this.#records.values()) if (!instance.generatesChoices) return false;
    return true;
  }

  /** The instances that registered this model for `surface` and whose endpoints are live and reachable now. */
  candidates(surface: Role): Candidate[] {
    const serving = this.#servingIds(surface);
    const out: Candidate[] = [];
    for (const { client, instances } of this.#endpoints.values()) {
      for (const instanceId of client.availableIds()) if (instances.has(instanceId) && serving.has(instanceId)) out.push({ instanceId, client });
    }
    return out;
  }

  /** The instance `instanceId` if it serves this model for `surface` and its endpoint is live. */
  candidate(instanceId: bigint, surface: Surface): Candidate | undefined {
    if (!this.#servingIds(surface).has(instanceId)) return undefined;
    for (const { client, instances } of this.#endpoints.values()) {
      if (instances.has(instanceId) && client.instanceIds().includes(instanceId)) return { instanceId, client };
    }
    return undefined;
  }

  /**
   * Whether the model can serve now, per namespace, as stock's `/v1/models/{id}/ready` reports it:
   * a namespace is ready when a live (aggregated) worker of the model is in it.
   */
  readiness(): { ready: boolean; namespaces: Record<string, { ready: boolean; workers: number }> } {
    const namespaces: Record<string, { ready: boolean; workers: number }> = {};
    const live = new Set<bigint>();
    for (const { client, instances } of this.#endpoints.values()) for (const id of client.instanceIds()) if (instances.has(id)) live.add(id);
    for (const instance of this.#records.values()) {
      const namespace = instance.endpoint.split('/')[0] ?? '';
      const entry = (namespaces[namespace] ??= { ready: false, workers: 0 });
      if (live.has(instance.instanceId)) {
        entry.workers += 1;
        entry.ready = this.ready;
      }
    }
    return { ready: Object.values(namespaces).some((n) => n.ready), namespaces };
  }

  /** Every instance with a record of this model (live or not). */
  instances(): ModelInstance[] {
    return [...this.#records.values()];
  }
}
