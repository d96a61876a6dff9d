import { describe, expect, it } from 'vitest';
import { EngineLifecycle, finishReasonToOpenai, normalizeFinishReason, resolveShutdownSettings, ShutdownPlanner } from '@dynamo/core';

describe('EngineLifecycle through the binding', () => {
  it('owes exactly one cleanup after a failed start', () => {
    const machine = new EngineLifecycle();
    expect(machine.state).toBe('init');
    expect(machine.on({ type: 'start_requested' })).toEqual({ type: 'call_start' });
    machine.on({ type: 'start_failed' });
    expect(machine.state).toBe('start_failed');
    expect(machine.on({ type: 'cleanup_requested', timeout_ms: 5000 })).toEqual({ type: 'call_cleanup', timeout_ms: 5000 });
    machine.on({ type: 'cleanup_finished', outcome: 'error' });
    expect(machine.state).toBe('stopped');
    expect(machine.on({ type: 'cleanup_requested', timeout_ms: 5000 })).toEqual({ type: 'noop' });
  });

  it('never calls cleanup when start never ran', () => {
    const machine = new EngineLifecycle();
    expect(machine.on({ type: 'cleanup_requested', timeout_ms: 1000 })).toEqual({ type: 'noop' });
    expect(machine.state).toBe('stopped');
  });

  it('rejects malformed events with a clear error', () => {
    const machine = new EngineLifecycle();
    expect(() => machine.on({ type: 'explode' })).toThrow(/engine lifecycle event/);
    machine.on({ type: 'start_requested' });
    machine.on({ type: 'start_succeeded' });
    expect(() => machine.on({ type: 'start_requested' })).toThrow();
  });
});

describe('finish reasons', () => {
  it('normalizes "abort" to cancelled and keeps errors', () => {
    expect(normalizeFinishReason('abort')).toBe('cancelled');
    expect(normalizeFinishReason({ error: 'oom' })).toEqual({ error: 'oom' });
    expect(finishReasonToOpenai('eos')).toBe('stop');
    expect(finishReasonToOpenai('length')).toBe('length');
  });

  it('names an unknown finish reason', () => {
    expect(() => normalizeFinishReason('done')).toThrow(/done/);
  });
});

describe('shutdown settings and planner', () => {
  it('reads DYN_* variables and warns about bad ones', () => {
    const { settings, warnings } = resolveShutdownSettings(null, {
      DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT: '10',
      DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: 'soon',
    });
    expect(settings.graceful_shutdown_timeout_ms).toBe(10_000);
    expect(settings.router_grace_ms).toBe(5_000);
    expect(settings.total_ms).toBe(15_000);
    expect(warnings.join('\n')).toContain('DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS');
  });

  it('lets code config beat env', () => {
    const { settings } = resolveShutdownSettings({ total_secs: 3 }, { DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT: '10' });
    expect(settings.total_ms).toBe(3_000);
  });

  it('starts a shutdown by unregistering, and plans every stage in order', () => {
    const { settings } = resolveShutdownSettings(null, {});
    const planner = new ShutdownPlanner(settings, { served: true });
    expect(planner.totalBudgetMs).toBe(35_000);
    expect(planner.plan(0).map((s) => s.stage)).toEqual(['unregister', 'router_grace', 'stop_admission', 'inflight', 'kv_transfer', 'cleanup']);
    expect(planner.on(0, { type: 'begin' })).toContainEqual({ type: 'unregister' });
  });
});
