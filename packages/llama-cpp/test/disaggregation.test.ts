import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Context, type GenerateChunk, type GenerateRequest, Worker } from '@dynamo/backend';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { DistributedRuntime, loadRuntimeConfig, MemKvSpace } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { smolLm2 } from '../../../scripts/test-model.mjs';
import { LlamaCppEngine } from '../src/index.js';

const modelPath = await smolLm2();
const tmp = mkdtempSync(join(tmpdir(), 'llama-cpp-disagg-'));
process.env.XDG_CACHE_HOME = join(tmp, 'cache');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const space = new MemKvSpace();
const config = loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' });
const common = ['--model-path', modelPath, '--context-size', '1024', '--parallel', '2', '--threads', '1'];

interface Running {
  engine: LlamaCppEngine;
  worker: Worker;
  runtime: DistributedRuntime;
  done: Promise<void>;
}
const running: Running[] = [];

/** A dynamo-llama-cpp worker in this process, on the shared in-memory discovery and a real TCP request plane. */
async function startWorker(component: string, args: string[], extraEnv: Record<string, string> = {}): Promise<Running> {
  // No router grace period: nothing routes to these workers but the test itself.
  const env = { DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '0', ...extraEnv };
  const runtime = await DistributedRuntime.create({ config, memSpace: space });
  const [engine, workerConfig] = await LlamaCppEngine.fromArgs([...common, '--component', component, ...args], env);
  const worker = new Worker(engine, workerConfig, { runtime, handleSignals: false, env });
  const done = worker.run();
  const client = await caller.namespace('dynamo').component(component).endpoint('generate').client();
  await Promise.race([client.waitForInstances({ timeoutMs: 60_000 }), done.then(() => Promise.reject(new Error(`worker ${component} ended before serving`)))]);
  client.close();
  const started = { engine, worker, runtime, done };
  running.push(started);
  return started;
}

async function call(component: string, request: GenerateRequest): Promise<GenerateChunk[]> {
  const client = await caller.namespace('dynamo').component(component).endpoint('generate').client();
  await client.waitForInstances({ timeoutMs: 10_000 });
  try {
    const chunks: GenerateChunk[] = [];
    for await (const chunk of client.generate<GenerateChunk>(request)) chunks.push(chunk);
    return chunks;
  } finally {
    client.close();
  }
}

/** What a frontend does with a prefill and a decode worker: one token from the prefill, the answer from the decode. */
async function disaggregated(prefill: string, decode: string, request: GenerateRequest): Promise<{ prefilled: GenerateChunk; answer: GenerateChunk[] }> {
  const prefilled = await call(prefill, { ...request, stop_conditions: { ...request.stop_conditions, max_tokens: 1 } });
  expect(prefilled).toHaveLength(1);
  const [first] = prefilled as [GenerateChunk];
  const answer = await call(decode, {
    ...request,
    prefill_result: { disaggregated_params: first.disaggregated_params, prompt_tokens_details: first.completion_usage?.prompt_tokens_details },
  });
  return { prefilled: first, answer };
}

const tokensOf = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids ?? []);

let caller: DistributedRuntime;
let aggregated: LlamaCppEngine;
let prompts: number[][];
let prefill: Running;
let decode: Running;

beforeAll(async () => {
  caller = await DistributedRuntime.create({ config, memSpace: space });
  const model = await LocalModel.load(modelPath);
  const pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
  const ask = async (content: string) => (await pre.preprocessChat({ model: 'x', messages: [{ role: 'user', content }] })).request.token_ids;
  prompts = [
    await ask('What is the capital of France?'),
    await ask(`Summarize in one line: ${'The river runs past the old mill and under the stone bridge. '.repeat(14)}`),
  ];
  aggregated = new LlamaCppEngine({ modelPath, parallel: 2, contextSize: 1024, threads: 1 });
  await aggregated.start(1n);
  prefill = await startWorker('prefill', ['--disaggregation-mode', 'prefill']);
  decode = await startWorker('decode', ['--disaggregation-mode', 'decode']);
}, 180_000);

afterAll(async () => {
  await Promise.all(
    running.map(async ({ worker, done, runtime }) => {
      worker.shutdown();
      await done.catch(() => {});
      await runtime.shutdown();
    }),
  );
  await caller?.shutdown();
  await aggregated?.cleanup();
}, 60_000);

const greedy = (tokenIds: number[], maxTokens = 24): GenerateRequest => ({
  token_ids: tokenIds,
  sampling_options: { temperature: 0 },
  stop_conditions: { max_tokens: maxTokens, ignore_eos: true },
});

async function alone(request: GenerateRequest): Promise<number[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of aggregated.generate(request, new Context())) chunks.push(chunk);
  return tokensOf(chunks);
}

