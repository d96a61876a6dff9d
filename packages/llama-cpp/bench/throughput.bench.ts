// Benchmark: output tokens/s of SmolLM2-135M (Q4_1, CPU) three ways, in the same run on the same
// machine: node-llama-cpp alone (in this process, a context with --parallel sequences, the same
// prompt ids our Preprocessor makes, greedy, every request generating OSL tokens: the limit), our
// dynamo-frontend + dynamo-llama-cpp, and the stock Dynamo 1.6.1 frontend + the same
// dynamo-llama-cpp worker (file discovery + tcp), at concurrency 1 and 8. The three take turns
// within each round (in alternating order), and each ratio is taken within a round, then the
// median over the rounds: a shared VM's speed drifts by 20% or more between minutes, which
// comparing medians of whole runs would mistake for the pipeline's cost. Targets: ours >= 0.95x
// the engine alone at c=8, and ours >= stock's frontend at both. The worker runs without its prefix
// cache (--no-enable-prefix-caching): the engine alone evaluates every prompt whole, and so must it
// for the ratio to measure the pipeline rather than the cache. Writes bench/results.md and
// bench/results.json (results.pinned.* with BENCH_PIN=1) and prints the table. `pnpm --filter @dynamo/llama-cpp bench`.
//
// Knobs: BENCH_ROUNDS=7  BENCH_OSL=64  BENCH_REQUESTS_PER_SLOT=2 (requests per round = c x this)
// BENCH_PIN=1 (Linux, taskset): the engine on the last core, everything else on the others, to
// tell the pipeline's own cost from its processes taking the engine's core.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type LlamaContextSequence, type Token } from 'node-llama-cpp';

import { Deployment, waitForModel } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { median } from '@dynamo/testing/proc-stats';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { smolLm2 } from '../../../scripts/test-model.mjs';
import { defaultThreads } from '../src/index.js';
import { eogBan } from '../src/sampling.js';
import { gateSampling } from '../src/internals.js';

const here = dirname(fileURLToPath(import.meta.url));
const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const OSL = Number(process.env.BENCH_OSL ?? 64);
const perSlot = Number(process.env.BENCH_REQUESTS_PER_SLOT ?? 2);
const pin = process.env.BENCH_PIN === '1';
const CONCURRENCIES = [1, 8];
const PARALLEL = Math.max(...CONCURRENCIES);
const CONTEXT = 1024;
const MODEL = 'smollm2';
const system = { role: 'system', content: 'You are a helpful assistant.' };
const QUESTIONS = [
  'Tell me about the sea.',
  'Explain how bees make honey.',
  'Describe a city at night.',
  'Write about a long train journey.',
  'What makes a good friend?',
  'Describe the four seasons.',
  'Tell a story about a robot.',
  'Explain why the sky is blue.',
];

type Way = 'alone' | 'ours' | 'stock';
const lastCpu = cpus().length - 1;
const ENGINE_CPUS = String(lastCpu);
const OTHER_CPUS = lastCpu > 0 ? `0-${lastCpu - 1}` : '0';
/** Moves every thread of process `pid` onto `cpuList` (threads it starts later inherit it). */
function pinProcess(pid: number | undefined, cpuList: string): void {
  if (pin && pid !== undefined) execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
}
const f = (x: number, digits = 0) => x.toFixed(digits);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

/** Runs `count` jobs with at most `limit` at once; the output tokens/s over the whole batch. */
async function tokensPerSecond(count: number, limit: number, job: (i: number) => Promise<number>): Promise<number> {
  let next = 0;
  let tokens = 0;
  const began = performance.now();
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < count) {
        const made = await job(next++);
        tokens += made;
      }
    }),
  );
  return tokens / ((performance.now() - began) / 1000);
}

const modelPath = await smolLm2();
const local = await LocalModel.load(modelPath);
const pre = await Preprocessor.create(local, buildCard(local, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
const bodies = QUESTIONS.map((content) => ({ model: MODEL, messages: [system, { role: 'user', content }], temperature: 0, max_tokens: OSL, min_tokens: OSL }));
const promptIds = await Promise.all(bodies.map(async (b) => (await pre.preprocessChat(b)).request.token_ids as Token[]));

// The engine alone: what the worker does per request, with nothing around it.
const llama = await getLlama({ gpu: false, build: 'never' });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ sequences: PARALLEL, threads: defaultThreads(), contextSize: CONTEXT });
// One sample at a time, as the worker samples, so each sequence reads its own logits.
gateSampling(context);
const free: LlamaContextSequence[] = Array.from({ length: PARALLEL }, () => context.getSequence());
const noEog = eogBan(model);
async function alone(i: number): Promise<number> {
  const sequence = free.pop()!;
  let count = 0;
  // Greedy over the biased logits (top_k 1), as the worker samples a request that may not end early.
  for await (const _token of sequence.evaluate(promptIds[i % promptIds.length]!, { temperature: 1, topK: 1, tokenBias: noEog })) if (++count >= OSL) break;
  await sequence.clearHistory();
  free.push(sequence);
  return count;
}

