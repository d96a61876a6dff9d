import { transform } from 'esbuild';
import { defineConfig } from 'vitest/config';

import { reportOnFailure } from '../../packages/runtime/test/harness/vitest-setup.js';

export default defineConfig({
  plugins: [
    {
      // Node 20 has no native decorators and Vite 8's transformer keeps standard decorators as
      // they are: lower them with esbuild first, as tsx and tsc do.
      name: 'lower-standard-decorators',
      enforce: 'pre',
      async transform(code, id) {
        if (!/\.[cm]?ts$/.test(id) || !code.includes('@')) return null;
        const out = await transform(code, { loader: 'ts', target: 'es2022', format: 'esm', sourcemap: true, sourcefile: id });
        return { code: out.code, map: out.map };
      },
    },
  ],
  test: {
    setupFiles: [reportOnFailure],
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
