// Benchmark: KV-aware routing. `pnpm bench` (after the frontend benchmark).
//
//   1. Router decision latency through @dynamo/core (release build), the JS call included: 16
//      workers holding 100,000 cached blocks (fed as real workers feed it: KV event envelopes),
//      requests of 64 blocks with about 256 in flight; p50 / p99 (target p99 <= 200 us), and the
//      index's memory per million cached blocks.
//   2. A shared-prefix workload against 4 dynamo-sample-engine workers simulating a paged prefix
//      cache (--simulate-kv-cache: prefill charged per uncached prompt token) of 256 blocks each
//      (room for about half of the system prompts, as on a busy GPU): 8 system prompts of 1,024 tokens, 512 requests (a system prompt and a 64-token user turn, 16 tokens out) at
//      concurrency 16, through our frontend in `kv` and `round-robin` mode and through the stock
//      1.6.1 frontend in `kv` mode (it reads our workers' KV events), each on fresh workers.
//      Reports the prefix-cache hit rate the workers saw and streamed TTFT p50 / p99.
// The stock row is skipped, saying why, when stock Dynamo cannot be installed.
//
// Knobs: BENCH_KV_REQUESTS=512  BENCH_KV_CONCURRENCY=16  BENCH_KV_PREFILL_MS_PER_TOKEN=0.05  BENCH_KV_BLOCKS=256
import { performance } from 'node:perf_hooks';
import { KvEventBatcher, KvRouter } from '@dynamo/core';

import { waitFor } from '@dynamo/testing/free-port';
import { percentile } from '@dynamo/testing/proc-stats';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { type Frontend, healthInstances, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';

const REQUESTS = Number(process.env.BENCH_KV_REQUESTS ?? 512);
const CONCURRENCY = Number(process.env.BENCH_KV_CONCURRENCY ?? 16);
const PREFILL_MS = Number(process.env.BENCH_KV_PREFILL_MS_PER_TOKEN ?? 0.05);
/** Each worker's cache: room for about 4 of the 8 system prompts, so where a prompt goes matters. */
const KV_BLOCKS = Number(process.env.BENCH_KV_BLOCKS ?? 256);
const WORKERS = 4;
const SYSTEM_PROMPTS = 8;
const SYSTEM_TOKENS = 1024;
const USER_TOKENS = 64;
const OUTPUT_TOKENS = 16;
const BLOCK = 16;

/** A deterministic generator, so every mode gets the same requests in the same order. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

const range = (from: number, length: number) => Array.from({ length }, (_, i) => from + i);

function decisionLatency() {
  const router = new KvRouter({ blockSize: BLOCK });
  const rand = rng(7);
  const workers = range(1, 16).map((id) => ({ workerId: BigInt(id), totalBlocks: 16384 }));
  const batchers = workers.map(({ workerId }) => new KvEventBatcher({ workerId, blockSize: BLOCK }));
  const systemPrompt = (p: number) => range(p * 100_000, 16 * BLOCK);
  let nextBlockId = 1n;
  let r = 0;
  while (router.stats().cachedBlocks < 100_000) {
    const w = Math.floor(rand() * 16);
    const tokens = [...systemPrompt(Math.floor(rand() * 32)), ...range(10_000_000 + r++ * 4096, 48 * BLOCK)];
    const ids = BigUint64Array.from({ length: tokens.length / BLOCK }, () => nextBlockId++);
    batchers[w]!.stored(0, Uint32Array.from(tokens), ids, null);
    router.applyEventEnvelope(batchers[w]!.flush(1n, BigInt(r), Date.now())!);
  }
  const micros: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const tokens = Uint32Array.from([...systemPrompt(Math.floor(rand() * 32)), ...range(20_000_000 + i * 4096, 48 * BLOCK)]);
    const started = performance.now();
    router.route(`req-${i}`, tokens, workers, rand(), Date.now());
    micros.push((performance.now() - started) * 1000);
    // About 256 requests in flight, as on a busy frontend.
    if (i >= 256) router.free(`req-${i - 256}`);
  }
  const stats = router.stats();
  return {
    p50: percentile(micros, 0.5),
    p99: percentile(micros, 0.99),
    blocks: stats.cachedBlocks,
    mibPerMillion: stats.memoryBytes / 2 ** 20 / (stats.cachedBlocks / 1e6),
  };
}

interface RunFigures {
  hitRate: number;
  ttftP50: number;
  ttftP99: number;
  seconds: number;
}

/** The workload's requests: a system prompt (one of 8) then a user turn of its own. */
function workload(): number[][] {
  const rand = rng(42);
  // Token ids stay below the test model's vocabulary (151,936).
  const systems = range(0, SYSTEM_PROMPTS).map((p) => range(1000 + p * 10_000, SYSTEM_TOKENS));
  return range(0, REQUESTS).map((i) => [...systems[Math.floor(rand() * SYSTEM_PROMPTS)]!, ...range(90_000 + ((i * USER_TOKENS) % 60_000), USER_TOKENS)]);
}

/** Streams one completion; returns its TTFT (ms) and the prompt tokens the worker found cached. */
async function streamOne(url: string, model: string, prompt: number[]): Promise<{ ttft: number; cached: number; promptTokens: number }> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: OUTPUT_TOKENS, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let ttft = -1;
  let text = '';
  for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
    if (ttft < 0 && chunk.includes('"text"')) ttft = performance.now() - started;
    text += chunk;
  }
  const usage = text
    .split('\n\n')
    .filter((b) => b.startsWith('data: {'))
    .map((b) => JSON.parse(b.slice(6)) as { usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } })
    .find((c) => c.usage)?.usage;
  if (!usage) throw new Error('the stream carried no usage chunk');
  return { ttft, cached: usage.prompt_tokens_details?.cached_tokens ?? 0, promptTokens: usage.prompt_tokens };
}

