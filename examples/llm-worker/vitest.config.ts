import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '../../packages/runtime/test/harness/vitest-setup.js';

export default defineConfig({
  test: {
    setupFiles: [reportOnFailure],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
