// `pnpm bench:compare`: stock Dynamo 1.6.1 and ours side by side on this machine, in one run. The
// four pairings of frontend (stock `python -m dynamo.frontend`, our dynamo-frontend) and worker (the
// stock sample engine, our dynamo-sample-engine), under aiperf 0.13.0 (streaming chat, ISL 128,
// OSL 256): concurrency 1 and 64, engines at zero delay and paced at 10 ms a token, with the
// stack pinned to cpu0 and aiperf to cpu1, and concurrency 1 and 64 at a fixed request rate. The same
// request count for each pairing; pairings are interleaved in a rotating order and the whole set
// repeated (BENCH_ROUNDS, default 2), so drift on this machine shows and hits every pairing alike;
// figures are medians over the rounds. CPU is cut to aiperf's profiling window. Writes
// bench/results/compare.{md,json,png}.
//
// Knobs: BENCH_ROUNDS=2  BENCH_SCALE=1 (multiplies every request count)  BENCH_ONLY=c64,c1 (a subset
// of the scenarios, by id: the report is printed, bench/results/ is left as it is)
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SingleBar } from 'cli-progress';

import { modelDir } from '@dynamo/testing/frontend-stack';
import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { type Frontend, InteropStack, listedModels, MATRIX_SETUPS } from '@dynamo/testing/interop-stack';
import { type AiperfResult, ISL, OSL, runAiperf } from './aiperf.js';
import { type ChartPoint, renderChart } from './chart.js';
import { type Figures, markdown, type Measurement, medians, type Pairing, PAIRINGS, pairingName, type Results, type Scenario, type Side } from './report.js';
import { ProcessSampler } from './sampler.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const scale = Number(process.env.BENCH_SCALE ?? 1);
const count = (n: number) => Math.max(1, Math.round(n * scale));
const ALL_SCENARIOS: Scenario[] = [
  { id: 'c64', title: 'Concurrency 64, engines at zero delay', concurrency: 64, requests: count(640), paced: false, pinned: false, fresh: false },
  {
    id: 'c64-pinned',
    title: 'Concurrency 64, zero delay, stack pinned to cpu0 and aiperf to cpu1',
    concurrency: 64,
    requests: count(640),
    paced: false,
    pinned: true,
    fresh: false,
  },
  { id: 'c1', title: 'Concurrency 1, zero delay, kept connections', concurrency: 1, requests: count(100), paced: false, pinned: false, fresh: false },
  {
    id: 'c1-fresh',
    title: 'Concurrency 1, zero delay, a new connection per request',
    concurrency: 1,
    requests: count(100),
    paced: false,
    pinned: false,
    fresh: true,
  },
  {
    id: 'c1-fresh-rated',
    title: 'Concurrency 1, zero delay, a new connection per request, 5 requests/s for every pairing',
    concurrency: 1,
    requests: count(100),
    paced: false,
    pinned: false,
    fresh: true,
    rate: 5,
  },
  // c64's TTFT rows compare our pipeline at ~8× stock's request rate, on two cores it shares with
  // aiperf: this is TTFT with every pairing offered the same load, below what stock serves at c64.
  {
    id: 'c64-rated',
    title: 'Concurrency up to 64, zero delay, 20 requests/s for every pairing',
    concurrency: 64,
    requests: count(320),
    paced: false,
    pinned: false,
    fresh: false,
    rate: 20,
  },
  { id: 'c64-paced', title: 'Concurrency 64, engines paced at 10 ms a token', concurrency: 64, requests: count(128), paced: true, pinned: false, fresh: false },
  { id: 'c1-paced', title: 'Concurrency 1, engines paced at 10 ms a token', concurrency: 1, requests: count(8), paced: true, pinned: false, fresh: false },
  // How the frontend's cost grows with streams: four times c64-paced's.
  {
    id: 'c256-paced',
    title: 'Concurrency 256, engines paced at 10 ms a token',
    concurrency: 256,
    requests: count(512),
    paced: true,
    pinned: false,
    fresh: false,
  },
];
const only = process.env.BENCH_ONLY?.split(',').filter(Boolean);
const unknown = only?.filter((id) => !ALL_SCENARIOS.some((s) => s.id === id));
if (unknown?.length) {
  console.error(`BENCH_ONLY names no scenario ${unknown.join(', ')}; the scenarios are ${ALL_SCENARIOS.map((s) => s.id).join(', ')}`);
  process.exit(2);
}
const SCENARIOS = only ? ALL_SCENARIOS.filter((s) => only.includes(s.id)) : ALL_SCENARIOS;
const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

