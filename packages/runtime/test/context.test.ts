import { describe, expect, it } from 'vitest';
import { Cancelled, Context } from '../src/index.js';

describe('Context', () => {
  it('starts running with a unique id', () => {
    const a = new Context();
    const b = new Context();
    expect(a.id()).not.toBe(b.id());
    expect(a.isStopped()).toBe(false);
    expect(a.isKilled()).toBe(false);
    expect(a.signal.aborted).toBe(false);
  });

  it('stopGenerating stops, aborts the signal with Cancelled, and resolves stopped()', async () => {
    const ctx = new Context({ id: 'req-1' });
    const waiting = ctx.stopped();
    ctx.stopGenerating();
    ctx.stopGenerating();
    await waiting;
    expect(ctx.isStopped()).toBe(true);
    expect(ctx.isKilled()).toBe(false);
    expect(ctx.signal.reason).toBeInstanceOf(Cancelled);
    expect((ctx.signal.reason as Error).message).toContain('req-1');
  });

  it('kill implies stopped', () => {
    const ctx = new Context();
    ctx.kill();
    expect(ctx.isKilled()).toBe(true);
    expect(ctx.isStopped()).toBe(true);
    expect(ctx.signal.aborted).toBe(true);
  });

  it('carries metadata from an object or entries', () => {
    expect(new Context({ metadata: { a: '1' } }).metadata.get('a')).toBe('1');
    expect(new Context({ metadata: [['b', '2']] }).metadata.get('b')).toBe('2');
  });
});
