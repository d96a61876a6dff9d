// The closing lines of `.ci/run` (scripts/summarize-tests.mjs) name each failed test with its
// error, since the tail of a CI log is often all that is kept. Fed a real vitest JSON report.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT } from '../../scripts/api-report.mjs';

const vitestBin = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
let dir: string;
const runDir = () => join(dir, 'results', 'vitest, Node 20: packages');

/** Runs vitest on the project folder into the run's JSON report, as CI's lanes do. */
function vitestReport(status: number): void {
  // vitest exits 1 on the failures: the report is what the tests read.
  spawnSync(
    process.execPath,
    [vitestBin, 'run', '--root', join(dir, 'project'), '--globals', '--reporter=json', `--outputFile.json=${join(runDir(), 'project.json')}`],
    {
      cwd: join(ROOT, 'test'),
      stdio: 'ignore',
    },
  );
  writeFileSync(join(runDir(), 'exit-status'), String(status));
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'test-summary-'));
  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'a.test.js'), "describe('group', () => {\n  it('passes', () => {});\n  it('fails', () => expect(1).toBe(2));\n});\n");
  writeFileSync(join(project, 'b.test.js'), "throw new Error('cannot load this file');\n");
  mkdirSync(runDir(), { recursive: true });
  vitestReport(1);
  writeFileSync(join(dir, 'cargo.log'), 'test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured\n');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const summarize = () => {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts/summarize-tests.mjs'), join(dir, 'cargo.log'), join(dir, 'results')], {
    cwd: dir,
    encoding: 'utf8',
  });
  return { status: r.status, lines: r.stdout.trimEnd().split('\n') };
};

describe('summarize-tests', () => {
  it('sums every runner into the closing line and exits 1 on a failure', () => {
    const { status, lines } = summarize();
    expect(status).toBe(1);
    expect(lines).toContain('  cargo test: 3 passed, 0 failed, 1 skipped');
    expect(lines.at(-1)).toBe('4 passed, 2 failed, 1 skipped');
  });

  it('names each failed test and a file that failed to load, with the first line of the error', () => {
    const { lines } = summarize();
    expect(lines).toContain('    FAILED project/a.test.js > group fails: AssertionError: expected 1 to be 2 // Object.is equality');
    expect(lines).toContain('    FAILED project/b.test.js (the file failed outside its tests): cannot load this file');
  });

  it('reads green when nothing failed', () => {
    rmSync(join(dir, 'project', 'b.test.js'));
    writeFileSync(join(dir, 'project', 'a.test.js'), "it('passes', () => {});\n");
    vitestReport(0);
    const { status, lines } = summarize();
    expect(lines.filter((l) => l.includes('FAILED'))).toEqual([]);
    expect(lines.at(-1)).toBe('4 passed, 0 failed, 1 skipped');
    expect(status).toBe(0);
  });
});
