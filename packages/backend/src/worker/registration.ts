import { ModelInput, ModelType, type ModelTypeFlags, type RegisterLlmOptions, type RuntimeConfigInput, type WorkerType } from '@dynamo/llm';
import { N_CHOICES_KEY } from '@dynamo/llm/internal';
import { InvalidArgument } from '@dynamo/runtime';

import type { EngineConfig } from '../protocol/engine-config.js';
import type { WorkerConfig } from '../protocol/worker-config.js';

/** The arguments of `registerLlm` for one worker, derived from its configs as Dynamo's Worker does. */
export interface ModelRegistration {
  modelInput: ModelInput;
  modelType: ModelTypeFlags;
  /** The model's files: `WorkerConfig.modelName` (a path or a Hugging Face repo id). */
  modelPath: string;
  /** The name clients use: `WorkerConfig.servedModelName`, else the engine's, else `EngineConfig.model`. */
  servedName: string;
  options: RegisterLlmOptions;
}

const endpointTypes: Record<string, ModelTypeFlags> = {
  chat: ModelType.Chat,
  completions: ModelType.Completions,
  embedding: ModelType.Embedding,
  embeddings: ModelType.Embedding,
  tensor: ModelType.TensorBased,
  images: ModelType.Images,
  image: ModelType.Images,
  videos: ModelType.Videos,
  video: ModelType.Videos,
  audios: ModelType.Audios,
  audio: ModelType.Audios,
};

/** Parses `--endpoint-types` (`chat,completions`): trimmed, case-insensitive, blanks ignored. */
export function parseEndpointTypes(list: string): ModelTypeFlags {
  const names = list
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  if (names.length === 0) throw new InvalidArgument('endpoint_types cannot be empty');
  return names.reduce((flags, name) => {
    const flag = endpointTypes[name];
    if (flag === undefined) throw new InvalidArgument(`unknown endpoint type '${name}' (expected one of: ${Object.keys(endpointTypes).join(', ')})`);
    return flags | flag;
  }, 0);
}

/** This worker's role and what it needs elsewhere, in disjunctive normal form. */
function topology(config: WorkerConfig): { workerType: WorkerType; needs: WorkerType[][] } {
  switch (config.disaggregationMode) {
    case 'prefill':
      return { workerType: 'prefill', needs: [config.routeToEncoder ? ['decode', 'encode'] : ['decode']] };
    case 'decode':
      return { workerType: 'decode', needs: [['prefill']] };
    case 'encode':
      return { workerType: 'encode', needs: [['prefill', 'decode'], ['aggregated']] };
    default:
      return { workerType: 'aggregated', needs: config.routeToEncoder ? [['encode']] : [] };
  }
}

function modelTypeOf(config: WorkerConfig): ModelTypeFlags {
  // A prefill worker has no OpenAI surface; the Prefill bit still lets older frontends route to it.
  if (config.disaggregationMode === 'prefill') return ModelType.Prefill;
  // An encoder is reached only through other workers, never listed on /v1/models.
  if (config.disaggregationMode === 'encode') return 0;
  return parseEndpointTypes(config.endpointTypes);
}

/** Throws `InvalidArgument` unless the config names the model's files (frontends tokenize with them). */
export function requireModelPath(worker: WorkerConfig): void {
  if (worker.modelName === '') {
    throw new InvalidArgument(
      "model path: WorkerConfig.modelName is empty; give the model's folder, .gguf file or Hugging Face id (--model-path) so frontends can tokenize for it",
    );
  }
}

const defined = <T extends object>(value: T): T => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;

/**
 * What `registerLlm` gets for a worker: the served name, model type and topology from the
 * `WorkerConfig`, the engine's limits (`llm`) as the card's runtime config, and the migration
 * limit. Throws `InvalidArgument` naming a bad endpoint type or a missing model path.
 */
export function modelRegistration(engine: EngineConfig, worker: WorkerConfig): ModelRegistration {
  const servedName = [worker.servedModelName, engine.servedModelName, engine.model].find((n) => n !== undefined && n !== '');
  if (servedName === undefined) throw new InvalidArgument('no model name to serve: EngineConfig.model is empty and no served model name is set');
  requireModelPath(worker);
  const llm = engine.llm ?? {};
  const { workerType, needs } = topology(worker);
  const runtimeData = {
    // The worker answers n choices itself, for engines that make one per call too (engine-handler).
    [N_CHOICES_KEY]: true,
    ...engine.runtimeData,
    ...(worker.routeToEncoder && { encoder_result_handoff: true }),
    ...(worker.defaultThinkingMode !== undefined && { default_thinking_mode: worker.defaultThinkingMode }),
  };
  const runtimeConfig: RuntimeConfigInput = defined({
    total_kv_blocks: llm.totalKvBlocks,
    max_num_seqs: llm.maxNumSeqs,
    max_num_batched_tokens: llm.maxNumBatchedTokens,
    data_parallel_size: llm.dataParallelSize,
    data_parallel_start_rank: llm.dataParallelStartRank,
    enable_eagle: llm.enableEagle,
    tool_call_parser: worker.toolCallParser,
    reasoning_parser: worker.reasoningParser,
    exclude_tools_when_tool_choice_none: worker.excludeToolsWhenToolChoiceNone,
    structural_tag_mode: worker.structuralTagMode,
    structural_tag_scope: worker.structuralTagScope,
    structural_tag_schema: worker.structuralTagSchema,
    // Decode and encode workers never answer the router's indexer queries.
    enable_local_indexer: worker.enableLocalIndexer && workerType !== 'decode' && workerType !== 'encode',
    kv_state_endpoint: worker.kvStateEndpoint,
    disaggregated_endpoint:
      llm.bootstrapHost !== undefined && llm.bootstrapPort !== undefined ? { bootstrap_host: llm.bootstrapHost, bootstrap_port: llm.bootstrapPort } : undefined,
    runtime_data: Object.keys(runtimeData).length > 0 ? runtimeData : undefined,
  });
  return {
    modelInput: ModelInput[worker.modelInput],
    modelType: modelTypeOf(worker),
    modelPath: worker.modelName,
    servedName,
    options: defined({
      modelName: servedName,
      contextLength: llm.contextLength,
      kvCacheBlockSize: llm.kvCacheBlockSize,
      migrationLimit: worker.migrationLimit,
      runtimeConfig,
      workerType,
      needs,
      customTemplatePath: worker.customJinjaTemplate,
      // Frontends tokenize; the worker only publishes where the files are.
      checkTokenizer: false,
    }),
  };
}
