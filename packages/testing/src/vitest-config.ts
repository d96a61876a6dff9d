// The one vitest configuration every package's vitest.config.ts starts from: failure reports of
// processes and waits, and time bounds that fit a busy 2-core machine. vitest's own defaults (5 s
// a test, 10 s a hook) fail any test that starts a process whenever another job shares the
// machine; test/repo/test-timeouts.test.ts keeps every config on this one and every explicit
// bound at or above the floor.
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig, type ViteUserConfig } from 'vitest/config';

/** A test's bound when it names none: starting a few processes and a request through them, on a busy machine. */
export const TEST_TIMEOUT_MS = 60_000;
/** A hook's bound when it names none: starting a stack of processes. */
export const HOOK_TIMEOUT_MS = 120_000;
/** The least bound a test, hook or config may name (test/repo/test-timeouts.test.ts checks). */
export const MIN_TIMEOUT_MS = 30_000;

/** The setup file that prints, when a test or hook fails, what it waited for and each process's output tail. */
const reportOnFailure = fileURLToPath(new URL('./report-on-failure.js', import.meta.url));

/** `config` over the shared base (the failure-report setup file and the time bounds above). */
export function testConfig(config: ViteUserConfig = {}): ViteUserConfig {
  const base = defineConfig({ test: { setupFiles: [reportOnFailure], testTimeout: TEST_TIMEOUT_MS, hookTimeout: HOOK_TIMEOUT_MS } });
  return mergeConfig(base, config);
}
