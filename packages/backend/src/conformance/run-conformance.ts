import { conformanceChecks, runConformance as runNativeKit } from '@dynamo/core';
import type { EngineFactory } from '../engine.js';
import type { RawEngineFactory } from '../raw-engine.js';
import { type BridgedFactory, EngineBridge } from './engine-bridge.js';

/** The failure kinds the kit reports, by name. */
export type ConformanceFailureKind =
  | 'StartFailed'
  | 'EmptyModelInConfig'
  | 'KvEventSourcesFailed'
  | 'KvEventSourcesNotIdempotent'
  | 'SetupMetricsFailed'
  | 'ComponentMetricsNotIdempotent'
  | 'RawEngineAdvertisedLlmRegistration'
  | 'EncodeChunkCount'
  | 'EncodeTerminalExpected'
  | 'EncodeTokensNotEmpty'
  | 'EncoderResultExpectedObject'
  | 'EncodeUsageMismatch'
  | 'GenerateFailed'
  | 'NoChunksYielded'
  | 'ChunkAfterTerminal'
  | 'NoTerminalChunk'
  | 'StreamYieldedError'
  | 'CompletionTokensMismatch'
  | 'ConcurrentGenerateFailed'
  | 'CancellationNotObserved'
  | 'CancellationIgnored'
  | 'CleanupFailed'
  | 'SecondCleanupFailed'
  | 'CleanupWithoutStartFailed'
  | 'CheckTimedOut';

/** Tunables for a conformance run; defaults are the kit's (2 s cancel deadline, 8 streams). */
export interface ConformanceOptions {
  /** How long a stopped stream may take to end before `CancellationNotObserved`. */
  cancelDeadlineMs?: number;
  /** Number of interleaved streams in the concurrency check. */
  concurrency?: number;
  /**
   * How long any one check may take before it fails with `CheckTimedOut`, naming the check
   * (default: unbounded for {@link runConformance}, 30 s for `conformanceSuite`). Raise it for a
   * slow engine, e.g. a real model on a small CPU.
   */
  checkTimeoutMs?: number;
  /**
   * `token` (default) checks a generator; `encode` an engine serving `--disaggregation-mode
   * encode`: every request carries an image and must be answered by one `stop` chunk with no
   * tokens, an object `encoder_result` and prompt-only usage. (Raw engines have their own entry
   * point, {@link runRawConformance}.)
   */
  mode?: 'token' | 'encode';
}

/** The outcome of one check. */
export interface ConformanceCheckResult {
  /** The check, e.g. `cancellation` (see {@link CONFORMANCE_CHECKS}). */
  name: string;
  /** `skipped` once an earlier check failed: later checks need a working engine. */
  status: 'passed' | 'failed' | 'skipped';
  /** The failure kind, when the check failed. */
  kind?: ConformanceFailureKind;
  /** What the kit observed, when the check failed. */
  message?: string;
  /** Time the check took. */
  elapsedMs: number;
}

/** Every check of a run, in order; checks after the first failure are skipped. */
export interface ConformanceReport {
  /** True when every check passed. */
  passed: boolean;
  checks: ConformanceCheckResult[];
}

/** Thrown by {@link runConformance} when a check fails; `kind` names the failure. */
export class ConformanceError extends Error {
  constructor(
    /** The failure kind, e.g. `NoTerminalChunk`. */
    readonly kind: ConformanceFailureKind,
    /** The check that failed, e.g. `generate`. */
    readonly check: string,
    message: string,
    /** The whole report, for tooling. */
    readonly report: ConformanceReport,
  ) {
    super(`${kind} (check ${check}): ${message}`);
    this.name = 'ConformanceError';
  }
}

/** Names of the kit's checks, in the order they run. */
export const CONFORMANCE_CHECKS: readonly string[] = Object.freeze(conformanceChecks());

/** Names of the raw-engine checks, in the order they run (no KV sources or metrics). */
export const RAW_CONFORMANCE_CHECKS: readonly string[] = Object.freeze(conformanceChecks(true));

/**
 * Runs the conformance kit and returns the per-check report instead of throwing. The checks run in
 * Rust (`@dynamo/core`), the same kit native engines use; `factory` is called once for the engine
 * under test and once more for a never-started engine.
 */
export function conformanceReport(factory: EngineFactory, options: ConformanceOptions = {}): Promise<ConformanceReport> {
  return report({ raw: false, factory }, options);
}

/**
 * Checks that engines made by `factory` honour the {@link LLMEngine} contract: start, KV event
 * sources, component metrics ranks, one stream, 8 concurrent streams, cancellation within 2 s,
 * cleanup twice, and cleanup of a never-started engine (with `mode: 'encode'`, the encode
 * worker's handoff rules instead of the token ones). Resolves with the report when every check
 * passes; rejects with a {@link ConformanceError} naming the first failure otherwise.
 *
 * ```ts
 * it('conforms', () => runConformance(() => new MyEngine()));
 * ```
 */
export async function runConformance(factory: EngineFactory, options: ConformanceOptions = {}): Promise<ConformanceReport> {
  return passOrThrow(await conformanceReport(factory, options));
}

/** {@link rawConformanceReport}'s report, or a {@link ConformanceError} naming the first failure. */
export async function runRawConformance(factory: RawEngineFactory, options: Omit<ConformanceOptions, 'mode'> = {}): Promise<ConformanceReport> {
  return passOrThrow(await rawConformanceReport(factory, options));
}

/**
 * Checks that {@link RawEngine}s made by `factory` honour the raw contract
 * ({@link RAW_CONFORMANCE_CHECKS}): `start` names a model and sets no `llm` registration
 * (`RawEngineAdvertisedLlmRegistration`), `{"prompt":"ping"}` streams at least one object without
 * failing, alone and 8 at a time, a stopped request (`{"prompt":"ping","steps":100000}`) ends
 * within 2 s, and cleanup is idempotent and safe without a start.
 */
export function rawConformanceReport(factory: RawEngineFactory, options: Omit<ConformanceOptions, 'mode'> = {}): Promise<ConformanceReport> {
  return report({ raw: true, factory }, options);
}

async function report(source: BridgedFactory, options: ConformanceOptions): Promise<ConformanceReport> {
  const bridge = new EngineBridge(source);
  try {
    const native = await runNativeKit(bridge.dispatch, { ...options, ...(source.raw ? { mode: 'raw' } : {}) });
    return {
      passed: native.passed,
      checks: native.checks.map((c) => ({
        name: c.name,
        status: c.status as ConformanceCheckResult['status'],
        ...(c.kind == null ? {} : { kind: c.kind as ConformanceFailureKind }),
        ...(c.message == null ? {} : { message: c.message }),
        elapsedMs: c.elapsedMs,
      })),
    };
  } finally {
    bridge.dispose();
  }
}

function passOrThrow(report: ConformanceReport): ConformanceReport {
  const failed = report.checks.find((c) => c.status === 'failed');
  if (failed) throw new ConformanceError(failed.kind ?? 'StartFailed', failed.name, failed.message ?? '', report);
  return report;
}
