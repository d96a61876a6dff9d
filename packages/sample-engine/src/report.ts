import type { ConformanceReport } from '@dynamo/backend';

const mark = { passed: 'ok  ', failed: 'FAIL', skipped: 'skip' } as const;

/** Renders a conformance report as a short table a person can read in a terminal. */
export function formatConformanceReport(title: string, report: ConformanceReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = report.checks.map((c) => {
    const detail = c.status === 'failed' ? `  ${c.kind}: ${c.message}` : '';
    return `  ${mark[c.status]}  ${c.name.padEnd(width)}  ${c.elapsedMs.toFixed(1).padStart(8)} ms${detail}`;
  });
  const count = (s: string) => report.checks.filter((c) => c.status === s).length;
  const total = report.checks.reduce((sum, c) => sum + c.elapsedMs, 0);
  const verdict = report.passed ? 'the engine conforms' : 'the engine does NOT conform';
  const skipped = count('skipped') > 0 ? `, ${count('skipped')} skipped` : '';
  return [title, ...lines, `${count('passed')} passed, ${count('failed')} failed${skipped}: ${verdict} (${total.toFixed(1)} ms)`, ''].join('\n');
}
