import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  test: {
    hookTimeout: 180_000,
  },
});
