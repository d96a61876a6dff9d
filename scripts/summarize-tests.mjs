// Sums cargo test and every vitest run into the one closing line CI reads:
// "N passed, N failed" (", N skipped" when any), after one line per runner.
// Usage: summarize-tests.mjs <cargo log> <results dir>, where each folder of the results dir is one
// vitest run (its name is the runner's label) holding the packages' JSON reports (beside their
// *.times.json, which scripts/test-times.mjs reads) and the run's exit status (exit-status).
// Each failed test is named under its runner's line, with its error's first line, so the tail of a
// CI log (often all that is kept) says what failed. Exit 1 if anything failed or nothing ran.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

const [cargoLog, resultsDir] = process.argv.slice(2);
const root = `${process.cwd()}/`;
const total = { passed: 0, failed: 0, skipped: 0 };
const firstLine = (text) =>
  stripVTControlCharacters(String(text ?? ''))
    .trim()
    .split('\n')[0]
    .slice(0, 240);
const line = (c) => `${c.passed} passed, ${c.failed} failed${c.skipped ? `, ${c.skipped} skipped` : ''}`;

function add(label, counts) {
  console.log(`  ${label}: ${line(counts)}`);
  for (const key of Object.keys(total)) total[key] += counts[key];
}

// Steps that are not tests (the type-check gate, the release build) count as one failed test
// each, so an error there cannot hide behind green tests.
const gates = Number(process.env.GATES_FAILED ?? 0);
if (gates > 0) add('failed steps (typecheck, release build)', { passed: 0, failed: gates, skipped: 0 });

const cargo = { passed: 0, failed: 0, skipped: 0 };
for (const m of readFileSync(cargoLog, 'utf8').matchAll(/^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/gm)) {
  cargo.passed += Number(m[1]);
  cargo.failed += Number(m[2]);
  cargo.skipped += Number(m[3]);
}
add('cargo test', cargo);

for (const label of readdirSync(resultsDir).sort()) {
  const dir = join(resultsDir, label);
  if (!statSync(dir).isDirectory()) continue;
  const counts = { passed: 0, failed: 0, skipped: 0 };
  const failures = [];
  const reports = readdirSync(dir).filter((f) => f.endsWith('.json') && !f.endsWith('.times.json'));
  for (const file of reports) {
    const r = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    counts.passed += r.numPassedTests;
    counts.failed += r.numFailedTests;
    counts.skipped += r.numPendingTests + r.numTodoTests;
    // A suite that failed outside its tests (failed to load, or a beforeAll threw and its tests
    // were skipped) counts as one failure, so it cannot pass as skipped.
    for (const suite of r.testResults ?? []) {
      const testFile = suite.name.startsWith(root) ? suite.name.slice(root.length) : suite.name;
      const failed = (suite.assertionResults ?? []).filter((a) => a.status === 'failed');
      for (const a of failed) failures.push(`${testFile} > ${a.fullName}: ${firstLine(a.failureMessages?.[0])}`);
      if (suite.status === 'failed' && failed.length === 0) {
        counts.failed += 1;
        failures.push(`${testFile} (the file failed outside its tests): ${firstLine(suite.message)}`);
      }
    }
  }
  // A run that failed with no failing test to show for it (no report written, a crash between
  // packages) counts as one failure, so the closing line cannot read green.
  const status = Number(readFileSync(join(dir, 'exit-status'), 'utf8'));
  if ((status !== 0 && counts.failed === 0) || reports.length === 0) {
    console.log(`  ${label}: exited ${status} with ${reports.length} reports and no failing test in them: counted as 1 failure`);
    counts.failed += 1;
  }
  add(label, counts);
  for (const failure of failures) console.log(`    FAILED ${failure}`);
}

console.log(line(total));
process.exitCode = total.failed > 0 || total.passed === 0 ? 1 : 0;
