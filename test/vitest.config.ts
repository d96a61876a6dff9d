import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // This folder's own tests and the interop matrix: fixtures/ holds an outside project with its own test files,
    // which run inside that project after it is installed, never here.
    include: ['*.test.ts', 'interop/*.test.ts'],
    // Packing and `npm install` (which may download from the registry) take a while on a cold cache.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
