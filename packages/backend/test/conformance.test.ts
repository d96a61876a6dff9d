import { conformanceFailureKinds } from '@dynamo/core';
import { describe, expect, it } from 'vitest';
import {
  CONFORMANCE_CHECKS,
  type ConformanceFailureKind,
  ConformanceError,
  conformanceReport,
  type GenerateChunk,
  RAW_CONFORMANCE_CHECKS,
  type RawEngineFactory,
  type RawObject,
  runConformance,
  runRawConformance,
  usage,
} from '../src/index.js';
import { broken, brokenEncoders, brokenRaw, GoodEncoder, GoodEngine, GoodRawEngine, hungInGenerate } from './engines.js';

async function rawFailureOf(factory: RawEngineFactory): Promise<ConformanceError> {
  const err = await runRawConformance(factory).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConformanceError);
  return err as ConformanceError;
}

async function failureOf(factory: () => GoodEngine | ReturnType<(typeof broken)[string]>, options = {}): Promise<ConformanceError> {
  const err = await runConformance(factory, options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConformanceError);
  return err as ConformanceError;
}

describe('runConformance', () => {
  it('passes an engine that follows the contract and reports every check', async () => {
    const report = await runConformance(() => new GoodEngine());
    expect(report.passed).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([...CONFORMANCE_CHECKS]);
    expect(report.checks.every((c) => c.status === 'passed')).toBe(true);
  });

  it('runs the checks in the kit order', () => {
    expect(CONFORMANCE_CHECKS).toEqual([
      'start',
      'kv_event_sources',
      'component_metrics',
      'generate',
      'concurrent_generate',
      'cancellation',
      'cleanup',
      'cleanup_without_start',
    ]);
  });

  it('has a broken engine for every failure kind the Rust kit reports, and no other', () => {
    expect([...Object.keys(broken), ...Object.keys(brokenEncoders), ...Object.keys(brokenRaw)].sort()).toEqual(conformanceFailureKinds().sort());
  });

  for (const [kind, factory] of Object.entries(broken)) {
    if (kind === 'CancellationNotObserved') continue;
    it(`rejects with kind ${kind} for an engine that breaks that rule`, async () => {
      // Without a check timeout a hung engine hangs the run (the documented default).
      const err = await failureOf(factory, kind === 'CheckTimedOut' ? { checkTimeoutMs: 300 } : {});
      expect(err.kind).toBe(kind as ConformanceFailureKind);
      expect(err.message.length).toBeGreaterThan(kind.length + 10);
    });
  }

  it("holds an encode worker's engine to the handoff rules with mode 'encode'", async () => {
    const report = await runConformance(() => new GoodEncoder(), { mode: 'encode' });
    expect(report.checks.map((c) => [c.name, c.status])).toEqual(CONFORMANCE_CHECKS.map((name) => [name, 'passed']));
    // A generator answers an image with tokens: not a handoff.
    expect((await failureOf(() => new GoodEngine(), { mode: 'encode' })).kind).toBe('EncodeChunkCount');
  });

  for (const [kind, factory] of Object.entries(brokenEncoders)) {
    it(`rejects with kind ${kind} for an encoder that breaks that rule`, async () => {
      const err = await failureOf(factory, { mode: 'encode' });
      expect(err.kind).toBe(kind as ConformanceFailureKind);
      expect(err.check).toBe('generate');
    });
  }

  it('checks a raw engine with its own checks, passing the requests through as objects', async () => {
    const engines: GoodRawEngine[] = [];
    const report = await runRawConformance(() => {
      const engine = new GoodRawEngine();
      engines.push(engine);
      return engine;
    });
    expect(RAW_CONFORMANCE_CHECKS).toEqual(['start', 'generate', 'concurrent_generate', 'cancellation', 'cleanup', 'cleanup_without_start']);
    expect(report.checks.map((c) => [c.name, c.status])).toEqual(RAW_CONFORMANCE_CHECKS.map((name) => [name, 'passed']));
    expect(engines[0]!.requests[0]).toEqual({ prompt: 'ping' });
    expect(engines[0]!.requests.at(-1)).toEqual({ prompt: 'ping', steps: 100000 });
  });

  it('rejects with kind RawEngineAdvertisedLlmRegistration for a raw engine that registers an LLM, at start', async () => {
    const err = await rawFailureOf(brokenRaw.RawEngineAdvertisedLlmRegistration!);
    expect(err).toMatchObject({ kind: 'RawEngineAdvertisedLlmRegistration', check: 'start' });
    expect(err.report.checks.slice(1).every((c) => c.status === 'skipped')).toBe(true);
  });

  it('reports a raw chunk that is not an object as a stream error', async () => {
    const err = await rawFailureOf(
      () =>
        new (class extends GoodRawEngine {
          override async *generate(): AsyncGenerator<RawObject> {
            yield 'a string' as unknown as RawObject;
          }
        })(),
    );
    expect(err).toMatchObject({ kind: 'StreamYieldedError', check: 'generate' });
    expect(err.message).toMatch(/invalid chunk shape/);
  });

  it('reports an engine that ignores cancellation within the 2 s deadline instead of hanging', async () => {
    const began = performance.now();
    const err = await failureOf(broken.CancellationNotObserved!);
    const elapsed = performance.now() - began;
    expect(err.kind).toBe('CancellationNotObserved');
    expect(err.check).toBe('cancellation');
    expect(err.message).toMatch(/2(\.0+)?\s*s/);
    // A generous ceiling: the point is "bounded by the deadline", not a timing benchmark.
    expect(elapsed).toBeLessThan(6000);
  });

  it('honours a shorter cancellation deadline', async () => {
    const err = await failureOf(broken.CancellationNotObserved!, { cancelDeadlineMs: 200 });
    expect(err.kind).toBe('CancellationNotObserved');
  });

  it('fails the check an engine hangs in at checkTimeoutMs, naming it, and still cleans the engine up', async () => {
    const made: GoodEngine[] = [];
    const report = await conformanceReport(
      () => {
        const engine = broken.CheckTimedOut!() as GoodEngine;
        made.push(engine);
        return engine;
      },
      { checkTimeoutMs: 300 },
    );
    // generate hung: the checks before it passed, every one after it was skipped.
    expect(report.checks.map((c) => [c.name, c.status])).toEqual(hungInGenerate);
    const generate = report.checks.find((c) => c.name === 'generate')!;
    expect(generate.kind).toBe('CheckTimedOut');
    expect(generate.message).toBe('generate: the check did not finish within 300ms; the engine hung or is slower than the check timeout allows (raise it)');
    expect(made[0]!.cleanups).toBe(1);
  });

  it('names what the engine threw in StartFailed', async () => {
    const err = await failureOf(broken.StartFailed!);
    expect(err.message).toContain('weights not found');
  });

  it('skips the checks after the first failure', async () => {
    const report = await conformanceReport(broken.NoTerminalChunk!);
    expect(report.passed).toBe(false);
    const statuses = Object.fromEntries(report.checks.map((c) => [c.name, c.status]));
    expect(statuses).toMatchObject({ start: 'passed', kv_event_sources: 'passed', generate: 'failed', concurrent_generate: 'skipped', cleanup: 'skipped' });
  });

  it('accepts "abort" as the cancelled finish reason', async () => {
    class AbortSpelling extends GoodEngine {
      override async *generate(...args: Parameters<GoodEngine['generate']>): AsyncGenerator<GenerateChunk> {
        for await (const chunk of super.generate(...args)) {
          yield chunk.finish_reason === 'cancelled' ? { ...chunk, finish_reason: 'abort' } : chunk;
        }
      }
    }
    await expect(runConformance(() => new AbortSpelling())).resolves.toMatchObject({ passed: true });
  });

  it('reports a malformed chunk as a stream error naming the field', async () => {
    class BadChunk extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: 'one two' } as unknown as GenerateChunk;
      }
    }
    const err = await failureOf(() => new BadChunk());
    expect(err.kind).toBe('StreamYieldedError');
    expect(err.message).toMatch(/invalid chunk shape/);
  });

  it('reports generate() returning something that is not an async iterable as GenerateFailed', async () => {
    class NotIterable extends GoodEngine {
      override generate(): AsyncGenerator<GenerateChunk> {
        return [{ token_ids: [1], finish_reason: 'stop', completion_usage: usage(3, 1) }] as unknown as AsyncGenerator<GenerateChunk>;
      }
    }
    const err = await failureOf(() => new NotIterable());
    expect(err.kind).toBe('GenerateFailed');
    expect(err.message).toMatch(/AsyncIterable/);
  });

  it('reports a factory that throws as StartFailed', async () => {
    const err = await failureOf(() => {
      throw new Error('no GPU');
    });
    expect(err.kind).toBe('StartFailed');
    expect(err.message).toContain('no GPU');
  });

  it('calls cleanup of the tested engine and never starts the second one', async () => {
    const made: GoodEngine[] = [];
    await runConformance(() => {
      const engine = new GoodEngine();
      made.push(engine);
      return engine;
    });
    expect(made).toHaveLength(2);
    expect(made[0]!.cleanups).toBe(1);
    expect(made[1]!.cleanups).toBe(0);
  });
});
