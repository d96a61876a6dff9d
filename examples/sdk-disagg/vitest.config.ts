import { lowerStandardDecorators } from '@dynamo/sdk/vitest';

import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  plugins: [lowerStandardDecorators()],
  test: {
    fileParallelism: false,
  },
});
