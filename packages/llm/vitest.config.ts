import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  test: {
    // Some files start the stock Dynamo frontend and worker processes; one file at a time keeps
    // a 2-core machine from starving them.
    fileParallelism: false,
  },
});