const loopback = { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1' };
const deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, loopback);
const results: Record<number, Record<Way, number[]>> = {};
try {
  const worker = deployment.nodeProcess([
    join(here, '..', 'dist', 'cli.cjs'),
    '--model-path',
    modelPath,
    '--model-name',
    MODEL,
    '--parallel',
    String(PARALLEL),
    '--max-queued',
    '64',
    '--context-size',
    String(CONTEXT),
    '--no-enable-prefix-caching',
  ]);
  const ours = await deployment.frontend();
  const urls: Partial<Record<Way, string>> = { ours: ours.url };
  const pinned = [ours.child.child.pid];
  const stock = stockPython();
  if ('skip' in stock) console.log(`stock frontend: not measured (${stock.skip})`);
  else {
    const stockFrontend = await deployment.stockFrontend(stock.python);
    pinned.push(stockFrontend.child.child.pid);
    urls.stock = stockFrontend.url;
  }
  await waitForModel(urls.ours!, MODEL, 'llama', 1, 120_000);
  if (urls.stock)
    await waitFor(
      'the stock frontend to list the model',
      async () => ((await (await fetch(`${urls.stock}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.some((m) => m.id === MODEL),
      150_000,
    );
  // Started threads only are moved: everything is up by now.
  pinProcess(worker.child.pid, ENGINE_CPUS);
  for (const pid of [...pinned, process.pid]) pinProcess(pid, OTHER_CPUS);

  const http = (url: string) => async (i: number) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(bodies[i % bodies.length]),
    });
    const body = (await res.json()) as { usage?: { completion_tokens: number } };
    if (res.status !== 200 || body.usage?.completion_tokens !== OSL) throw new Error(`${url}: status ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
    return body.usage.completion_tokens;
  };
  const ways: Array<[Way, (i: number) => Promise<number>]> = [
    ['alone', alone],
    ['ours', http(urls.ours!)],
    ...(urls.stock ? [['stock', http(urls.stock)] as [Way, (i: number) => Promise<number>]] : []),
  ];
  // A warm-up of each, so no figure carries a first request's setup.
  for (const [, job] of ways) await tokensPerSecond(PARALLEL, PARALLEL, job);
  for (const c of CONCURRENCIES) results[c] = { alone: [], ours: [], stock: [] };
  for (let round = 0; round < rounds; round++) {
    for (const c of CONCURRENCIES) {
      for (const [way, job] of round % 2 ? [...ways].reverse() : ways) {
        // Alone, this process is the engine: it gets the engine's core.
        if (way === 'alone') pinProcess(process.pid, ENGINE_CPUS);
        results[c]![way].push(await tokensPerSecond(c * perSlot, c, job));
        if (way === 'alone') pinProcess(process.pid, OTHER_CPUS);
      }
    }
  }
} finally {
  deployment.stop();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

const lines = [
  `SmolLM2-135M-Instruct Q4_1 on the CPU (${defaultThreads()} llama.cpp thread(s) on ${cpus().length} cores, ${cpus()[0]?.model ?? 'unknown CPU'}${pin ? `; pinned: the engine on core ${ENGINE_CPUS}, the rest on ${OTHER_CPUS}` : ''}), --parallel ${PARALLEL}, ${OSL} output tokens per request (min_tokens = max_tokens), greedy, ${new Date().toISOString().slice(0, 10)}. Output tokens/s: medians of ${rounds} rounds of c x ${perSlot} requests each way; ratios: medians of the ratios within each round.`,
  '',
  '| concurrency | node-llama-cpp alone | our frontend + dynamo-llama-cpp | stock 1.6.1 frontend + dynamo-llama-cpp | ours / stock | targets |',
  '| --- | ---: | ---: | ---: | ---: | --- |',
];
const verdicts: Record<string, boolean> = {};
/** The median over rounds of `a`'s figure over `b`'s in the same round. */
const ratio = (rows: Record<Way, number[]>, a: Way, b: Way) => (rows[a].length && rows[b].length ? median(rows[a].map((x, i) => x / rows[b][i]!)) : Number.NaN);
for (const c of CONCURRENCIES) {
  const rows = results[c]!;
  const m = (w: Way) => (rows[w].length ? median(rows[w]) : Number.NaN);
  const oursAlone = ratio(rows, 'ours', 'alone');
  const stockAlone = ratio(rows, 'stock', 'alone');
  const oursStock = ratio(rows, 'ours', 'stock');
  const targets: string[] = [];
  if (c === PARALLEL) {
    verdicts[`c=${c}: ours >= 0.95x alone`] = oursAlone >= 0.95;
    targets.push(`ours >= 0.95x alone: ${verdict(oursAlone >= 0.95)}`);
  }
  if (!Number.isNaN(oursStock)) {
    verdicts[`c=${c}: ours >= stock`] = oursStock >= 1;
    targets.push(`ours >= stock: ${verdict(oursStock >= 1)}`);
  }
  const stockCell = Number.isNaN(stockAlone) ? 'not measured' : `${f(m('stock'), 1)} (${f(stockAlone, 3)}x)`;
  lines.push(
    `| ${c} | ${f(m('alone'), 1)} | ${f(m('ours'), 1)} (${f(oursAlone, 3)}x) | ${stockCell} | ${Number.isNaN(oursStock) ? '-' : `${f(oursStock, 3)}x`} | ${targets.join('; ')} |`,
  );
}
const report = lines.join('\n');
console.log(`\n${report}\n`);
const stem = pin ? 'results.pinned' : 'results';
writeFileSync(
  join(here, `${stem}.md`),
  `# dynamo-llama-cpp throughput${pin ? ', pinned' : ''}\n\nWritten by \`${pin ? 'BENCH_PIN=1 ' : ''}pnpm --filter @dynamo/llama-cpp bench\` (bench/throughput.bench.ts).\n\n${report}\n`,
);
writeFileSync(join(here, `${stem}.json`), `${JSON.stringify({ osl: OSL, parallel: PARALLEL, rounds, perSlot, results, verdicts }, null, 1)}\n`);
