import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '@dynamo/testing/vitest-setup';

export default defineConfig({
  test: {
    setupFiles: [reportOnFailure],
  },
});
