import { lowerStandardDecorators } from './src/vitest.js';

import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  plugins: [lowerStandardDecorators()],
  test: {
    fileParallelism: false,
  },
});
