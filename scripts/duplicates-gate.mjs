// The CI gate on repeated code: runs the `duplicates` command (pairs of places sharing six or more
// lines, boilerplate aside) over the tree and fails when a pair of files repeats itself more often
// than the baseline in .ci/duplicates-baseline.txt allows. `--write` records the current pairs
// after a deliberate change (review the rows first). Where `duplicates` is not installed the gate
// says so and passes: it is a tool of this workplace, not a dependency of the project.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const baselinePath = join(root, '.ci', 'duplicates-baseline.txt');

if (spawnSync('duplicates', ['--help'], { stdio: 'ignore' }).error) {
  console.log('duplicates gate: the `duplicates` command is not on PATH here; skipped');
  process.exit(0);
}

const out = execFileSync('duplicates', ['--most', '200', '--seconds', '300', '--repo', root], { encoding: 'utf8' });
if (/^incomplete:/m.test(out)) {
  console.error(`duplicates gate: the scan did not finish:\n${out}`);
  process.exit(1);
}
/** `a ~ b` (files only, so line moves do not count as new) → the rows that pair them. */
const pairs = new Map();
const rows = new Map();
for (const line of out.split('\n')) {
  const m = /^D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+/.exec(line);
  // Rows the tool marks boilerplate share only a thin shape (closing braces, a test's opening
  // lines); they are not code to share.
  if (!m || / boilerplate\b/.test(line)) continue;
  const key = `${m[1]} ~ ${m[2]}`;
  pairs.set(key, (pairs.get(key) ?? 0) + 1);
  rows.set(key, [...(rows.get(key) ?? []), line]);
}

if (process.argv.includes('--write')) {
  const lines = [...pairs].sort(([a], [b]) => a.localeCompare(b)).map(([key, n]) => `${n} ${key}`);
  writeFileSync(
    baselinePath,
    `# Pairs of files that repeat six or more lines today (count, pair); scripts/duplicates-gate.mjs --write.\n${lines.join('\n')}\n`,
  );
  console.log(`duplicates gate: recorded ${pairs.size} pairs`);
  process.exit(0);
}

const allowed = new Map();
if (existsSync(baselinePath)) {
  for (const line of readFileSync(baselinePath, 'utf8').split('\n')) {
    const m = /^(\d+) (.+)$/.exec(line);
    if (m) allowed.set(m[2], Number(m[1]));
  }
}
const added = [...pairs].filter(([key, n]) => n > (allowed.get(key) ?? 0));
if (added.length === 0) {
  console.log(`duplicates gate: no new repeats (${pairs.size} known pairs)`);
  process.exit(0);
}
console.error('duplicates gate: new repeats of six or more lines; share the code, or if the repeat is right, run `node scripts/duplicates-gate.mjs --write`:');
for (const [key] of added) for (const row of rows.get(key)) console.error(`  ${row}`);
process.exit(1);
