import { lowerStandardDecorators } from '@dynamo/sdk/vitest';
import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '../../packages/runtime/test/harness/vitest-setup.js';

export default defineConfig({
  plugins: [lowerStandardDecorators()],
  test: {
    setupFiles: [reportOnFailure],
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
