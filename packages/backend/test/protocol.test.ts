import { describe, expect, it } from 'vitest';
import { type GenerateChunk, InvalidArgument, parseDisaggregationMode, usage, workerConfig } from '../src/index.js';
import { engineConfigToWire, GenerateChunkSchema, GenerateRequestSchema, kvEventSourcesToWire, mergeChunks } from '../src/internal.js';

describe('workerConfig', () => {
  it("applies Dynamo's defaults, with the embedded file discovery", () => {
    const config = workerConfig({ namespace: 'ns' });
    expect(config).toMatchObject({
      namespace: 'ns',
      component: 'backend',
      endpoint: 'generate',
      modelName: '',
      modelInput: 'Tokens',
      endpointTypes: 'chat,completions',
      discoveryBackend: 'file',
      requestPlane: 'tcp',
      excludeToolsWhenToolChoiceNone: true,
      enableLocalIndexer: true,
      enableKvRouting: true,
      metricsLabels: [],
      disaggregationMode: 'agg',
      structuralTagMode: 'off',
      structuralTagScope: 'auto',
      structuralTagSchema: 'auto',
      routeToEncoder: false,
      responsePlane: 'tcp',
      shutdown: {},
    });
  });

  it('names the bad field', () => {
    expect(() => workerConfig({ namespace: 'Bad Name' })).toThrow(InvalidArgument);
    expect(() => workerConfig({ namespace: 'Bad Name' })).toThrow(/WorkerConfig\.namespace: must match/);
    expect(() => workerConfig({ requestPlane: 'udp' as 'tcp' })).toThrow(/WorkerConfig\.requestPlane/);
    expect(() => workerConfig({ bogus: 1 } as never)).toThrow(/bogus/);
  });

  it('accepts the aggregated alias', () => {
    expect(workerConfig({ disaggregationMode: 'Aggregated' as 'agg' }).disaggregationMode).toBe('agg');
  });
});

describe('parseDisaggregationMode', () => {
  it('trims, lowercases and aliases', () => {
    expect(parseDisaggregationMode(' Prefill ')).toBe('prefill');
    expect(parseDisaggregationMode('aggregated')).toBe('agg');
  });

  it('names the unknown value and the accepted ones', () => {
    expect(() => parseDisaggregationMode('both')).toThrow("unknown disaggregation mode 'both' (expected one of: agg, prefill, decode, encode)");
  });
});

describe('engineConfigToWire', () => {
  it("renders Dynamo's field names", () => {
    expect(
      engineConfigToWire({
        model: 'm',
        servedModelName: 'served',
        runtimeData: { someKey: 1 },
        llm: { contextLength: 2048, kvCacheBlockSize: 16, totalKvBlocks: 1000, bootstrapPort: 8998 },
      }),
    ).toEqual({
      model: 'm',
      served_model_name: 'served',
      runtime_data: { someKey: 1 },
      llm: { context_length: 2048, kv_cache_block_size: 16, total_kv_blocks: 1000, bootstrap_port: 8998 },
    });
  });

  it('rejects bad values naming the field', () => {
    expect(() => engineConfigToWire({ model: 'm', llm: { contextLength: -1 } })).toThrow(/EngineConfig\.llm\.contextLength/);
    expect(() => engineConfigToWire({ model: 'm', llm: { context_length: 5 } })).toThrow(/context_length/);
    expect(() => engineConfigToWire(null)).toThrow(InvalidArgument);
  });
});

describe('kvEventSourcesToWire', () => {
  it('keeps dp ranks and defaults them to 0', () => {
    expect(
      kvEventSourcesToWire([
        { kind: 'zmq', endpoint: 'tcp://127.0.0.1:5557' },
        { kind: 'push', onReady: () => {}, dpRank: 1 },
      ]),
    ).toEqual([
      { kind: 'zmq', endpoint: 'tcp://127.0.0.1:5557', topic: '', dp_rank: 0 },
      { kind: 'push', dp_rank: 1 },
    ]);
  });

  it('names the bad entry', () => {
    expect(() => kvEventSourcesToWire([{ kind: 'push' }])).toThrow(/kvEventSources\.0\.onReady/);
  });
});

