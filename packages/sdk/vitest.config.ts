import { lowerStandardDecorators } from './src/vitest.js';
import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '../runtime/test/harness/vitest-setup.js';

export default defineConfig({
  plugins: [lowerStandardDecorators()],
  test: {
    setupFiles: [reportOnFailure],
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
