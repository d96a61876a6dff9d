// Prints where the vitest time went: one row per test file, its wall time in each vitest run
// (import, hooks and tests, with the number of tests that ran), slowest first, then each package's
// total. Runs whose labels agree up to a colon ("vitest, Node 20: test/", "vitest, Node 20:
// packages") share a column: the lanes of one pass. Runs side by side, or a package whose config
// runs files side by side, spend less wall time than these sums.
// Usage: test-times.mjs <results dir> [--markdown] [--min <seconds>]
//   <results dir> holds one folder per vitest run (named for the run) with the *.times.json files
//   of scripts/vitest-file-times.mjs, as scripts/test.sh leaves them. Files under --min seconds
//   (default 3) in every run are summed into one row per package. --markdown prints a Markdown
//   table (for docs/ci.md).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { markdown: { type: 'boolean' }, min: { type: 'string', default: '3' } } });
const [resultsDir] = positionals;
const markdown = values.markdown === true;
const minSeconds = Number(values.min);
if (!resultsDir) {
  console.error('usage: test-times.mjs <results dir> [--markdown] [--min <seconds>]');
  process.exit(2);
}
const repo = join(fileURLToPath(new URL('.', import.meta.url)), '..');

/** The repository-relative path of a test file, whichever clone the report came from. */
function relativeName(file) {
  const rel = relative(repo, file);
  if (!rel.startsWith('..')) return rel;
  // A report from another clone: keep the path from its first workspace folder on.
  const parts = file.split(sep);
  const at = parts.findIndex((p) => p === 'packages' || p === 'examples' || p === 'test');
  return at >= 0 ? parts.slice(at).join('/') : file;
}
const packageOf = (name) => (name.startsWith('test/') ? 'test' : name.split('/').slice(0, 2).join('/'));

const labels = readdirSync(resultsDir).filter((label) => statSync(join(resultsDir, label)).isDirectory());
const columnOf = (label) => label.split(':')[0];
const columns = [...new Set(labels.map(columnOf))];
/** file → column → { seconds, tests } */
const files = new Map();
for (const label of labels) {
  const run = columnOf(label);
  for (const report of readdirSync(join(resultsDir, label)).filter((f) => f.endsWith('.times.json'))) {
    for (const { file, seconds, tests } of JSON.parse(readFileSync(join(resultsDir, label, report), 'utf8')).files) {
      const name = relativeName(file);
      const row = files.get(name) ?? new Map();
      row.set(run, { seconds, tests });
      files.set(name, row);
    }
  }
}

const seconds = (row, run) => row.get(run)?.seconds ?? 0;
/** The columns, the one with the most time first. */
const columnSeconds = (run) => [...files.values()].reduce((sum, row) => sum + seconds(row, run), 0);
const runs = columns.sort((a, b) => columnSeconds(b) - columnSeconds(a));
/** A row's rank: its longest run. */
const rank = (row) => Math.max(...runs.map((run) => seconds(row, run)));
/** Adds each run's seconds and tests of `row` into `sum` (both run → { seconds, tests }). */
function addInto(sum, row) {
  for (const [run, { seconds, tests }] of row) {
    const cell = sum.get(run) ?? { seconds: 0, tests: 0 };
    sum.set(run, { seconds: cell.seconds + seconds, tests: cell.tests + tests });
  }
}
const shown = [];
/** package → { count, row } of its files under the threshold in every run. */
const small = new Map();
/** package → row of all its files. */
const packages = new Map();
for (const [name, row] of files) {
  const pkg = packageOf(name);
  if (!packages.has(pkg)) packages.set(pkg, new Map());
  addInto(packages.get(pkg), row);
  if (runs.some((run) => seconds(row, run) >= minSeconds)) {
    shown.push([name, row]);
    continue;
  }
  const sum = small.get(pkg) ?? { count: 0, row: new Map() };
  sum.count += 1;
  addInto(sum.row, row);
  small.set(pkg, sum);
}
shown.sort((a, b) => rank(b[1]) - rank(a[1]));
const rows = [
  ...shown,
  ...[...small].sort((a, b) => rank(b[1].row) - rank(a[1].row)).map(([pkg, { count, row }]) => [`${pkg}: ${count} files under ${minSeconds} s`, row]),
];
const everything = new Map();
for (const row of packages.values()) addInto(everything, row);
const packageRows = [...[...packages].sort((a, b) => rank(b[1]) - rank(a[1])), ['all packages', everything]];
const cell = (row, run) => {
  const c = row.get(run);
  return c ? `${c.seconds.toFixed(1)} s (${c.tests})` : '-';
};

if (markdown) {
  const head = ['test file', ...runs.map((r) => `${r}: s (tests run)`)];
  console.log(`| ${head.join(' | ')} |\n|${head.map((_, i) => (i ? ' ---: ' : ' --- ')).join('|')}|`);
  for (const [name, row] of rows) console.log(`| ${name.includes(':') ? name : `\`${name}\``} | ${runs.map((run) => cell(row, run)).join(' | ')} |`);
  for (const [pkg, row] of packageRows) console.log(`| **${pkg}, all files** | ${runs.map((run) => `**${cell(row, run)}**`).join(' | ')} |`);
} else {
  const width = Math.max(...rows.map(([n]) => n.length), ...packageRows.map(([p]) => p.length + 11));
  console.log(`  ${'test file'.padEnd(width)} ${runs.map((r) => r.padStart(18)).join(' ')}`);
  for (const [name, row] of rows) console.log(`  ${name.padEnd(width)} ${runs.map((run) => cell(row, run).padStart(18)).join(' ')}`);
  for (const [pkg, row] of packageRows) console.log(`  ${`${pkg}, all files`.padEnd(width)} ${runs.map((run) => cell(row, run).padStart(18)).join(' ')}`);
}
