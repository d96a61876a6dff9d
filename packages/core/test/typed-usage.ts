// Compiled by the exports test: a consumer's view of the generated declarations.
import { conformanceChecks, EngineLifecycle, type ConformanceReport, normalizeFinishReason, resolveShutdownSettings, ShutdownPlanner } from '@dynamo/core';

const checks: string[] = conformanceChecks();
const machine = new EngineLifecycle();
const state: string = machine.state;
const action: { type: string } = machine.on({ type: 'start_requested' });
const reason: string | { error: string } = normalizeFinishReason('abort');
const { settings, warnings } = resolveShutdownSettings(null, {});
const planner = new ShutdownPlanner(settings, { served: true });
const actions: Array<{ type: string }> = planner.on(0, { type: 'begin' });
const budget: number | null = planner.totalBudgetMs;
const report: ConformanceReport = { passed: true, checks: [] };
const notAString: string = warnings.join();
export { checks, state, action, reason, actions, budget, report, notAString };
