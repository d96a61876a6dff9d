/**
 * `@dynamo/backend/vitest`: the conformance kit as a vitest suite, one test per check, so an
 * engine author sees which check failed by name.
 *
 * ```ts
 * import { conformanceSuite } from '@dynamo/backend/vitest';
 * conformanceSuite('MyEngine', () => new MyEngine());
 * ```
 */
import { beforeAll, describe, it } from 'vitest';
import type { EngineFactory } from './engine.js';
import { CONFORMANCE_CHECKS, ConformanceError, conformanceReport, type ConformanceOptions, type ConformanceReport } from './conformance/run-conformance.js';

/** Per-check timeout of {@link conformanceSuite} unless `checkTimeoutMs` is given. */
export const DEFAULT_SUITE_CHECK_TIMEOUT_MS = 30_000;

/**
 * Registers `describe(name)` with one `it` per conformance check. Each check is bounded by
 * `options.checkTimeoutMs` (default {@link DEFAULT_SUITE_CHECK_TIMEOUT_MS}): a check that runs
 * longer fails its own test with `CheckTimedOut`, naming it, and the later checks are skipped.
 */
export function conformanceSuite(name: string, factory: EngineFactory, options: ConformanceOptions = {}): void {
  const checkTimeoutMs = options.checkTimeoutMs ?? DEFAULT_SUITE_CHECK_TIMEOUT_MS;
  // Room for every check plus the cleanup after a failure, each at its bound, so the kit's
  // timeout always fires before the hook's.
  const hookTimeoutMs = (CONFORMANCE_CHECKS.length + 1) * checkTimeoutMs + 10_000;
  describe(name, () => {
    let report: ConformanceReport | undefined;
    beforeAll(async () => {
      report = await conformanceReport(factory, { ...options, checkTimeoutMs });
    }, hookTimeoutMs);
    for (const check of CONFORMANCE_CHECKS) {
      it(check, (ctx) => {
        const result = report?.checks.find((c) => c.name === check);
        if (report === undefined || result === undefined) throw new Error(`conformance check ${check} did not run`);
        if (result.status === 'skipped') ctx.skip(`skipped: an earlier conformance check failed`);
        if (result.status === 'failed') {
          throw new ConformanceError(result.kind ?? 'StartFailed', check, result.message ?? '', report);
        }
      });
    }
  });
}
