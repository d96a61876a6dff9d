import { InvalidArgument, parseOrThrow } from '@dynamo/runtime';

import type { LocalModel, ModelFile } from '../local-model.js';
import type { ModelInput } from '../model-input.js';
import { modelTypeToWire, type ModelTypeFlags } from '../model-type.js';
import { type CheckedFile, type ModelDeploymentCard, ModelDeploymentCardSchema, type RuntimeConfigInput, type WorkerType } from './schema.js';
import { slugify } from './slug.js';

/** What goes into a card besides the model's files. */
export interface CardOptions {
  modelInput: ModelInput;
  modelType: ModelTypeFlags;
  /** Public model name; default {@link LocalModel.source}'s `defaultName`. */
  modelName?: string;
  /** Effective context length; default the model's maximum. Must not exceed it. */
  contextLength?: number;
  /** Tokens per KV block (default 16). */
  kvCacheBlockSize?: number;
  /** How often a frontend may move a request to another worker when this one fails (default 0). */
  migrationLimit?: number;
  /** Anything the worker wants frontends to see, copied as is. */
  userData?: unknown;
  runtimeConfig?: RuntimeConfigInput;
  /** This worker's role in a disaggregated deployment (default `aggregated`). */
  workerType?: WorkerType;
  /** Roles that must be served elsewhere for this one to work, as alternatives of all-of sets (default none). */
  needs?: WorkerType[][];
}

function nonNegativeInt(name: string, value: number, min = 0): number {
  if (!Number.isInteger(value) || value < min || value > 0xffff_ffff)
    throw new InvalidArgument(`${name} must be an integer from ${min} to 4294967295, got ${String(value)}`);
  return value;
}

/**
 * The card for a model: files as absolute paths, or as `hf://{repo}/{file}` URLs when the model
 * came from the Hugging Face Hub, so a frontend on another host can fetch them.
 */
export function buildCard(model: LocalModel, options: CardOptions): ModelDeploymentCard {
  const displayName = options.modelName ?? model.source.defaultName;
  if (displayName.trim() === '') throw new InvalidArgument('modelName must not be empty');
  const maxContext = model.architecturalContextLength;
  const contextLength =
    options.contextLength === undefined
      ? (options.runtimeConfig?.context_length ?? maxContext ?? 0)
      : nonNegativeInt('contextLength', options.contextLength, 1);
  if (maxContext !== undefined && contextLength > maxContext) {
    throw new InvalidArgument(`contextLength ${contextLength} is larger than the model's maximum of ${maxContext} tokens`);
  }
  const local = (file: ModelFile): CheckedFile => ({ path: file.path, checksum: file.checksum, size: file.size });
  // A GGUF model's Hugging Face files are written locally, never part of a Hub repo.
  const fromHub = model.source.repoId !== undefined && model.source.kind === 'dir';
  const where = (file: ModelFile): CheckedFile => ({
    path: fromHub ? `hf://${model.source.repoId}/${file.name}` : file.path,
    checksum: file.checksum,
    size: file.size,
  });
  const { files } = model;
  const template = files.customTemplate ?? files.chatTemplateJinja;
  const customTemplate = template !== undefined && template === files.customTemplate;
  // Slots a model lacks are left out, as stock Dynamo writes its cards.
  const card = {
    display_name: displayName,
    slug: slugify(displayName),
    source_path: model.source.repoId ?? model.source.path,
    ...(files.config && { model_info: { hf_config_json: where(files.config) } }),
    ...(files.tokenizer && { tokenizer: { hf_tokenizer_json: where(files.tokenizer) } }),
    ...(files.tokenizerConfig && { prompt_formatter: { hf_tokenizer_config_json: where(files.tokenizerConfig) } }),
    ...(template && { chat_template_file: { hf_chat_template: { is_custom: customTemplate, file: customTemplate ? local(template) : where(template) } } }),
    ...(!template && files.chatTemplateJson && { chat_template_file: { hf_chat_template_json: { is_custom: false, file: where(files.chatTemplateJson) } } }),
    ...(files.generationConfig && { gen_config: { hf_generation_config_json: where(files.generationConfig) } }),
    ...(maxContext !== undefined && { architectural_max_context_length: maxContext }),
    context_length: contextLength,
    kv_cache_block_size: nonNegativeInt('kvCacheBlockSize', options.kvCacheBlockSize ?? 16, 1),
    migration_limit: nonNegativeInt('migrationLimit', options.migrationLimit ?? 0),
    model_type: modelTypeToWire(options.modelType),
    model_input: options.modelInput,
    worker_type: options.workerType ?? 'aggregated',
    needs: options.needs ?? [],
    ...(options.userData !== undefined && { user_data: options.userData }),
    // Stock writes runtime_config.context_length only when one was set.
    runtime_config: { ...options.runtimeConfig, ...(options.contextLength !== undefined && { context_length: contextLength }) },
    media_decoder: null,
    media_fetcher: null,
  };
  return parseOrThrow(ModelDeploymentCardSchema, card, 'card');
}
