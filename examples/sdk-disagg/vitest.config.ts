import { lowerStandardDecorators } from '@dynamo/sdk/vitest';
import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '@dynamo/testing/vitest-setup';

export default defineConfig({
  plugins: [lowerStandardDecorators()],
  test: {
    setupFiles: [reportOnFailure],
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
