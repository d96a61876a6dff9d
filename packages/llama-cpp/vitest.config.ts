import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '../runtime/test/harness/vitest-setup.js';

export default defineConfig({
  test: {
    setupFiles: [reportOnFailure],
  },
});
