import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '@dynamo/testing/vitest-setup';

export default defineConfig({
  test: {
    setupFiles: [reportOnFailure],
    // Integration files start real etcd/NATS servers and worker processes and assert on TTLs;
    // running them one at a time keeps those timings honest on a 2-core machine.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
