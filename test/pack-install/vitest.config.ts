import { testConfig } from '@dynamo/testing/vitest-config';

// The released tarballs installed by an outside project (pnpm run test:pack-install). CI runs it
// once, on Node 24, after pnpm release:build and pnpm release:pack.
export default testConfig({
  test: {
    include: ['pack-install/*.test.ts'],
    // Installs from a cold cache download from the registry.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
