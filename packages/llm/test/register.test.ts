import { readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DistributedRuntime, InvalidArgument, loadRuntimeConfig, MemKvSpace } from '@dynamo/runtime';
import { parseJson } from '@dynamo/runtime/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loraId, ModelInput, ModelType, registerLlm, unregisterLlm } from '../src/index.js';
import { ModelDeploymentCardSchema, mdcsum } from '../src/internal.js';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

const stockDir = join(dirname(fileURLToPath(import.meta.url)), '../../../test/interop/fixtures/llm-1.6.1');
const stockRecord = parseJson(readFileSync(join(stockDir, 'mdc-record.sample-engine.json'), 'utf8')) as { card_json: Record<string, unknown> };
/** The card a stock 1.6.1 worker registered with `register_model(..., model_name="qwen3")` and defaults. */
const stockDefaultCard = Object.values(JSON.parse(readFileSync(join(stockDir, 'mdc-records.llm-workers.json'), 'utf8')) as Record<string, string>)
  .map((r) => JSON.parse(r).card_json as Record<string, unknown>)
  .find((card) => card.display_name === 'qwen3')!;

let space: MemKvSpace;
let runtime: DistributedRuntime;
let modelDir: string;

async function cardsIn(rt: DistributedRuntime): Promise<Array<{ key: string; record: Record<string, unknown> }>> {
  const entries = await rt.discovery.store.list('v1/mdc', '');
  return entries.map((e) => ({ key: e.key, record: parseJson(e.value) as Record<string, unknown> }));
}

beforeAll(async () => {
  modelDir = qwen3ModelDir();
  space = new MemKvSpace();
  runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'warn' }), memSpace: space });
});

afterAll(async () => {
  await runtime.shutdown();
  rmSync(modelDir, { recursive: true, force: true });
});

describe('registerLlm', () => {
  it('publishes a card with stock Dynamo 1.6.1 field names under v1/mdc/{ns}/{comp}/{ep}/{id:x}', async () => {
    const endpoint = runtime.namespace('dynamo').component('backend').endpoint('generate');
    const { card } = await registerLlm(ModelInput.Tokens, ModelType.Chat | ModelType.Completions, endpoint, modelDir);
    const [entry] = await cardsIn(runtime);
    expect(entry!.key).toBe(`dynamo/backend/generate/${runtime.instanceId.toString(16)}`);
    expect(entry!.record).toMatchObject({ type: 'Model', namespace: 'dynamo', component: 'backend', endpoint: 'generate', instance_id: runtime.instanceId });
    const published = entry!.record.card_json as Record<string, unknown>;
    expect(published).toEqual(JSON.parse(JSON.stringify(card)));
    // The fields a stock worker writes with the same defaults, in the same order.
    expect(Object.keys(published)).toEqual(Object.keys(stockDefaultCard));
    expect(published.runtime_config).toEqual(stockDefaultCard.runtime_config);
    expect(card).toMatchObject({
      display_name: basename(modelDir),
      slug: basename(modelDir)
        .toLowerCase()
        .replace(/[^a-z0-9_-]/g, '_'),
      source_path: modelDir,
      context_length: 40960,
      architectural_max_context_length: 40960,
      kv_cache_block_size: 16,
      migration_limit: 0,
      model_type: 'Chat | Completions',
      model_input: 'Tokens',
      worker_type: 'aggregated',
      needs: [],
    });
    // Checksums of the same bytes equal the ones the stock release computed.
    const stockTokenizer = (stockRecord.card_json.tokenizer as { hf_tokenizer_json: { checksum: string; size: number } }).hf_tokenizer_json;
    expect(card.tokenizer).toEqual({
      hf_tokenizer_json: { path: join(modelDir, 'tokenizer.json'), checksum: stockTokenizer.checksum, size: stockTokenizer.size },
    });
    expect(mdcsum(card)).toMatch(/^[0-9a-f]{64}$/);
    await unregisterLlm(endpoint);
    expect(await cardsIn(runtime)).toEqual([]);
  });

  it('takes a model name, context length, block size, migration limit, user data and runtime config', async () => {
    const endpoint = runtime.namespace('dynamo').component('named').endpoint('generate');
    const { card } = await registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint, modelDir, {
      modelName: 'Qwen/Qwen3-0.6B',
      contextLength: 8192,
      kvCacheBlockSize: 32,
      migrationLimit: 3,
      userData: { team: 'a' },
      runtimeConfig: { total_kv_blocks: 1000, max_num_seqs: 64, reasoning_parser: 'qwen3' },
    });
    expect(card).toMatchObject({
      display_name: 'Qwen/Qwen3-0.6B',
      slug: 'qwen_qwen3-0_6b',
      context_length: 8192,
      kv_cache_block_size: 32,
      migration_limit: 3,
      user_data: { team: 'a' },
      model_type: 'Chat',
      runtime_config: { context_length: 8192, total_kv_blocks: 1000, max_num_seqs: 64, reasoning_parser: 'qwen3', data_parallel_size: 1 },
    });
    await unregisterLlm(endpoint);
  });

  it('accepts the first releases form registerLlm(ModelType.Backend, endpoint, path)', async () => {
    const endpoint = runtime.namespace('dynamo').component('legacy').endpoint('generate');
    const { card, unregister } = await registerLlm(ModelType.Backend, endpoint, modelDir);
    expect(card).toMatchObject({ model_type: 'Chat | Completions', model_input: 'Tokens' });
    await unregister();
  });

  it('removes the card when the endpoint stops serving', async () => {
    const endpoint = runtime.namespace('dynamo').component('served').endpoint('generate');
    await endpoint.component.createService();
    await registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint, modelDir);
    const served = await endpoint.serveEndpoint(async function* () {
      yield { token_ids: [], finish_reason: 'stop' };
    });
    expect((await cardsIn(runtime)).map((c) => c.key)).toContain(`dynamo/served/generate/${runtime.instanceId.toString(16)}`);
    await served.stop();
    expect(await cardsIn(runtime)).toEqual([]);
  });

  it('removes the card when the runtime shuts down', async () => {
    const rt = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'warn' }), memSpace: space });
    const observer = runtime;
    await registerLlm(ModelInput.Tokens, ModelType.Chat, rt.namespace('dynamo').component('short').endpoint('generate'), modelDir);
    expect((await cardsIn(observer)).length).toBe(1);
    await rt.shutdown();
    expect(await cardsIn(observer)).toEqual([]);
  });

  it('the card it writes parses with the card schema, and so does the stock one', async () => {
    expect(ModelDeploymentCardSchema.safeParse(stockRecord.card_json).success).toBe(true);
  });
});

