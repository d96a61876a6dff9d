import { type ModelDeploymentCard, ModelType, Preprocessor } from '@dynamo/llm';
import { mdcsum, ModelDeploymentCardSchema, N_CHOICES_KEY, type ModelParsers, modelTypeFromWire } from '@dynamo/llm/internal';
import type { Client, DistributedRuntime, EndpointRecord, Log, ModelEvent, ModelRecord } from '@dynamo/runtime';
import { instanceKey, MDC_BUCKET } from '@dynamo/runtime/internal';

import type { ModelRouting } from '../routing/model-routing.js';
import type { CardFiles } from './card-files.js';
import { type ModelInstance, ServedModel } from './served-model.js';

/** What the registry needs from the frontend. */
export interface ModelRegistryOptions {
  runtime: DistributedRuntime;
  /** Serve only models registered in this namespace (all namespaces when omitted). */
  namespace?: string;
  /** Makes the routing of a model from the card its first worker registered. */
  routing: (model: string, card: ModelDeploymentCard) => ModelRouting;
  cardFiles: CardFiles;
  /** Parsers for models whose cards name none (`--dyn-tool-call-parser`, `--dyn-reasoning-parser`). */
  defaultParsers?: ModelParsers;
  log: Log;
}

const SERVABLE = ModelType.Chat | ModelType.Completions | ModelType.Embedding;
/** The longest {@link ModelRegistry.start} waits for the records present at start. */
const INITIAL_SYNC_MS = 5_000;

/** A LoRA adapter's record, and the view it serves through while its instance also has a base card. */
interface AdapterRecord {
  name: string;
  /** Its card's `mdcsum`: the same record written again changes nothing. */
  checksum: string;
  /** The key of the base card of the same endpoint instance. */
  baseKey: string;
  instance: ModelInstance;
  client: Client;
  view: ServedModel | undefined;
}

/**
 * The models the frontend serves, kept in step with discovery: a model appears with the first
 * worker that registers its card and disappears with the last one. Cards the frontend cannot
 * serve (encode workers, Tensor input, a card differing from the one already served under the
 * same name) are logged once and left out.
 *
 * Prefill workers (`worker_type` prefill, or a card with only the legacy Prefill model type) are
 * not served as models: they join the prefill workers of their model in their namespace, which
 * the model's decode workers (`worker_type` decode) send each request to first, as stock 1.6.1 pairs
 * them (by model name and namespace).
 *
 * A LoRA adapter's card (`lora` in the card, its key suffixed) is served, as stock 1.6.1 serves
 * it, as a view of the model whose base card the same endpoint instance registered: it is
 * served only while that base card is there, and only by the instances that registered it.
 */
export class ModelRegistry {
  readonly #options: ModelRegistryOptions;
  readonly #models = new Map<string, ServedModel>();
  readonly #byKey = new Map<string, ServedModel>();
  readonly #adapters = new Map<string, AdapterRecord>();
  /** Prefill workers by `namespace/model`: not served themselves, they take the prefill of the model's decode workers. */
  readonly #prefill = new Map<string, ServedModel>();
  readonly #prefillByKey = new Map<string, ServedModel>();
  readonly #clients = new Map<string, Promise<Client>>();
  readonly #connected = new Set<Client>();
  readonly #closing = new AbortController();
  readonly #refused = new Set<string>();
  #watching: Promise<void> | undefined;
  #watchError: Error | undefined;

  constructor(options: ModelRegistryOptions) {
    this.#options = options;
  }

  /**
   * Follows discovery until {@link close}. Resolves once the records present now are applied (or
   * after {@link INITIAL_SYNC_MS}, should one vanish before the watch replays it).
   */
  async start(): Promise<void> {
    const { runtime, namespace } = this.#options;
    const existing = await runtime.discovery.store.list(MDC_BUCKET, namespace === undefined ? '' : `${namespace}/`);
    const waiting = new Set(existing.map((e) => e.key));
    let synced!: () => void;
    const initial = new Promise<void>((resolve) => (synced = resolve));
    if (waiting.size === 0) synced();
    this.#watching = this.#follow(runtime.discovery.watchModels(this.#closing.signal, namespace), (key) => {
      if (waiting.delete(key) && waiting.size === 0) synced();
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([initial, new Promise<void>((resolve) => (timer = setTimeout(resolve, INITIAL_SYNC_MS)))]);
    clearTimeout(timer);
  }

  async #follow(events: AsyncIterable<ModelEvent>, applied: (key: string) => void): Promise<void> {
    try {
      for await (const event of events) {
        await this.#apply(event);
        applied(event.key);
      }
    } catch (err) {
      if (this.#closing.signal.aborted) return;
      this.#watchError = err as Error;
      this.#options.log.error({ err: (err as Error).message }, 'model discovery watch failed; the model list is frozen');
    }
  }

  /** The model served as `name`. */
  get(name: string): ServedModel | undefined {
    return this.#models.get(name);
  }

