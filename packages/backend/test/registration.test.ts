import { ModelType } from '@dynamo/llm';
import { describe, expect, it } from 'vitest';

import { InvalidArgument, workerConfig } from '../src/index.js';
import { modelRegistration, parseEndpointTypes } from '../src/internal.js';

const engine = { model: 'org/model', llm: { contextLength: 2048, kvCacheBlockSize: 32, totalKvBlocks: 100, bootstrapHost: 'h', bootstrapPort: 7 } };

describe('modelRegistration', () => {
  it('derives the card arguments as Dynamo does: served name, model type, limits, runtime config', () => {
    const r = modelRegistration(engine, workerConfig({ modelName: '/models/m', migrationLimit: 3, toolCallParser: 'hermes' }));
    expect(r).toMatchObject({ modelInput: 'Tokens', modelType: ModelType.Chat | ModelType.Completions, modelPath: '/models/m', servedName: 'org/model' });
    expect(r.options).toMatchObject({
      modelName: 'org/model',
      contextLength: 2048,
      kvCacheBlockSize: 32,
      migrationLimit: 3,
      workerType: 'aggregated',
      needs: [],
      runtimeConfig: {
        total_kv_blocks: 100,
        tool_call_parser: 'hermes',
        enable_local_indexer: true,
        disaggregated_endpoint: { bootstrap_host: 'h', bootstrap_port: 7 },
      },
    });
  });

  it('prefers the worker served name, then the engine one', () => {
    expect(modelRegistration({ ...engine, servedModelName: 'e' }, workerConfig({ modelName: 'p' })).servedName).toBe('e');
    expect(modelRegistration({ ...engine, servedModelName: 'e' }, workerConfig({ modelName: 'p', servedModelName: 'w' })).servedName).toBe('w');
  });

  it('maps disaggregation modes to worker type, needs and model type', () => {
    const mode = (disaggregationMode: string, routeToEncoder = false) =>
      modelRegistration(engine, workerConfig({ modelName: 'p', disaggregationMode, routeToEncoder }));
    expect(mode('prefill')).toMatchObject({ modelType: ModelType.Prefill, options: { workerType: 'prefill', needs: [['decode']] } });
    expect(mode('prefill', true).options.needs).toEqual([['decode', 'encode']]);
    expect(mode('decode')).toMatchObject({ options: { workerType: 'decode', needs: [['prefill']], runtimeConfig: { enable_local_indexer: false } } });
    expect(mode('encode')).toMatchObject({ modelType: 0, options: { workerType: 'encode', needs: [['prefill', 'decode'], ['aggregated']] } });
    expect(mode('agg', true).options).toMatchObject({ needs: [['encode']], runtimeConfig: { runtime_data: { encoder_result_handoff: true } } });
  });

  it('parses endpoint types and names a bad one', () => {
    expect(parseEndpointTypes(' Chat, ,embeddings,audio ')).toBe(ModelType.Chat | ModelType.Embedding | ModelType.Audios);
    expect(() => parseEndpointTypes('chat,prefill')).toThrow(/unknown endpoint type 'prefill'/);
    expect(() => parseEndpointTypes(' , ')).toThrow('endpoint_types cannot be empty');
  });

  it('needs a model path', () => {
    expect(() => modelRegistration(engine, workerConfig({}))).toThrow(InvalidArgument);
    expect(() => modelRegistration(engine, workerConfig({}))).toThrow('--model-path');
  });
});
