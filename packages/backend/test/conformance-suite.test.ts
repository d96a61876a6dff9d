import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { startChild } from '@dynamo/testing/child';
import { hungInGenerate } from './engines.js';

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(here, '..', 'node_modules', 'vitest', 'vitest.mjs');
const out = mkdtempSync(join(tmpdir(), 'conformance-suite-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface JsonReport {
  testResults: Array<{ message: string; assertionResults: Array<{ title: string; status: string; failureMessages: string[] }> }>;
}

describe('conformanceSuite', () => {
  it('fails the test of the check a hung engine is stuck in, naming it, instead of timing out its hook', async () => {
    const report = join(out, 'report.json');
    const run = startChild(process.execPath, [
      vitestBin,
      'run',
      '--config',
      join(here, 'fixtures', 'suite', 'vitest.config.ts'),
      '--reporter=json',
      `--outputFile=${report}`,
    ]);
    expect(await run.exited).toBe(1);
    const { testResults } = JSON.parse(readFileSync(report, 'utf8')) as JsonReport;
    expect(testResults).toHaveLength(1);
    // No hook error for the file: the failure belongs to the check.
    expect(testResults[0]!.message).toBe('');
    const results = testResults[0]!.assertionResults;
    // generate hung: the checks before it passed, every one after it was skipped.
    expect(results.map((r) => [r.title, r.status])).toEqual(hungInGenerate);
    expect(results.find((r) => r.title === 'generate')!.failureMessages.join('\n')).toContain(
      'CheckTimedOut (check generate): generate: the check did not finish within 500ms',
    );
  }, 60_000);
});
