// A vitest reporter that writes each test file's whole wall time to the package folder's
// $DYNAMO_TS_TIMES_FILE (default .vitest-times.json): import, setup files, hooks and tests. vitest's JSON report times a file from its
// first test's start to its last test's end, which leaves out beforeAll/afterAll, where the
// process-starting files spend most of their time. scripts/test.sh collects these files and
// scripts/test-times.mjs prints the table.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export default class FileTimesReporter {
  #files = [];
  #root = process.cwd();

  onInit(vitest) {
    this.#root = vitest.config.root;
  }

  onTestModuleEnd(testModule) {
    const d = testModule.diagnostic();
    const tests = [...testModule.children.allTests()].filter((t) => {
      const state = t.result().state;
      return state === 'passed' || state === 'failed';
    }).length;
    const seconds = (d.collectDuration + d.setupDuration + d.duration) / 1000;
    this.#files.push({ file: testModule.moduleId, seconds, tests });
  }

  onTestRunEnd() {
    writeFileSync(join(this.#root, process.env.DYNAMO_TS_TIMES_FILE || '.vitest-times.json'), `${JSON.stringify({ files: this.#files }, null, 1)}\n`);
  }
}