  /** Every model, ready or not, but those whose decode workers still wait for a prefill worker. */
  all(): ServedModel[] {
    return [...this.#models.values()].filter((model) => this.#paired(model));
  }

  /**
   * Whether a model's workers have what they need: decode workers that need a prefill worker are
   * not listed until one registers (their requests are answered 503), as stock 1.6.1 leaves them.
   */
  #paired(model: ServedModel): boolean {
    const base = model.base ?? model;
    return !base.needsPrefill || this.#prefillOf(base) !== undefined;
  }

  /** The live endpoint instances behind the served models, as discovery lists them. */
  instanceRecords(): EndpointRecord[] {
    return [...this.#connected].flatMap((client) => client.records());
  }

  /** Why discovery stopped being followed, if it did. */
  get watchError(): Error | undefined {
    return this.#watchError;
  }

  /** Stops following discovery and closes the clients. */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.#watching;
    // Adapter views share their base model's routing.
    await Promise.all([...this.#models.values(), ...this.#prefill.values()].flatMap((m) => (m.base ? [] : [m.routing.close()])));
    for (const client of this.#clients.values()) (await client.catch(() => undefined))?.close();
  }

  async #apply(event: ModelEvent): Promise<void> {
    try {
      if (event.type === 'removed') this.#remove(event.key);
      else await this.#add(event.key, event.record);
    } catch (err) {
      this.#options.log.warn({ key: event.key, err: (err as Error).message }, 'could not apply a model record');
    }
  }

  #remove(key: string): void {
    const prefill = this.#prefillByKey.get(key);
    if (prefill) {
      this.#prefillByKey.delete(key);
      const poolKey = [...this.#prefill].find(([, pool]) => pool === prefill)?.[0];
      if (!prefill.removeRecord(key) && poolKey !== undefined) {
        this.#prefill.delete(poolKey);
        void prefill.routing.close();
        this.#options.log.info({ model: prefill.name, prefill: poolKey }, 'prefill workers removed: the last one is gone; its decode workers serve alone');
      }
      return;
    }
    const adapter = this.#adapters.get(key);
    if (adapter) {
      this.#adapters.delete(key);
      this.#detach(key, adapter);
      return;
    }
    const model = this.#byKey.get(key);
    if (!model) return;
    this.#byKey.delete(key);
    // The instance's adapters wait for its base card to come back.
    for (const [adapterKey, a] of this.#adapters) if (a.baseKey === key) this.#detach(adapterKey, a);
    if (!model.removeRecord(key) && this.#models.get(model.name) === model) {
      this.#models.delete(model.name);
      void model.routing.close();
      this.#options.log.info({ model: model.name }, 'model removed: its last worker is gone');
    }
  }

  /** Logs why a card is not served, once per key and reason. */
  #refuse(key: string, reason: string, fields: Record<string, unknown> = {}, level: 'warn' | 'error' = 'warn'): void {
    const id = `${key}\0${reason}`;
    if (this.#refused.has(id)) return;
    this.#refused.add(id);
    this.#options.log[level]({ key, ...fields }, reason);
  }

  async #add(key: string, record: ModelRecord): Promise<void> {
    const parsed = ModelDeploymentCardSchema.safeParse(record.card_json);
    if (!parsed.success) {
      return this.#refuse(key, 'model card not served: it is malformed', {
        err: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      });
    }
    const card = parsed.data;
    // Stock refuses a record whose key and card disagree on being an adapter's.
    if ((record.model_suffix !== undefined) !== (card.lora != null)) {
      return this.#refuse(
        key,
        'LoRA discovery identity and card metadata disagree',
        { model_suffix: record.model_suffix ?? null, lora: card.lora?.name ?? null },
        'error',
      );
    }
    const types = modelTypeFromWire(card.model_type);
    const legacyPrefill = (record.card_json as { worker_type?: unknown }).worker_type == null && (types & ModelType.Prefill) !== 0;
    if (card.worker_type === 'prefill' || legacyPrefill) return this.#addPrefill(key, record, card, types | ModelType.Prefill);
    if ((types & SERVABLE) === 0)
      return this.#refuse(key, `model ${card.display_name} not served: model_type '${card.model_type}' has no chat, completions or embeddings`);
    if (card.worker_type === 'encode')
      return this.#refuse(key, `model ${card.display_name} not served: encode workers (multimodal encoders) are not supported by this frontend`);
    if (card.model_input === 'Tensor') return this.#refuse(key, `model ${card.display_name} not served: Tensor input is not supported`);
    const checksum = mdcsum(card);
    const generatesChoices = card.runtime_config.runtime_data?.[N_CHOICES_KEY] === true;
    const instance: ModelInstance = {
      instanceId: record.instance_id,
      endpoint: `${record.namespace}/${record.component}/${record.endpoint}`,
      generatesChoices,
      types,
    };
    if (card.lora) {
      if (this.#adapters.get(key)?.checksum === checksum) return;
      this.#remove(key);
      const client = await this.#client(record.namespace, record.component, record.endpoint);
      const baseKey = instanceKey(record.namespace, record.component, record.endpoint, record.instance_id);
      const adapter: AdapterRecord = { name: card.lora.name, checksum, baseKey, instance, client, view: undefined };
      this.#adapters.set(key, adapter);
      this.#attach(key, adapter);
      return;
    }
    if (this.#adapters.has(key)) this.#remove(key);
    const previous = this.#byKey.get(key);
    if (previous) {
      if (previous.checksum === checksum && previous.name === card.display_name) return;
      this.#remove(key);
    }
    let model = this.#models.get(card.display_name);
    if (model?.base) return this.#refuse(key, `model ${card.display_name} not served: a LoRA adapter of model ${model.base.name} is served under that name`);
    if (model && model.checksum !== checksum) {
      return this.#refuse(key, `instance not served: its card for model ${card.display_name} differs from the one being served`, {
        served_mdcsum: model.checksum,
        mdcsum: checksum,
      });
    }
    const client = await this.#client(record.namespace, record.component, record.endpoint);
    if (!model) {
      model = new ServedModel(card, checksum, this.#options.routing(card.display_name, card), this.#options.defaultParsers);
      for (const problem of model.parserProblems)
        this.#options.log.warn({ model: card.display_name, err: problem }, 'its output is served without this parser');
      if (card.model_input === 'Tokens') {
        const log = this.#options.log;
        const loading = this.#options.cardFiles.load(card).then((files) => Preprocessor.create(files, card));
        loading.then(
          () => log.info({ model: card.display_name }, 'model ready'),
          (err: unknown) =>
            log.error({ model: card.display_name, err: (err as Error).message }, 'model files could not be loaded; requests for it fail with 503'),
        );
        model.setPreprocessor(loading);
      }
      this.#models.set(card.display_name, model);
      const served = model;
      if (served.disaggregated) served.prefillWorkers = () => this.#prefillOf(served);
      this.#options.log.info({ model: card.display_name, input: card.model_input, model_type: card.model_type }, 'model added');
    }
    model.addRecord(key, instance, client);
    this.#byKey.set(key, model);
    for (const [adapterKey, adapter] of this.#adapters) if (adapter.baseKey === key) this.#attach(adapterKey, adapter);
  }

  /** A prefill worker's card: it joins its model's prefill workers in its namespace. */
  async #addPrefill(key: string, record: ModelRecord, card: ModelDeploymentCard, types: number): Promise<void> {
    if (this.#prefillByKey.has(key)) return;
    const poolKey = `${record.namespace}/${card.display_name}`;
    const client = await this.#client(record.namespace, record.component, record.endpoint);
    let pool = this.#prefill.get(poolKey);
    if (!pool) {
      pool = new ServedModel(card, mdcsum(card), this.#options.routing(card.display_name, card));
      this.#prefill.set(poolKey, pool);
      this.#options.log.info(
        { model: card.display_name, namespace: record.namespace },
        'prefill workers added: decode workers of the model send requests to them first',
      );
    }
    pool.addRecord(
      key,
      { instanceId: record.instance_id, endpoint: `${record.namespace}/${record.component}/${record.endpoint}`, generatesChoices: false, types },
      client,
    );
    this.#prefillByKey.set(key, pool);
  }

  /** The prefill workers of a decode model: those of its name in the first of its namespaces that has some. */
  #prefillOf(model: ServedModel): ServedModel | undefined {
    for (const instance of model.instances()) {
      const pool = this.#prefill.get(`${instance.endpoint.split('/')[0]}/${model.name}`);
      if (pool) return pool;
    }
    return undefined;
  }

