// Benchmark: the full conformance kit against the sample engine with --delay-ms 0.
// Target: under 1 s per run on the 2-core CI machine. Run with `pnpm bench`.
import { conformanceReport } from '@dynamo/backend';
import { SampleEngine } from '../src/index.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const TARGET_MS = 1000;

// Warm-up: loads the native addon and JITs the bridge.
await conformanceReport(() => new SampleEngine({ delayMs: 0 }));

const times: number[] = [];
const perCheck = new Map<string, number[]>();
for (let i = 0; i < RUNS; i++) {
  const began = performance.now();
  const report = await conformanceReport(() => new SampleEngine({ delayMs: 0 }));
  times.push(performance.now() - began);
  if (!report.passed) throw new Error(`conformance failed during the benchmark: ${JSON.stringify(report.checks)}`);
  for (const check of report.checks) perCheck.set(check.name, [...(perCheck.get(check.name) ?? []), check.elapsedMs]);
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number) => sorted(xs)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const median = (xs: number[]) => pct(xs, 50);

console.log(`conformance kit on the sample engine (--delay-ms 0), ${RUNS} runs`);
console.log(`  total per run: median ${median(times).toFixed(2)} ms, p90 ${pct(times, 90).toFixed(2)} ms, max ${Math.max(...times).toFixed(2)} ms`);
for (const [name, xs] of perCheck) console.log(`    ${name.padEnd(22)} median ${median(xs).toFixed(3)} ms`);
const verdict = median(times) < TARGET_MS ? 'PASS' : 'FAIL';
console.log(`  target: median under ${TARGET_MS} ms -> ${verdict}`);
if (verdict === 'FAIL') process.exitCode = 1;
