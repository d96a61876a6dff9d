// A vitest setup file (testConfig() of vitest-config.ts installs it in every package): when a test
// fails, or a hook fails or times out, it prints what the file was still waiting for and the tail
// of each process the file started, while they are still there to read.
import { afterAll, beforeEach, type RunnerTask, type RunnerTestSuite } from 'vitest';

import { hasProcessReport, processReport } from './processes.js';

function report(what: string): void {
  if (hasProcessReport()) console.error(`\n${what}; the processes this file started:\n${processReport()}\n`);
}

beforeEach(({ onTestFailed, task }) => onTestFailed(() => report(`"${task.name}" failed`)));

/** The suites whose own hooks failed (their tests were never run). */
function failedSuites(task: RunnerTask): RunnerTestSuite[] {
  if (task.type !== 'suite') return [];
  const own = task.result?.state === 'fail' && (task.result.errors?.length ?? 0) > 0 ? [task] : [];
  return [...own, ...task.tasks.flatMap(failedSuites)];
}

// vitest hands hooks a fixture object first; only the file (the second argument) is used.
// biome-ignore lint/correctness/noEmptyPattern: vitest reads fixtures from a destructured first argument; the file is the second.
afterAll(({}, file) => {
  const failed = failedSuites(file);
  if (failed.length > 0) report(`a hook of ${failed.map((s) => (s === file ? 'the file' : `"${s.name}"`)).join(', ')} failed`);
});
