import { Context, type GenerateChunk, type GenerateRequest, runConformance } from '@dynamo/backend';
import { describe, expect, it } from 'vitest';
import { SampleEngine } from '../src/index.js';

async function collect(engine: SampleEngine, request: GenerateRequest, context = new Context()): Promise<GenerateChunk[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of engine.generate(request, context)) chunks.push(chunk);
  return chunks;
}

describe('SampleEngine', () => {
  it('reports the sample registration from start()', async () => {
    const config = await new SampleEngine().start(7n);
    expect(config).toEqual({
      model: 'sample-model',
      servedModelName: 'sample-model',
      llm: { contextLength: 2048, kvCacheBlockSize: 16, totalKvBlocks: 1000, maxNumSeqs: 64, maxNumBatchedTokens: 2048 },
    });
  });

  it('emits rotating tokens 1, 2, 3 one per chunk, the last with length and usage', async () => {
    const chunks = await collect(new SampleEngine({ delayMs: 0 }), { token_ids: [9, 9], stop_conditions: { max_tokens: 3 } });
    expect(chunks).toEqual([
      { token_ids: [1], index: 0 },
      { token_ids: [2], index: 0 },
      { token_ids: [3], index: 0, finish_reason: 'length', completion_usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } },
    ]);
  });

  it('falls back to the engine max when the request sets none (or 0)', async () => {
    const engine = new SampleEngine({ delayMs: 0, maxTokens: 5 });
    expect(await collect(engine, { token_ids: [1] })).toHaveLength(5);
    expect(await collect(engine, { token_ids: [1], stop_conditions: { max_tokens: 0 } })).toHaveLength(5);
  });

  it('with followPrompt continues the prompt, so a resent request with the tokens so far goes on with the same sequence', async () => {
    const engine = new SampleEngine({ delayMs: 0, followPrompt: true });
    const ids = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids);
    const whole = ids(await collect(engine, { token_ids: [100], stop_conditions: { max_tokens: 6 } }));
    expect(whole).toEqual([101, 102, 103, 104, 105, 106]);
    const head = whole.slice(0, 2);
    const rest = ids(await collect(engine, { token_ids: [100, ...head], stop_conditions: { max_tokens: 4 } }));
    expect([...head, ...rest]).toEqual(whole);
  });

  it('wraps token ids below 32000', async () => {
    const chunks = await collect(new SampleEngine({ delayMs: 0 }), { token_ids: [1], stop_conditions: { max_tokens: 32001 } });
    expect(chunks[31998]!.token_ids).toEqual([31999]);
    expect(chunks[31999]!.token_ids).toEqual([0]);
    expect(chunks[32000]!.token_ids).toEqual([1]);
  });

  it('ends a stopped request with one empty cancelled chunk carrying partial usage', async () => {
    const context = new Context();
    const engine = new SampleEngine({ delayMs: 0 });
    const chunks: GenerateChunk[] = [];
    for await (const chunk of engine.generate({ token_ids: [1, 2, 3], stop_conditions: { max_tokens: 100 } }, context)) {
      chunks.push(chunk);
      if (chunks.length === 2) context.stopGenerating();
    }
    expect(chunks).toHaveLength(3);
    expect(chunks[2]).toEqual({
      token_ids: [],
      index: 0,
      finish_reason: 'cancelled',
      completion_usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    });
  });

  it('stopped before the first step yields only the cancelled terminal', async () => {
    const context = new Context();
    context.stopGenerating();
    const chunks = await collect(new SampleEngine(), { token_ids: [1] }, context);
    expect(chunks).toEqual([
      { token_ids: [], index: 0, finish_reason: 'cancelled', completion_usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 } },
    ]);
  });

  it('as a prefill worker emits one token with a handoff in disaggregated_params', async () => {
    const chunks = await collect(new SampleEngine({ delayMs: 0, disaggregationMode: 'prefill' }), { token_ids: [1], stop_conditions: { max_tokens: 8 } });
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ finish_reason: 'length', completion_usage: { completion_tokens: 1 } });
    expect(chunks[0]!.disaggregated_params).toMatchObject({ sample_handle: expect.stringMatching(/^[0-9a-f]{32}$/), completed_tokens: [1] });
  });

  it('as a decode worker requires prefill_result, except for health probes', async () => {
    const engine = new SampleEngine({ delayMs: 0, disaggregationMode: 'decode' });
    await expect(collect(engine, { token_ids: [1] })).rejects.toThrow(/prefill_result/);
    await expect(collect(engine, { token_ids: [1], stop_conditions: { max_tokens: 4 }, prefill_result: { disaggregated_params: {} } })).resolves.toHaveLength(
      4,
    );
    await expect(collect(engine, { token_ids: [1], stop_conditions: { max_tokens: 1 }, _HEALTH_CHECK: true })).resolves.toHaveLength(1);
  });

  it('as an encode worker answers one handoff chunk naming the media, and passes the encode kit', async () => {
    const engine = new SampleEngine({ delayMs: 0, disaggregationMode: 'encode' });
    const chunks = await collect(engine, {
      token_ids: [5, 6],
      multi_modal_data: { image: [{ Url: 'data:image/png;base64,AA==' }] },
      mm_processor_kwargs: { min_pixels: 64 },
    });
    expect(chunks).toEqual([
      {
        token_ids: [],
        index: 0,
        finish_reason: 'stop',
        completion_usage: { prompt_tokens: 2, completion_tokens: 0, total_tokens: 2 },
        encoder_result: { handle: expect.stringMatching(/^sample-encoder:[0-9a-f]{32}$/), media: { image: 1 }, mm_processor_kwargs: { min_pixels: 64 } },
      },
    ]);
    expect(await engine.kvEventSources()).toEqual([]);
    await expect(runConformance(() => new SampleEngine({ disaggregationMode: 'encode' }), { mode: 'encode' })).resolves.toMatchObject({ passed: true });
    // A generator is not an encoder.
    await expect(runConformance(() => new SampleEngine({ delayMs: 0 }), { mode: 'encode' })).rejects.toMatchObject({ kind: 'EncodeChunkCount' });
  });

  it('builds engine and worker config from flags', async () => {
    const [engine, config] = await SampleEngine.fromArgs(
      ['--model-name', 'm1', '--max-tokens', '4', '--delay-ms', '0', '--disaggregation-mode', 'prefill', '--disable-kv-routing'],
      {},
    );
    expect(engine).toMatchObject({ modelName: 'm1', maxTokens: 4, delayMs: 0, disaggregationMode: 'prefill' });
    expect(config).toMatchObject({
      namespace: 'dynamo',
      component: 'sample',
      endpoint: 'generate',
      modelName: '',
      servedModelName: 'm1',
      disaggregationMode: 'prefill',
      enableKvRouting: false,
      discoveryBackend: 'file',
      requestPlane: 'tcp',
    });
  });

  it('takes DYN_* env for worker flags', async () => {
    const [, config] = await SampleEngine.fromArgs([], { DYN_NAMESPACE: 'prod', DYN_REQUEST_PLANE: 'nats' });
    expect(config).toMatchObject({ namespace: 'prod', requestPlane: 'nats' });
  });

  it('rejects bad flags naming the flag', async () => {
    await expect(SampleEngine.fromArgs(['--max-tokens', '-3'], {})).rejects.toThrow(/--max-tokens/);
    await expect(SampleEngine.fromArgs(['--delay-ms', 'fast'], {})).rejects.toThrow(/--delay-ms/);
    await expect(SampleEngine.fromArgs(['--model-name', ''], {})).rejects.toThrow(/--model-name/);
    await expect(SampleEngine.fromArgs(['--wat'], {})).rejects.toThrow(/--wat/);
  });

  it('offers a one-token health check payload', async () => {
    expect(await new SampleEngine().healthCheckPayload()).toEqual({
      token_ids: [1],
      stop_conditions: { max_tokens: 1, ignore_eos: true },
      sampling_options: { temperature: 0 },
    });
  });

  it('passes the conformance kit with its defaults', async () => {
    await expect(runConformance(() => new SampleEngine())).resolves.toMatchObject({ passed: true });
  });

  it('passes the conformance kit with no delay and as a prefill worker', async () => {
    await expect(runConformance(() => new SampleEngine({ delayMs: 0 }))).resolves.toMatchObject({ passed: true });
    await expect(runConformance(() => new SampleEngine({ disaggregationMode: 'prefill' }))).resolves.toMatchObject({ passed: true });
  });
});
