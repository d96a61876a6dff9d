// Compiled by the exports test: a consumer's view of the generated declarations.
import {
  conformanceChecks,
  EngineLifecycle,
  type ConformanceReport,
  type EngineAction,
  normalizeFinishReason,
  resolveShutdownSettings,
  type ShutdownAction,
  ShutdownPlanner,
} from '@dynamo/core';

const checks: string[] = conformanceChecks();
const machine = new EngineLifecycle();
const state: string = machine.state;
const action: { type: string } = machine.on({ type: 'start_requested' });
const reason: string | { error: string } = normalizeFinishReason('abort');
const { settings, warnings } = resolveShutdownSettings(null, {});
const planner = new ShutdownPlanner(settings, { served: true });
const actions: Array<{ type: string }> = planner.on(0, { type: 'begin' });
// Actions are a union discriminated by `type`: narrowing gives each one's fields, no casts.
const typed: ShutdownAction[] = planner.on(0, { type: 'tick' });
const sleeps: number[] = typed.flatMap((a) => (a.type === 'sleep' ? [a.ms] : []));
const stages: string[] = typed.flatMap((a) => (a.type === 'record_stage' ? [a.stage] : []));
const gate: EngineAction = new EngineLifecycle().on({ type: 'cleanup_requested', timeout_ms: 1000 });
const cleanupBound: number | undefined = gate.type === 'call_cleanup' ? gate.timeout_ms : undefined;
const budget: number | null = planner.totalBudgetMs;
const report: ConformanceReport = { passed: true, checks: [] };
const notAString: string = warnings.join();
export { checks, state, action, reason, actions, sleeps, stages, cleanupBound, budget, report, notAString };
