import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  test: {
    // This folder's own tests and the interop matrix: fixtures/ holds an outside project with its own test files,
    // which run inside that project after it is installed, never here.
    include: ['*.test.ts', 'interop/*.test.ts', 'llama-cpp/*.test.ts', 'clients/*.test.ts', 'repo/*.test.ts', 'cluster/*.test.ts'],
    // One file at a time: each starts a fleet of stock and our processes, and two fleets on this
    // 2-core machine slow the stock frontend past the matrix's startup waits. The matrix takes
    // most of the time anyway, so running files side by side saves little.
    fileParallelism: false,
    // Packing and `npm install` (which may download from the registry) take a while on a cold cache.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
