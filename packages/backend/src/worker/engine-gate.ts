import { EngineLifecycle } from '@dynamo/core';
import { DynamoException, Unknown } from '@dynamo/runtime';

import type { LLMEngine } from '../engine.js';

/** How an engine cleanup ended. */
export type CleanupResult = 'ok' | { error: string } | 'timed_out';

/**
 * Calls an engine's `start` and `cleanup` through the lifecycle machine of `@dynamo/core`: `start`
 * at most once, `cleanup` exactly once if `start` was attempted (even after it failed), never
 * before it, and never twice, even when a cleanup times out and is abandoned.
 */
export class EngineGate {
  readonly #engine: LLMEngine;
  readonly #name: string;
  readonly #machine = new EngineLifecycle();
  #starting: Promise<unknown> | undefined;
  #cleanup: Promise<CleanupResult> | undefined;

  constructor(engine: LLMEngine, name: string) {
    this.#engine = engine;
    this.#name = name;
  }

  /** `init`, `running`, `start_failed` or `stopped`. */
  get state(): string {
    return this.#machine.state;
  }

  /** Starts the engine; a failure is rethrown as a Dynamo error naming the engine. */
  async start(workerId: bigint): Promise<unknown> {
    this.#machine.on({ type: 'start_requested' });
    const started = this.#engine.start(workerId);
    this.#starting = started.catch(() => {});
    try {
      const config = await started;
      this.#machine.on({ type: 'start_succeeded' });
      return config;
    } catch (err) {
      this.#machine.on({ type: 'start_failed' });
      const reason = err instanceof Error ? err.message : String(err);
      const message = `engine ${this.#name}: start() failed: ${reason}`;
      throw err instanceof DynamoException ? Object.assign(err, { message }) : new Unknown(message, { cause: err });
    }
  }

  /** A shutdown signal came before `start`: it will never run. */
  shutdownBeforeStart(): void {
    this.#machine.on({ type: 'shutdown_before_start' });
  }

  /** Cleans up once, bounded by `timeoutMs`; later calls get the first call's result. */
  async cleanup(timeoutMs: number): Promise<CleanupResult> {
    for (;;) {
      const action = this.#machine.on({ type: 'cleanup_requested', timeout_ms: timeoutMs });
      switch (action.type) {
        case 'call_cleanup':
          this.#cleanup = this.#callCleanup(action.timeout_ms);
          return this.#cleanup;
        case 'wait_for_cleanup':
          return this.#cleanup ?? 'ok';
        case 'wait_for_start':
          await this.#starting;
          continue;
        default:
          return 'ok';
      }
    }
  }

  async #callCleanup(timeoutMs: number): Promise<CleanupResult> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timed_out'>((resolve) => {
      timer = setTimeout(() => resolve('timed_out'), timeoutMs);
      timer.unref();
    });
    const call = Promise.resolve()
      .then(() => this.#engine.cleanup())
      .then(
        (): CleanupResult => 'ok',
        (err: unknown): CleanupResult => ({ error: err instanceof Error ? err.message : String(err) }),
      );
    const result = await Promise.race([call, timedOut]);
    clearTimeout(timer);
    const outcome = result === 'ok' ? 'ok' : result === 'timed_out' ? 'timed_out' : 'error';
    this.#machine.on({ type: 'cleanup_finished', outcome });
    return result;
  }
}
