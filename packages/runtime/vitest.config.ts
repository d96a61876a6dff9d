import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  test: {
    // Integration files start real etcd/NATS servers and worker processes and assert on TTLs;
    // running them one at a time keeps those timings honest on a 2-core machine.
    fileParallelism: false,
  },
});
