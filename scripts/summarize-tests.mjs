// Sums cargo test and vitest results into the one closing line CI reads:
// "N passed, N failed" (", N skipped" when any). Exit 1 if anything failed or nothing ran.
import { readFileSync } from 'node:fs';

const [cargoLog, ...vitestJson] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;

// The type-check gate counts as one failed test so a type error cannot hide behind green tests.
failed += Number(process.env.TYPECHECK_FAILED ?? 0);

for (const m of readFileSync(cargoLog, 'utf8').matchAll(/^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/gm)) {
  passed += Number(m[1]);
  failed += Number(m[2]);
  skipped += Number(m[3]);
}
for (const file of vitestJson) {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + r.numTodoTests;
  // A suite that failed outside its tests (failed to load, or a beforeAll threw and its tests were
  // skipped) counts as one failure, so it cannot pass as skipped.
  failed += (r.testResults ?? []).filter((t) => t.status === 'failed' && !(t.assertionResults ?? []).some((a) => a.status === 'failed')).length;
}

console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exitCode = failed > 0 || passed === 0 ? 1 : 0;