describe('registerLlm with bad input', () => {
  const endpoint = () => runtime.namespace('dynamo').component('bad').endpoint('generate');

  it.each([
    ['config.json', 'config.json is missing'],
    ['tokenizer.json', 'tokenizer.json is missing'],
  ])('names a missing %s', async (file, message) => {
    const dir = qwen3ModelDir();
    unlinkSync(join(dir, file));
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), dir)).rejects.toThrow(message);
    rmSync(dir, { recursive: true });
  });

  it.each(['config.json', 'tokenizer_config.json', 'generation_config.json'])('names a malformed %s', async (file) => {
    const dir = qwen3ModelDir();
    writeFileSync(join(dir, file), '{"eos_token_id": 1,');
    const err = await registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toContain(`${join(dir, file)} is not valid JSON`);
    rmSync(dir, { recursive: true });
  });

  it('names a tokenizer.json that is not a tokenizer', async () => {
    const dir = qwen3ModelDir();
    writeFileSync(join(dir, 'tokenizer.json'), '{"model": 3}');
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), dir)).rejects.toThrow(join(dir, 'tokenizer.json'));
    rmSync(dir, { recursive: true });
  });

  it('refuses a context length beyond the model maximum, bad flags and a bad block size', async () => {
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), modelDir, { contextLength: 50_000 })).rejects.toThrow(
      "contextLength 50000 is larger than the model's maximum of 40960 tokens",
    );
    await expect(registerLlm(ModelInput.Tokens, 1 << 20, endpoint(), modelDir)).rejects.toThrow('not a combination of ModelType flags');
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), modelDir, { kvCacheBlockSize: 0 })).rejects.toThrow(
      'kvCacheBlockSize must be an integer from 1',
    );
    await expect(registerLlm('Pixels' as ModelInput, ModelType.Chat, endpoint(), modelDir)).rejects.toThrow('modelInput must be one of Text, Tokens, Tensor');
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint(), join(modelDir, 'nope'))).rejects.toThrow(InvalidArgument);
    expect(await cardsIn(runtime)).toEqual([]);
  });
});

describe('LoRA adapters', () => {
  it('registers an adapter beside the base card (key suffix: its slug, `lora` in the card) and takes back only it', async () => {
    const endpoint = runtime.namespace('dynamo').component('lora').endpoint('generate');
    const id = runtime.instanceId.toString(16);
    await registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint, modelDir, { modelName: 'base' });
    const { card } = await registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint, modelDir, { lora: { name: 'My Pirate/v2', maxGpuLoraCount: 2 } });
    expect(card).toMatchObject({ display_name: 'My Pirate/v2', lora: { name: 'My Pirate/v2', max_gpu_lora_count: 2 } });
    const ours = async () => (await cardsIn(runtime)).filter((c) => c.key.startsWith('dynamo/lora/'));
    expect((await ours()).map((c) => [c.key, (c.record.card_json as { display_name: string }).display_name, c.record.model_suffix]).sort()).toEqual([
      [`dynamo/lora/generate/${id}`, 'base', undefined],
      [`dynamo/lora/generate/${id}/my_pirate_v2`, 'My Pirate/v2', 'my_pirate_v2'],
    ]);
    await unregisterLlm(endpoint, 'My Pirate/v2');
    expect((await ours()).map((c) => c.key)).toEqual([`dynamo/lora/generate/${id}`]);
    await unregisterLlm(endpoint);
    expect(await ours()).toEqual([]);
    await expect(registerLlm(ModelInput.Tokens, ModelType.Chat, endpoint, modelDir, { lora: { name: '///' } })).rejects.toThrow(
      'lora.name must be a non-empty name',
    );
  });

  it("loraId is stock's id for a name", () => {
    // dynamo.llm.lora_name_to_id("test_lora") in the 1.6.1 release.
    expect(loraId('test_lora')).toBe(1983627077);
    expect(loraId('pirate')).toBe(loraId('pirate'));
    expect(loraId('pirate')).not.toBe(loraId('parrot'));
  });
});
