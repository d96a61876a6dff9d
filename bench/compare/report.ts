import type { AiperfResult } from './aiperf.js';
import { median } from '@dynamo/testing/proc-stats';

export type Side = 'stock' | 'ours';

/** A frontend in front of a worker. */
export interface Pairing {
  frontend: Side;
  worker: Side;
}

export const PAIRINGS: Pairing[] = [
  { frontend: 'stock', worker: 'stock' },
  { frontend: 'stock', worker: 'ours' },
  { frontend: 'ours', worker: 'stock' },
  { frontend: 'ours', worker: 'ours' },
];

export const pairingName = (p: Pairing): string => `${p.frontend} + ${p.worker}`;

/** A load: how many requests at what concurrency, on which engines, on which CPUs. */
export interface Scenario {
  id: string;
  title: string;
  concurrency: number;
  requests: number;
  /** Engines at 10 ms per token (for ITL) instead of zero delay. */
  paced: boolean;
  /** The stack on cpu0 and aiperf on cpu1. */
  pinned: boolean;
  /** A new connection per request (the stock frontend leaves Nagle on for kept ones). */
  fresh: boolean;
  /**
   * Requests a second for every pairing, instead of a closed loop. In a closed loop a faster
   * pipeline gets more requests, so aiperf (on the same two cores) takes more CPU from it.
   */
  rate?: number;
}

/** One pairing's figures in one scenario (medians over the rounds): aiperf's, and the processes'. */
export interface Figures extends Pick<AiperfResult, 'requestsPerSec' | 'outputTokensPerSec' | 'ttftP50' | 'ttftP99' | 'itlP50' | 'itlP99'> {
  feCpuMsPerRequest: number;
  workerCpuMsPerRequest: number;
  feRssMiB: number;
  workerRssMiB: number;
}

/** One round's measurement of a pairing in a scenario. */
export interface Measurement extends Figures {
  aiperf: AiperfResult;
}

/** The medians over the rounds of each figure. */
export function medians(rounds: Measurement[]): Figures {
  const m = (key: keyof Figures) => median(rounds.map((r) => r[key]));
  return {
    requestsPerSec: m('requestsPerSec'),
    outputTokensPerSec: m('outputTokensPerSec'),
    ttftP50: m('ttftP50'),
    ttftP99: m('ttftP99'),
    itlP50: m('itlP50'),
    itlP99: m('itlP99'),
    feCpuMsPerRequest: m('feCpuMsPerRequest'),
    workerCpuMsPerRequest: m('workerCpuMsPerRequest'),
    feRssMiB: m('feRssMiB'),
    workerRssMiB: m('workerRssMiB'),
  };
}

/** The results of a whole run, by scenario id and pairing name. */
export type Results = Map<string, Map<string, Figures>>;

/** A target, as a ratio of one pairing's figure to the all-stock pairing's. */
export interface Target {
  what: string;
  scenario: string;
  pairing: Pairing;
  figure: keyof Figures;
  /** The ratio must be at most (`max`) or at least (`min`) this. */
  bound: { max: number } | { min: number };
}

const OURS_FE_STOCK_WORKER: Pairing = { frontend: 'ours', worker: 'stock' };
const STOCK_FE_OURS_WORKER: Pairing = { frontend: 'stock', worker: 'ours' };
const ALL_OURS: Pairing = { frontend: 'ours', worker: 'ours' };

/** TTFT p50 ≤ 1.0× stock's in a scenario that offers every pairing the same request rate. */
function ratedTtft(scenario: string, load: string, pairing: Pairing): Target {
  return { what: `TTFT p50 ${load}, ${pairingName(pairing)}, ≤ 1.0× stock`, scenario, pairing, figure: 'ttftP50', bound: { max: 1 } };
}