async function drive(url: string, model: string): Promise<RunFigures> {
  const requests = workload();
  const ttfts: number[] = [];
  let cached = 0;
  let total = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    range(0, CONCURRENCY).map(async () => {
      while (next < requests.length) {
        const r = await streamOne(url, model, requests[next++]!);
        ttfts.push(r.ttft);
        cached += r.cached;
        total += r.promptTokens;
      }
    }),
  );
  return { hitRate: cached / total, ttftP50: percentile(ttfts, 0.5), ttftP99: percentile(ttfts, 0.99), seconds: (performance.now() - started) / 1000 };
}

/** Runs the workload through one frontend on 4 fresh workers of their own component. */
async function run(stack: InteropStack, label: string, start: () => Promise<Frontend>, component: string): Promise<RunFigures> {
  const model = `kv-${component}`;
  const args = [
    '--simulate-kv-cache',
    '--kv-block-size',
    String(BLOCK),
    '--total-kv-blocks',
    String(KV_BLOCKS),
    '--delay-ms',
    '1',
    '--prefill-ms-per-token',
    String(PREFILL_MS),
  ];
  const workers = range(0, WORKERS).map(() => stack.ourSample(model, component, args));
  const frontend = await start();
  await waitFor(
    `${label}: ${WORKERS} workers`,
    async () => (await healthInstances(frontend.url, component)).length === WORKERS && (await listedModels(frontend.url)).includes(model),
    120_000,
  );
  // Each mode gets a cold cache: one warm-up request on an unrelated prompt, then the workload.
  await streamOne(frontend.url, model, range(150_000, 64));
  const figures = await drive(frontend.url, model);
  for (const w of workers) w.kill();
  frontend.child.kill();
  return figures;
}

const latency = decisionLatency();
console.log('\nKV router decision latency (@dynamo/core, 16 workers, 64-block requests, ~256 in flight)');
console.log(
  `  cached blocks ${latency.blocks}: p50 ${latency.p50.toFixed(1)} us, p99 ${latency.p99.toFixed(1)} us (target <= 200 us: ${latency.p99 <= 200 ? 'PASS' : 'FAIL'})`,
);
console.log(`  index memory: ${latency.mibPerMillion.toFixed(1)} MiB per million cached blocks`);

const stock = stockPython();
const stack = await InteropStack.start(MATRIX_SETUPS[0]!, 'skip' in stock ? '' : stock.python);
try {
  const rows: Array<[string, RunFigures | string]> = [];
  rows.push(['ours, kv', await run(stack, 'ours kv', () => stack.ourFrontend(['--router-mode', 'kv']), 'kvours')]);
  rows.push(['ours, round-robin', await run(stack, 'ours round-robin', () => stack.ourFrontend(['--router-mode', 'round-robin']), 'kvrr')]);
  rows.push([
    'stock 1.6.1, kv',
    'skip' in stock ? `skipped: ${stock.skip}` : await run(stack, 'stock kv', () => stack.stockFrontend(['--router-mode', 'kv']), 'kvstock'),
  ]);
  console.log(
    `\nShared-prefix workload: ${SYSTEM_PROMPTS} system prompts of ${SYSTEM_TOKENS} tokens, ${REQUESTS} requests, concurrency ${CONCURRENCY}, ${WORKERS} simulated-KV workers of ${KV_BLOCKS} blocks (prefill ${PREFILL_MS} ms per uncached token)`,
  );
  console.log('| frontend, router | hit rate | TTFT p50 ms | TTFT p99 ms | wall s |');
  console.log('|---|---|---|---|---|');
  for (const [name, f] of rows) {
    console.log(
      typeof f === 'string'
        ? `| ${name} | ${f} | | | |`
        : `| ${name} | ${(f.hitRate * 100).toFixed(1)}% | ${f.ttftP50.toFixed(1)} | ${f.ttftP99.toFixed(1)} | ${f.seconds.toFixed(1)} |`,
    );
  }
  const kv = rows[0]![1] as RunFigures;
  const rr = rows[1]![1] as RunFigures;
  console.log(
    `\nkv vs round-robin: TTFT p50 ${(rr.ttftP50 / kv.ttftP50).toFixed(2)}x lower, p99 ${(rr.ttftP99 / kv.ttftP99).toFixed(2)}x lower, hit rate ${(kv.hitRate / rr.hitRate).toFixed(2)}x`,
  );
} finally {
  await stack.stop();
}
