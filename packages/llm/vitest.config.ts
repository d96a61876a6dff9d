import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '@dynamo/testing/vitest-setup';

export default defineConfig({
  test: {
    setupFiles: [reportOnFailure],
    // Some files start the stock Dynamo frontend and worker processes; one file at a time keeps
    // a 2-core machine from starving them.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