describe('wire schemas', () => {
  it('keeps unknown request keys untouched', () => {
    const parsed = GenerateRequestSchema.parse({ token_ids: [1, 2], custom_thing: { a: 1 } });
    expect(parsed.custom_thing).toEqual({ a: 1 });
  });

  it('rejects negative or fractional token ids', () => {
    expect(GenerateRequestSchema.safeParse({ token_ids: [-1] }).success).toBe(false);
    expect(GenerateRequestSchema.safeParse({ token_ids: [1.5] }).success).toBe(false);
  });

  it('accepts the finish reasons Dynamo accepts', () => {
    for (const finish_reason of ['eos', 'length', 'stop', 'cancelled', 'abort', 'content_filter', { error: 'boom' }]) {
      expect(GenerateChunkSchema.safeParse({ token_ids: [], finish_reason }).success).toBe(true);
    }
    expect(GenerateChunkSchema.safeParse({ token_ids: [], finish_reason: 'done' }).success).toBe(false);
  });

  it('usage computes the total', () => {
    expect(usage(3, 5)).toEqual({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
  });
});

describe('mergeChunks (token chunks of one turn as one frame)', () => {
  it('joins token ids and log probabilities in order, taking the later finish reason and usage', () => {
    const top = (id: number) => [{ token_id: id, logprob: -0.5 }];
    expect(
      mergeChunks({ token_ids: [1, 2], log_probs: [-1, -2], top_logprobs: [top(1), top(2)] }, { token_ids: [3], log_probs: [-3], top_logprobs: [top(3)] }),
    ).toEqual({
      token_ids: [1, 2, 3],
      log_probs: [-1, -2, -3],
      top_logprobs: [top(1), top(2), top(3)],
    });
    expect(mergeChunks({ token_ids: [7], index: 1 }, { token_ids: [8], index: 1, finish_reason: 'length', completion_usage: usage(4, 2) })).toEqual({
      token_ids: [7, 8],
      index: 1,
      finish_reason: 'length',
      completion_usage: usage(4, 2),
    });
  });

  it('does not change the chunks it joins', () => {
    const held = { token_ids: [1] };
    const next = { token_ids: [2] };
    mergeChunks(held, next);
    expect([held, next]).toEqual([{ token_ids: [1] }, { token_ids: [2] }]);
  });

  it('keeps apart what it cannot join', () => {
    const apart: Array<[GenerateChunk, GenerateChunk]> = [
      [{ token_ids: [1], finish_reason: 'stop' }, { token_ids: [2] }],
      [{ token_ids: [1], completion_usage: usage(1, 1) }, { token_ids: [2] }],
      [
        { token_ids: [1], index: 0 },
        { token_ids: [2], index: 1 },
      ],
      [{ token_ids: [1] }, { token_ids: [2], index: 0 }],
      [{ token_ids: [1], log_probs: [-1] }, { token_ids: [2] }],
      [{ token_ids: [1] }, { token_ids: [2], top_logprobs: [[]] }],
      [{ token_ids: [1], disaggregated_params: { x: 1 } }, { token_ids: [2] }],
      [{ token_ids: [1] }, { token_ids: [2], engine_data: { x: 1 } }],
      [{ token_ids: [1] }, { token_ids: [2], custom: true } as GenerateChunk],
      [{ embeddings: ['AAAA'] } as unknown as GenerateChunk, { token_ids: [2] }],
    ];
    for (const [held, next] of apart) expect(mergeChunks(held, next), JSON.stringify([held, next])).toBeUndefined();
    // Unset fields (null, as engines often send them) do not keep chunks apart.
    expect(mergeChunks({ token_ids: [1], finish_reason: null, engine_data: null }, { token_ids: [2], log_probs: null })).toEqual({ token_ids: [1, 2] });
  });
});