// The stock release and aiperf, from the test-only venv.
process.env.DYNAMO_INTEROP_EXTRA = [process.env.DYNAMO_INTEROP_EXTRA, 'aiperf==0.13.0'].filter(Boolean).join(' ');
const stock = stockPython();
if ('skip' in stock) {
  console.error(`bench:compare needs stock Dynamo 1.6.1 and aiperf from PyPI: ${stock.skip}`);
  process.exit(1);
}
const python = stock.python;

/** aiperf's figures that the report shows. */
const pickFigures = ({ requestsPerSec, outputTokensPerSec, ttftP50, ttftP99, itlP50, itlP99 }: AiperfResult) => ({
  requestsPerSec,
  outputTokensPerSec,
  ttftP50,
  ttftP99,
  itlP50,
  itlP99,
});

/** Sets the CPUs of every thread of each process. */
function pin(pids: number[], cpuList: string): void {
  for (const pid of pids) {
    const r = spawnSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`taskset -a -p -c ${cpuList} ${pid} failed: ${r.stderr || r.error?.message}`);
  }
}

const stack = await InteropStack.start(MATRIX_SETUPS[0]!, python);
const artifacts = mkdtempSync(join(tmpdir(), 'bench-compare-'));
try {
  // The stock sample engine serves its model folder's path as the model's name: a folder each.
  const stockFast = qwen3ModelDir();
  const stockPaced = qwen3ModelDir();
  const workers: Record<Side, Record<'fast' | 'paced', { child: Child; model: string }>> = {
    stock: {
      fast: { child: stack.stockSample(stockFast, 'stock-fast', ['--delay', '0']), model: stockFast },
      paced: { child: stack.stockSample(stockPaced, 'stock-paced', ['--delay', '0.01']), model: stockPaced },
    },
    ours: {
      fast: { child: stack.ourSample('ours-fast', 'ours-fast', ['--delay-ms', '0']), model: 'ours-fast' },
      paced: { child: stack.ourSample('ours-paced', 'ours-paced', ['--delay-ms', '10']), model: 'ours-paced' },
    },
  };
  const [stockFe, ourFe] = await Promise.all([stack.stockFrontend(), stack.ourFrontend([], { DYN_LOG: 'info' })]);
  const frontends: Record<Side, Frontend> = { stock: stockFe, ours: ourFe };
  const models = Object.values(workers).flatMap((w) => [w.fast.model, w.paced.model]);
  for (const fe of Object.values(frontends)) {
    await waitFor(
      `the ${fe.name} frontend to list every model`,
      async () => ((listed) => models.every((m) => listed.includes(m)))(await listedModels(fe.url)),
      120_000,
    );
  }

  async function measure(s: Scenario, p: Pairing, round: number): Promise<Measurement> {
    const fe = frontends[p.frontend];
    const worker = workers[p.worker][s.paced ? 'paced' : 'fast'];
    const pids = [fe.child.child.pid!, worker.child.child.pid!];
    if (s.pinned) pin(pids, '0');
    const sampler = new ProcessSampler(pids);
    try {
      const artifactDir = join(artifacts, `${s.id}-${p.frontend}-${p.worker}-${round}`);
      const result = await runAiperf(python, {
        url: fe.url,
        model: worker.model,
        tokenizer: modelDir,
        concurrency: s.concurrency,
        requests: s.requests,
        artifactDir,
        ...(s.pinned ? { cpus: '1' } : {}),
        fresh: s.fresh,
        ...(s.rate === undefined ? {} : { rate: s.rate }),
      });
      sampler.end();
      const usage = sampler.usage(result.startNs, result.endNs);
      if (result.errors > 0) console.warn(`\n${pairingName(p)}, ${s.id}: aiperf counted ${result.errors} failed requests`);
      return {
        aiperf: result,
        ...pickFigures(result),
        feCpuMsPerRequest: usage.cpuMs[0]! / result.requests,
        workerCpuMsPerRequest: usage.cpuMs[1]! / result.requests,
        feRssMiB: usage.peakRssMiB[0]!,
        workerRssMiB: usage.peakRssMiB[1]!,
      };
    } finally {
      sampler.end();
      if (s.pinned) pin(pids, `0-${cpus().length - 1}`);
    }
  }

  const runs: Array<{ round: number; scenario: string; pairing: string; measurement: Measurement }> = [];
  const total = rounds * SCENARIOS.length * PAIRINGS.length;
  const bar = process.stdout.isTTY
    ? new SingleBar({ format: 'bench:compare [{bar}] {value}/{total} | ETA {eta_formatted} | {step}', hideCursor: true })
    : undefined;
  bar?.start(total, 0, { step: 'starting' });
  for (let round = 0; round < rounds; round++) {
    for (const s of SCENARIOS) {
      // Rotate the order each round, so no pairing always runs first or last.
      const order = PAIRINGS.map((_, i) => PAIRINGS[(i + round) % PAIRINGS.length]!);
      for (const p of order) {
        const step = `round ${round + 1}/${rounds}, ${s.id}, ${pairingName(p)}`;
        bar?.update({ step });
        if (!bar) console.log(`bench:compare ${runs.length + 1}/${total}: ${step}`);
        runs.push({ round, scenario: s.id, pairing: pairingName(p), measurement: await measure(s, p, round) });
        bar?.increment();
      }
    }
  }
  bar?.stop();

  const results: Results = new Map(
    SCENARIOS.map((s) => [
      s.id,
      new Map(
        PAIRINGS.map((p) => [pairingName(p), medians(runs.filter((r) => r.scenario === s.id && r.pairing === pairingName(p)).map((r) => r.measurement))]),
      ),
    ]),
  );
  const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const header = [
    '# bench:compare: stock Dynamo 1.6.1 and Dynamo for TypeScript, side by side',
    '',
    `${when}, ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}. aiperf 0.13.0: streaming chat, ISL ${ISL}, OSL ${OSL} (ignore_eos, min_tokens),`,
    `server token counts; file discovery + tcp on loopback; both frontends round-robin at their default log level (info). Figures are medians over ${rounds} rounds;`,
    "CPU ms per request is each process's user+system CPU over aiperf's profiling window divided by the requests completed, which does not depend on",
    'how fast the client is (aiperf itself needs about a core here). RSS is the peak in that window. Ratios in brackets are to the all-stock pairing.',
    'Frontend + worker: `stock` is `python -m dynamo.frontend` / `dynamo.common.backend.sample_main`, `ours` is `dynamo-frontend` / `dynamo-sample-engine`.',
  ];
  const report = markdown(results, SCENARIOS, header);
  if (only) {
    console.log(`\n${report}\n(BENCH_ONLY: bench/results/ left as it is)`);
  } else {
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(join(resultsDir, 'compare.md'), report);
    writeFileSync(join(resultsDir, 'compare.json'), `${JSON.stringify({ when, rounds, scenarios: SCENARIOS, runs }, null, 1)}\n`);
    const charted: Array<[keyof Figures, string]> = [
      ['feCpuMsPerRequest', 'frontend CPU ms/req'],
      ['workerCpuMsPerRequest', 'worker CPU ms/req'],
      ['outputTokensPerSec', 'output tokens/s'],
      ['ttftP50', 'TTFT p50 ms'],
      ['itlP50', 'ITL p50 ms'],
    ];
    const points: ChartPoint[] = ['c64', 'c64-pinned', 'c1-fresh-rated', 'c64-paced'].flatMap((id) =>
      charted.flatMap(([figure, metric]) =>
        PAIRINGS.map((p) => ({ scenario: id, metric, pairing: pairingName(p), value: results.get(id)!.get(pairingName(p))![figure] })),
      ),
    );
    writeFileSync(
      join(resultsDir, 'compare.png'),
      await renderChart(points, `bench:compare, ${when}: stock Dynamo 1.6.1 vs ours (frontend + worker), medians of ${rounds} rounds`),
    );
    console.log(`\n${report}\nwrote ${join(resultsDir, 'compare.md')}, compare.json and compare.png`);
  }
} finally {
  await stack.stop();
  rmSync(artifacts, { recursive: true, force: true });
}
