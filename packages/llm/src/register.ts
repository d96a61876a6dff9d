import { type Endpoint, InvalidArgument } from '@dynamo/runtime';

import { buildCard, type CardOptions } from './card/build.js';
import { slugify } from './card/slug.js';
import type { ModelDeploymentCard } from './card/schema.js';
import { type LoadModelOptions, LocalModel } from './local-model.js';
import { ModelInput } from './model-input.js';
import { normalizeModelType, type ModelTypeFlags } from './model-type.js';

/** Options of {@link registerLlm}. */
export interface RegisterLlmOptions extends Omit<CardOptions, 'modelInput' | 'modelType'>, Omit<LoadModelOptions, 'customTemplatePath'> {
  /** A Jinja file that replaces the model's chat template. */
  customTemplatePath?: string;
  /**
   * Build the tokenizer once before registering, so a broken one fails here naming its file
   * (default true). A worker that never tokenizes itself may skip it: the load costs ~0.5 s and
   * ~100 MB for a 150k-token vocabulary.
   */
  checkTokenizer?: boolean;
  /**
   * Registers a LoRA adapter of the model instead of the model itself: its card is the base
   * model's files under the adapter's name, with `lora: { name, max_gpu_lora_count? }`, published
   * beside the base card (key suffix: the name's slug), as stock Dynamo 1.6.1's workers do. A
   * frontend serves requests for `name` on this worker.
   */
  lora?: { name: string; maxGpuLoraCount?: number };
}

/** A registered model: its card, and how to take it back. */
export interface RegisteredModel {
  card: ModelDeploymentCard;
  model: LocalModel;
  /** Removes the card from discovery (idempotent). */
  unregister(): Promise<void>;
}

/** Per endpoint, its cards by key suffix ('' for the base model, the slug of each LoRA adapter). */
const registrations = new WeakMap<Endpoint, Map<string, RegisteredModel>>();

/**
 * Registers a model for `endpoint`: reads the model at `modelPath` (a directory, a `.gguf` file,
 * or a Hugging Face repo id fetched into the local cache), builds its model deployment card and
 * publishes it under `v1/mdc/{ns}/{comp}/{ep}/{instance}` through the runtime's discovery. A
 * Dynamo frontend then serves the model. The card goes away when the endpoint stops, the
 * runtime shuts down, or {@link unregisterLlm} is called.
 *
 * `registerLlm(ModelType.Backend, endpoint, modelPath)`, the first releases' form, means Tokens
 * input with chat and completions.
 */
export async function registerLlm(
  modelInput: ModelInput,
  modelType: ModelTypeFlags,
  endpoint: Endpoint,
  modelPath: string,
  options?: RegisterLlmOptions,
): Promise<RegisteredModel>;
export async function registerLlm(modelType: ModelTypeFlags, endpoint: Endpoint, modelPath: string, options?: RegisterLlmOptions): Promise<RegisteredModel>;
export async function registerLlm(...args: unknown[]): Promise<RegisteredModel> {
  const legacy = typeof args[0] === 'number';
  const [modelInput, modelType, endpoint, modelPath, options = {}] = (legacy ? [ModelInput.Tokens, ...args] : args) as [
    ModelInput,
    ModelTypeFlags,
    Endpoint,
    string,
    RegisterLlmOptions?,
  ];
  if (!Object.values(ModelInput).includes(modelInput))
    throw new InvalidArgument(`modelInput must be one of ${Object.values(ModelInput).join(', ')}, got ${String(modelInput)}`);
  const { flags, legacyBackend } = normalizeModelType(modelType);
  if (legacyBackend && modelInput !== ModelInput.Tokens) throw new InvalidArgument('ModelType.Backend takes Tokens input');
  if (typeof modelPath !== 'string' || modelPath === '') throw new InvalidArgument('modelPath must be a non-empty string');
  if (typeof endpoint?.onStop !== 'function') throw new InvalidArgument('endpoint must be an Endpoint of @dynamo/runtime');

  const model = await LocalModel.load(modelPath, options);
  // A broken tokenizer fails here, naming its file, not later in every frontend.
  if (options.checkTokenizer !== false) await model.tokenizer();
  const lora = options.lora;
  if (lora !== undefined && (typeof lora.name !== 'string' || slugify(lora.name) === ''))
    throw new InvalidArgument(`lora.name must be a non-empty name, got ${JSON.stringify(lora.name)}`);
  const base = buildCard(model, { ...options, modelInput, modelType: flags, ...(lora && { modelName: lora.name }) });
  const card: ModelDeploymentCard = lora
    ? { ...base, lora: { name: lora.name, ...(lora.maxGpuLoraCount !== undefined && { max_gpu_lora_count: lora.maxGpuLoraCount }) } }
    : base;
  const suffix = lora ? slugify(lora.name) : undefined;
  const runtime = endpoint.component.namespace.runtime;
  const { namespace, component, endpoint: name } = endpoint.path;
  const cards = registrations.get(endpoint) ?? new Map<string, RegisteredModel>();
  registrations.set(endpoint, cards);
  await cards.get(suffix ?? '')?.unregister();
  await runtime.discovery.registerModel(namespace, component, name, card, suffix);
  runtime.log('llm.register').info(
    {
      model: card.display_name,
      namespace,
      component,
      endpoint: name,
      model_type: card.model_type,
      model_input: card.model_input,
      ...(lora && { lora: lora.name }),
    },
    lora ? 'registered LoRA adapter' : 'registered model',
  );

  let removed: Promise<void> | undefined;
  const registered: RegisteredModel = {
    card,
    model,
    unregister: () => {
      removed ??= (async () => {
        if (cards.get(suffix ?? '') === registered) cards.delete(suffix ?? '');
        await runtime.discovery.unregisterModel(namespace, component, name, suffix);
      })();
      return removed;
    },
  };
  cards.set(suffix ?? '', registered);
  endpoint.onStop(() => registered.unregister());
  runtime.onShutdown(() => registered.unregister());
  return registered;
}

/**
 * Removes the card {@link registerLlm} published for `endpoint` (the LoRA adapter `loraName`'s,
 * when given); does nothing if there is none.
 */
export async function unregisterLlm(endpoint: Endpoint, loraName?: string): Promise<void> {
  await registrations
    .get(endpoint)
    ?.get(loraName === undefined ? '' : slugify(loraName))
    ?.unregister();
}
