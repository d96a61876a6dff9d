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
import {
  CONFORMANCE_CHECKS,
  ConformanceError,
  conformanceReport,
  type ConformanceOptions,
  type ConformanceReport,
} from './conformance/run-conformance.js';

/** Registers `describe(name)` with one `it` per conformance check. */
export function conformanceSuite(name: string, factory: EngineFactory, options: ConformanceOptions = {}): void {
  describe(name, () => {
    let report: ConformanceReport | undefined;
    beforeAll(async () => {
      report = await conformanceReport(factory, options);
    }, 60_000);
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