/** Issue 32's targets, and the pinned throughput one before it. */
export const TARGETS: Target[] = [
  ...['c64', 'c64-paced', 'c256-paced', 'c1', 'c1-fresh'].map(
    (scenario): Target => ({
      what: "our frontend's CPU per request ≤ 0.6× the stock frontend's, both in front of the stock worker",
      scenario,
      pairing: OURS_FE_STOCK_WORKER,
      figure: 'feCpuMsPerRequest',
      bound: { max: 0.6 },
    }),
  ),
  ...['c64', 'c64-paced'].map(
    (scenario): Target => ({
      what: "our worker's CPU per request ≤ 0.2× the stock sample engine's, both behind the stock frontend",
      scenario,
      pairing: STOCK_FE_OURS_WORKER,
      figure: 'workerCpuMsPerRequest',
      bound: { max: 0.2 },
    }),
  ),
  ...['c64', 'c64-paced'].flatMap((scenario): Target[] => [
    { what: 'TTFT p50, our frontend + our worker, ≤ 1.0× stock', scenario, pairing: ALL_OURS, figure: 'ttftP50', bound: { max: 1 } },
    { what: 'TTFT p99, our frontend + our worker, ≤ 1.0× stock', scenario, pairing: ALL_OURS, figure: 'ttftP99', bound: { max: 1 } },
    { what: 'TTFT p50, the stock frontend + our worker, ≤ 1.0× stock', scenario, pairing: STOCK_FE_OURS_WORKER, figure: 'ttftP50', bound: { max: 1 } },
  ]),
  ...[ALL_OURS, STOCK_FE_OURS_WORKER, OURS_FE_STOCK_WORKER].map((pairing) => ratedTtft('c1-fresh-rated', 'at c=1, fresh connections, 5 req/s', pairing)),
  ...[ALL_OURS, STOCK_FE_OURS_WORKER].map((pairing) => ratedTtft('c64-rated', 'at c≤64, 20 req/s (the same load for all)', pairing)),
  ...['c64', 'c64-paced'].flatMap((scenario): Target[] => [
    {
      what: "our frontend's peak RSS under load ≤ 0.33× the stock frontend's (≤ ~180 MiB), our pipeline vs stock's",
      scenario,
      pairing: ALL_OURS,
      figure: 'feRssMiB',
      bound: { max: 0.33 },
    },
    {
      what: "our worker's peak RSS under load ≤ 1.0× the stock sample engine's, our pipeline vs stock's",
      scenario,
      pairing: ALL_OURS,
      figure: 'workerRssMiB',
      bound: { max: 1 },
    },
  ]),
  {
    what: "our pipeline's output tokens/s ≥ 1.0× stock's, stack pinned to one core",
    scenario: 'c64-pinned',
    pairing: ALL_OURS,
    figure: 'outputTokensPerSec',
    bound: { min: 1 },
  },
];

const STOCK = pairingName({ frontend: 'stock', worker: 'stock' });

/** A target's measured ratio and whether it holds. */
export function checkTarget(results: Results, t: Target): { ratio: number; ok: boolean } {
  const row = results.get(t.scenario)!;
  const ratio = row.get(pairingName(t.pairing))![t.figure] / row.get(STOCK)![t.figure];
  return { ratio, ok: 'max' in t.bound ? ratio <= t.bound.max : ratio >= t.bound.min };
}

const COLUMNS: Array<{ head: string; cell: (f: Figures) => [number, number?]; digits: number }> = [
  { head: 'frontend CPU ms/req', cell: (f) => [f.feCpuMsPerRequest], digits: 2 },
  { head: 'worker CPU ms/req', cell: (f) => [f.workerCpuMsPerRequest], digits: 2 },
  { head: 'req/s', cell: (f) => [f.requestsPerSec], digits: 1 },
  { head: 'output tok/s', cell: (f) => [f.outputTokensPerSec], digits: 0 },
  { head: 'TTFT p50 / p99 ms', cell: (f) => [f.ttftP50, f.ttftP99], digits: 1 },
  { head: 'ITL p50 / p99 ms', cell: (f) => [f.itlP50, f.itlP99], digits: 2 },
  { head: 'frontend RSS MiB', cell: (f) => [f.feRssMiB], digits: 0 },
  { head: 'worker RSS MiB', cell: (f) => [f.workerRssMiB], digits: 0 },
];

/** The markdown report: the targets, then a table per scenario with each figure's ratio to all-stock. */
export function markdown(results: Results, scenarios: Scenario[], header: string[]): string {
  const lines = [...header, '', '## Targets (ratios to the all-stock pairing)', '', '| target | scenario | ratio | |', '|---|---|---|---|'];
  for (const t of TARGETS) {
    if (!results.has(t.scenario)) continue;
    const { ratio, ok } = checkTarget(results, t);
    lines.push(`| ${t.what} | ${t.scenario} | ${ratio.toFixed(2)}× | ${ok ? 'PASS' : 'FAIL'} |`);
  }
  for (const s of scenarios) {
    const row = results.get(s.id)!;
    const stock = row.get(STOCK)!;
    lines.push(
      '',
      `## ${s.title} (\`${s.id}\`, ${s.requests} requests a pairing a round)`,
      '',
      `| frontend + worker | ${COLUMNS.map((c) => c.head).join(' | ')} |`,
      `|---|${COLUMNS.map(() => '---:').join('|')}|`,
    );
    for (const p of PAIRINGS) {
      const f = row.get(pairingName(p))!;
      const cells = COLUMNS.map((c) => {
        const [v, v99] = c.cell(f);
        const text = v99 === undefined ? v.toFixed(c.digits) : `${v.toFixed(c.digits)} / ${v99.toFixed(c.digits)}`;
        const base = c.cell(stock)[0];
        return p === PAIRINGS[0] || base === 0 ? text : `${text} (${(v / base).toFixed(2)}×)`;
      });
      lines.push(`| ${pairingName(p)} | ${cells.join(' | ')} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}