  /** Serves an adapter on its instance, if the instance's base card is served. */
  #attach(key: string, adapter: AdapterRecord): void {
    const base = this.#byKey.get(adapter.baseKey);
    if (!base) {
      this.#options.log.debug({ key, lora: adapter.name }, 'LoRA adapter waits for the base card of its instance');
      return;
    }
    let view = this.#models.get(adapter.name);
    if (view && view.base !== base) {
      const owner = view.base ? `a LoRA adapter of model ${view.base.name}` : 'a model';
      this.#refuse(key, `LoRA adapter ${adapter.name} of model ${base.name} not served: ${owner} is served under that name`);
      return;
    }
    if (!view) {
      view = base.adapterView(adapter.name);
      this.#models.set(adapter.name, view);
      this.#options.log.info({ model: adapter.name, base: base.name }, 'LoRA adapter added');
    }
    view.addRecord(key, adapter.instance, adapter.client);
    adapter.view = view;
  }

  /** Takes an adapter's instance out of its view; the view goes with its last instance. */
  #detach(key: string, adapter: AdapterRecord): void {
    const view = adapter.view;
    if (!view) return;
    adapter.view = undefined;
    if (!view.removeRecord(key) && this.#models.get(view.name) === view) {
      this.#models.delete(view.name);
      this.#options.log.info({ model: view.name }, 'LoRA adapter removed: no instance serves it');
    }
  }

  #client(namespace: string, component: string, endpoint: string): Promise<Client> {
    const id = `${namespace}/${component}/${endpoint}`;
    let client = this.#clients.get(id);
    if (!client) {
      client = this.#options.runtime.namespace(namespace).component(component).endpoint(endpoint).client();
      this.#clients.set(id, client);
      client.then(
        (c) => this.#connected.add(c),
        () => this.#clients.delete(id),
      );
    }
    return client;
  }
}
