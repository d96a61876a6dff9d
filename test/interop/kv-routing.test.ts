// KV-aware routing across implementations, on file + tcp with the default ZMQ event plane: the
// stock 1.6.1 frontend in --router-mode kv reads our workers' KV events, and our frontend reads the
// stock mocker's. A repeat of a prompt must reach the worker that cached it. Skipped, never
// passed, without PyPI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { waitFor } from '@dynamo/testing/free-port';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { post } from '@dynamo/testing/frontend-stack';
import { counter, type Frontend, healthInstances, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';

const stock = stockPython();

/** A token prompt of `blocks` blocks of `size` tokens, distinct per `seed`. */
const prompt = (seed: number, blocks: number, size: number) => Array.from({ length: blocks * size }, (_, i) => 1000 + seed * 7919 + i);

/** Sends a completion and returns the cached prompt tokens the worker reported. */
async function cachedTokens(url: string, model: string, tokens: number[]): Promise<number> {
  const res = await post(url, '/v1/completions', { model, prompt: tokens, max_tokens: 2 });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
  const body = JSON.parse(text) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } | null } };
  return body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

/** Sends a completion through `fe`; returns the tokens the worker found cached and the prefix the router selected it for. */
async function routed(fe: Frontend, model: string, tokens: number[]): Promise<{ cached: number; selected: number }> {
  const selectedTotal = () => counter(`${fe.url}/metrics`, 'dynamo_component_router_kv_selected_cached_prefix_tokens_total');
  const before = await selectedTotal();
  const cached = await cachedTokens(fe.url, model, tokens);
  return { cached, selected: (await selectedTotal()) - before };
}

describe.skipIf('skip' in stock)('KV-aware routing interop (file + tcp, ZMQ event plane)', () => {
  let stack: InteropStack;
  let stockFe: Frontend;
  let ourFe: Frontend;

  beforeAll(async () => {
    if ('skip' in stock) return;
    stack = await InteropStack.start(MATRIX_SETUPS[0]!, stock.python);
    const simulated = ['--simulate-kv-cache', '--kv-block-size', '16', '--delay-ms', '1', '--prefill-ms-per-token', '0.01'];
    stack.ourSample('ts-kv', 'tskv', simulated);
    stack.ourSample('ts-kv', 'tskv', simulated);
    stack.stockMocker('stock-kv');
    stack.stockMocker('stock-kv');
    [stockFe, ourFe] = await Promise.all([stack.stockFrontend(['--router-mode', 'kv']), stack.ourFrontend(['--router-mode', 'kv'])]);
    for (const fe of [stockFe, ourFe]) {
      await waitFor(
        `${fe.name} frontend to serve both models on two workers each`,
        async () =>
          (await healthInstances(fe.url, 'tskv')).length === 2 &&
          (await healthInstances(fe.url, 'backend')).length === 2 &&
          (await listedModels(fe.url)).filter((m) => m === 'ts-kv' || m === 'stock-kv').length === 2,
        120_000,
      );
    }
  }, 300_000);
  afterAll(() => stack?.stop());

  it('the stock frontend routes a repeated prefix to our worker that cached it, from our KV events', async () => {
    const p = prompt(1, 6, 16);
    expect(await cachedTokens(stockFe.url, 'ts-kv', p)).toBe(0);
    // A repeat can land on the right worker by chance (1 in 2) before the router has indexed our
    // events, so each request is checked against what the router itself selected for it.
    await waitFor('the stock router to index our events', async () => (await routed(stockFe, 'ts-kv', [...p, 1, 2])).selected === 6 * 16, 20_000);
    for (let i = 0; i < 4; i++) expect(await routed(stockFe, 'ts-kv', [...p, 10 + i])).toEqual({ cached: 6 * 16, selected: 6 * 16 });
  });

  it('a stock frontend started later recovers what our workers cached, through their recovery endpoint', async () => {
    // Cached through our frontend, before the second stock frontend exists: it never sees these events live.
    const p = prompt(3, 5, 16);
    await cachedTokens(ourFe.url, 'ts-kv', p);
    await waitFor('the prefix cached', async () => (await cachedTokens(ourFe.url, 'ts-kv', [...p, 1])) === 5 * 16, 20_000);
    const late = await stack.stockFrontend(['--router-mode', 'kv']);
    await waitFor(
      'the late frontend to serve our workers',
      async () => (await healthInstances(late.url, 'tskv')).length === 2 && (await listedModels(late.url)).includes('ts-kv'),
      120_000,
    );
    await waitFor('the late router to recover the prefix', async () => (await routed(late, 'ts-kv', [...p, 2])).selected === 5 * 16, 30_000);
    // Our sources are complete: each names its recovery endpoint, as the card's enable_local_indexer promises.
    const text = await (await fetch(`${late.url}/metrics`)).text();
    expect(text).toMatch(/dynamo_component_router_kv_event_source_mismatch_workers\{[^}]*model="ts-kv"[^}]*\} 0/);
  });

  it("our frontend routes a repeated prefix to the stock mocker that cached it, from the mocker's KV events", async () => {
    const p = prompt(2, 4, 64);
    await cachedTokens(ourFe.url, 'stock-kv', p);
    // Our router's only source of overlap is the mocker's events: a repeat must find all 4 blocks.
    await waitFor('our router to index the mocker events', async () => (await routed(ourFe, 'stock-kv', [...p, 7])).selected === 4 * 64, 20_000);
    for (let i = 0; i < 4; i++) expect((await routed(ourFe, 'stock-kv', [...p, 20 + i])).selected).toBe(4 * 64);
  });

  it("our frontend started later recovers what the stock mockers cached, through stock's recovery endpoint", async () => {
    const p = prompt(4, 3, 64);
    await cachedTokens(ourFe.url, 'stock-kv', p);
    const late = await stack.ourFrontend(['--router-mode', 'kv'], { DYN_LOG: 'info' });
    await waitFor(
      'the late frontend to serve the mockers',
      async () => (await healthInstances(late.url, 'backend')).length === 2 && (await listedModels(late.url)).includes('stock-kv'),
      60_000,
    );
    await waitFor(
      'both mockers recovered',
      () =>
        late.child
          .stderr()
          .split('\n')
          .filter((l) => l.includes('KV state recovered from the worker')).length >= 2,
      30_000,
    );
    const metrics = `${late.url}/metrics`;
    await cachedTokens(late.url, 'stock-kv', [...p, 9]);
    expect(await counter(metrics, 'dynamo_component_router_kv_selected_cached_prefix_tokens_total')).toBe(3 * 64);
  });
});
