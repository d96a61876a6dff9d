// KV-aware routing with a real prefix cache: two dynamo-llama-cpp workers on SmolLM2 behind our
// frontend and the stock 1.6.1 frontend, both in --router-mode kv, on file + tcp with the ZMQ
// event plane. Turn 2 of a conversation must reach the worker that holds turn 1, found from the
// KV events the engine publishes, and evaluate only what is new: the reported cached tokens cover
// at least every full block of turn 1's prompt (each conversation starts differently, so no other
// worker could report them). Skipped, never passed, without PyPI.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { freePort, waitFor } from '@dynamo/testing/free-port';
import { post } from '@dynamo/testing/frontend-stack';
import { counter, type Frontend, healthInstances, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { smolLm2 } from '../../scripts/test-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const llamaCli = join(here, '..', 'node_modules', '@dynamo', 'llama-cpp', 'dist', 'cli.cjs');
const stock = stockPython();
const MODEL = 'smollm2';
const BLOCK = 16;
const SYSTEM =
  'You are the assistant of a small town library. Answer in one short sentence. The library opens at nine and closes at six, lends up to five books for three weeks, and has a reading room on the first floor.';
type Message = { role: string; content: string };
type Chat = { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } };

describe.skipIf('skip' in stock)("KV-aware routing on dynamo-llama-cpp's prefix cache (file + tcp, ZMQ event plane)", () => {
  let stack: InteropStack;
  let frontends: Frontend[];
  const metrics: string[] = [];

  beforeAll(async () => {
    if ('skip' in stock) return;
    const modelPath = await smolLm2();
    stack = await InteropStack.start(MATRIX_SETUPS[0]!, stock.python);
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      metrics.push(`http://127.0.0.1:${port}/metrics`);
      // One thread each: the two workers share the machine's two cores.
      stack.deployment.nodeProcess(
        [llamaCli, '--model-path', modelPath, '--model-name', MODEL, '--parallel', '2', '--context-size', '1024', '--threads', '1'],
        { DYN_SYSTEM_PORT: String(port) },
      );
    }
    frontends = await Promise.all([stack.ourFrontend(['--router-mode', 'kv']), stack.stockFrontend(['--router-mode', 'kv'])]);
    for (const fe of frontends) {
      await waitFor(
        `${fe.name} frontend to list ${MODEL} on both workers`,
        async () => (await healthInstances(fe.url, 'llama')).length === 2 && (await listedModels(fe.url)).includes(MODEL),
        150_000,
      );
    }
  }, 300_000);
  afterAll(() => stack?.stop());

  /** Each worker's prompt tokens looked up in its prefix cache so far. */
  const queries = () => Promise.all(metrics.map((url) => counter(url, 'llamacpp:prefix_cache_queries_total')));

  /** Sends a chat turn; returns the answer, its usage and the worker (index) that served it. */
  async function turn(fe: Frontend, messages: Message[]): Promise<{ answer: string; usage: Chat['usage']; worker: number }> {
    const before = await queries();
    const res = await post(fe.url, '/v1/chat/completions', { model: MODEL, messages, temperature: 0, max_tokens: 12 });
    const text = await res.text();
    expect(res.status, `${fe.name}: ${text}`).toBe(200);
    const body = JSON.parse(text) as Chat;
    const after = await queries();
    const served = after.map((n, i) => n - before[i]!).findIndex((delta) => delta > 0);
    expect(served, `${fe.name}: no worker counted the prompt`).toBeGreaterThanOrEqual(0);
    return { answer: body.choices[0]!.message.content, usage: body.usage, worker: served };
  }

  for (const name of ['our', 'stock'] as const) {
    it(`${name} frontend: turn 2 of each of 4 conversations reaches the worker holding turn 1 and reuses at least turn 1's full blocks`, async () => {
      const fe = frontends.find((f) => f.name === name)!;
      for (let c = 0; c < 4; c++) {
        // Each conversation starts differently: only the worker that served its turn 1 holds any of it.
        const messages: Message[] = [
          { role: 'system', content: `Card ${c} of the ${name} desk. ${SYSTEM}` },
          { role: 'user', content: 'When can I come, and how many books may I borrow?' },
        ];
        const first = await turn(fe, messages);
        const second = await turn(fe, [...messages, { role: 'assistant', content: first.answer }, { role: 'user', content: 'And where is the reading room?' }]);
        const fullBlocks = Math.floor(first.usage.prompt_tokens / BLOCK) * BLOCK;
        expect(second.worker, `${name} conversation ${c}: turn 1 on worker ${first.worker}, turn 2 on ${second.worker}`).toBe(first.worker);
        expect(second.usage.prompt_tokens_details?.cached_tokens ?? 0, `${name} conversation ${c}`).toBeGreaterThanOrEqual(fullBlocks);
      }
    }, 240_000);
  }

  it('each worker reports its KV cache to routers and on /metrics: its total blocks, and the prefix cache hits of the turns above', async () => {
    for (const url of metrics) expect(await counter(url, 'dynamo_component_total_blocks'), url).toBe((2 * 1024) / BLOCK);
    // Either worker may have served every conversation: the hits are summed over both.
    const hits = await Promise.all(metrics.map((url) => counter(url, 'llamacpp:prefix_cache_hits_total')));
    const rates = await Promise.all(metrics.map((url) => counter(url, 'dynamo_component_kv_cache_hit_rate')));
    expect(hits[0]! + hits[1]!).toBeGreaterThan(0);
    expect(Math.max(...rates)).toBeGreaterThan(0);
  });
});