describe('dynamo-llama-cpp prefill and decode workers', () => {
  it("hands the prompt's KV state from the prefill worker to the decode worker over the request plane, and the answer is the aggregated one at temperature 0", async () => {
    expect(prompts[1]!.length).toBeGreaterThan(150);
    for (const prompt of prompts) {
      const request = greedy(prompt);
      const { prefilled, answer } = await disaggregated('prefill', 'decode', request);
      expect(prefilled).toMatchObject({ finish_reason: 'length', token_ids: [expect.any(Number)] });
      const handoff = prefilled.disaggregated_params as { kv_transfer: { bytes: number; endpoint: string }; completed_tokens: number[] };
      expect(handoff.completed_tokens).toEqual(prefilled.token_ids);
      expect(handoff.kv_transfer.endpoint).toBe('dynamo.prefill.kv_transfer');
      // llama.cpp's state of a sequence grows with its tokens (about 23 kB a token for SmolLM2).
      expect(handoff.kv_transfer.bytes).toBeGreaterThan(prompt.length * 10_000);
      const ids = tokensOf(answer);
      expect(ids).toEqual(await alone(request));
      expect(ids[0]).toBe(prefilled.token_ids![0]);
      expect(answer.at(-1)).toMatchObject({ finish_reason: 'length', completion_usage: { prompt_tokens: prompt.length, completion_tokens: 24 } });
    }
    // Each state was pulled once and is gone from the prefill worker.
    expect(await prefill.engine.isQuiescent()).toBe(true);
    const metrics = await decode.runtime.metrics.registry.getSingleMetricAsString('dynamo_component_kv_transfer_bytes');
    expect(metrics).toMatch(/dynamo_component_kv_transfer_bytes_count(\{[^}]*\})? 2\b/);
  }, 120_000);

  it('refuses a second pull of the same state, and a decode worker then evaluates the prompt itself with the same answer', async () => {
    const request = greedy(prompts[0]!, 8);
    const prefilled = (await call('prefill', { ...request, stop_conditions: { max_tokens: 1 } }))[0]!;
    const result = { disaggregated_params: prefilled.disaggregated_params };
    const first = tokensOf(await call('decode', { ...request, prefill_result: result }));
    const again = tokensOf(await call('decode', { ...request, prefill_result: result }));
    expect(again).toEqual(first);
    expect(first).toEqual(await alone(request));
  }, 60_000);

  it('refuses a state made with another --parallel, naming the setting, before loading any of it', async () => {
    await startWorker('decode3', ['--disaggregation-mode', 'decode', '--parallel', '3']);
    const request = greedy(prompts[0]!, 4);
    const prefilled = (await call('prefill', { ...request, stop_conditions: { max_tokens: 1 } }))[0]!;
    await expect(call('decode3', { ...request, prefill_result: { disaggregated_params: prefilled.disaggregated_params } })).rejects.toThrow(
      "the prefill worker's KV state does not fit this decode worker: sequences per context (--parallel) is 2 there and 3 here",
    );
  }, 120_000);

  it('drops a state nobody pulled after --kv-transfer-timeout; the decode worker then evaluates the prompt itself', async () => {
    await startWorker('prefill-short', ['--disaggregation-mode', 'prefill', '--kv-transfer-timeout', '0.3']);
    const request = greedy(prompts[0]!, 6);
    const prefilled = (await call('prefill-short', { ...request, stop_conditions: { max_tokens: 1 } }))[0]!;
    await new Promise((resolve) => setTimeout(resolve, 800));
    const answer = tokensOf(await call('decode', { ...request, prefill_result: { disaggregated_params: prefilled.disaggregated_params } }));
    expect(answer).toEqual(await alone(request));
  }, 120_000);

  it('shuts a prefill worker down only once its staged state is pulled, serving the pull while it drains', async () => {
    const draining = await startWorker('prefill-drain', ['--disaggregation-mode', 'prefill']);
    const request = greedy(prompts[0]!, 6);
    const prefilled = (await call('prefill-drain', { ...request, stop_conditions: { max_tokens: 1 } }))[0]!;
    expect(await draining.engine.isQuiescent()).toBe(false);
    draining.worker.shutdown();
    let stopped = false;
    void draining.done.then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(stopped).toBe(false);
    const answer = tokensOf(await call('decode', { ...request, prefill_result: { disaggregated_params: prefilled.disaggregated_params } }));
    expect(answer).toEqual(await alone(request));
    await draining.done;
  }, 120_000);

  it('evaluates the prompt on the decode worker, with the same answer, when the prefill worker left before the pull', async () => {
    const leaving = await startWorker('prefill-gone', ['--disaggregation-mode', 'prefill'], { DYN_PREFILL_DRAIN_TIMEOUT_S: '0.5' });
    const request = greedy(prompts[1]!, 6);
    const prefilled = (await call('prefill-gone', { ...request, stop_conditions: { max_tokens: 1 } }))[0]!;
    leaving.worker.shutdown();
    await leaving.done;
    await leaving.runtime.shutdown();
    const transfers = await caller.namespace('dynamo').component('prefill-gone').endpoint('kv_transfer').client();
    expect(transfers.instanceIds()).toEqual([]);
    transfers.close();
    const answer = tokensOf(await call('decode', { ...request, prefill_result: { disaggregated_params: prefilled.disaggregated_params } }));
    expect(answer).toEqual(await alone(request));
  }, 120_000);

  it('refuses a prompt whose state is over DYN_KV_TRANSFER_MAX_BYTES on the prefill worker, naming the limit', async () => {
    await startWorker('prefill-small', ['--disaggregation-mode', 'prefill'], { DYN_KV_TRANSFER_MAX_BYTES: '100000' });
    await expect(call('prefill-small', greedy(prompts[1]!, 1))).rejects.toThrow(/over the 100000-byte transfer limit \(DYN_KV_TRANSFER_MAX_BYTES\)/);
  }, 120_000);
});
