import { Context } from '../context.js';
import type { Log } from '../logger.js';
import { invokeHandler, type EndpointHandler } from './handler.js';

/** What an endpoint's health canary sends, and how it reads the answer. */
export interface HealthCheck {
  /** The request body sent to the endpoint's own handler. */
  payload: unknown;
  /** An error message when a response item means the probe failed (a thrown error always does). */
  failure?: (item: unknown) => string | undefined;
}

/** Timing of the canary (`DYN_CANARY_WAIT_TIME`, `DYN_HEALTH_CHECK_REQUEST_TIMEOUT`). */
export interface CanaryTiming {
  waitMs: number;
  timeoutMs: number;
}

/**
 * The worker's self-probe: once the endpoint has had no successful request for `waitMs`, the
 * payload goes through the same handler real requests use (no network), and the endpoint is
 * marked ready when the whole response stream succeeds within `timeoutMs`, not ready otherwise.
 */
export class HealthCanary {
  readonly #handler: EndpointHandler;
  readonly #check: HealthCheck;
  readonly #timing: CanaryTiming;
  readonly #log: Log;
  readonly #setReady: (ready: boolean) => void;
  #lastSuccess = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #probing = false;
  #stopped = false;

  constructor(handler: EndpointHandler, check: HealthCheck, timing: CanaryTiming, log: Log, setReady: (ready: boolean) => void) {
    this.#handler = handler;
    this.#check = check;
    this.#timing = timing;
    this.#log = log;
    this.#setReady = setReady;
  }

  /** Starts probing on idle. */
  start(): void {
    this.#schedule(this.#timing.waitMs);
  }

  /** A real request succeeded: the endpoint works, and the idle clock restarts. */
  succeeded(): void {
    this.#lastSuccess = performance.now();
    if (!this.#stopped) this.#setReady(true);
  }

  /** Stops probing for good (the endpoint is shutting down); a probe in flight no longer reports. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#tick(), ms);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    const idle = performance.now() - this.#lastSuccess;
    if (idle < this.#timing.waitMs || this.#probing) return this.#schedule(Math.max(1, this.#timing.waitMs - idle));
    this.#probing = true;
    const error = await this.probe();
    this.#probing = false;
    if (this.#stopped) return;
    if (error === undefined) {
      this.#log.debug('health canary succeeded');
      this.#lastSuccess = performance.now();
    } else {
      this.#log.warn({ err: error }, 'health canary failed; endpoint marked not ready');
    }
    this.#setReady(error === undefined);
    this.#schedule(this.#timing.waitMs);
  }

  /** Sends the payload once; resolves with why it failed, or undefined when it succeeded. */
  async probe(): Promise<string | undefined> {
    const context = new Context();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(() => {
        context.kill();
        resolve(`no complete response within ${this.#timing.timeoutMs} ms`);
      }, this.#timing.timeoutMs);
    });
    const run = (async (): Promise<string | undefined> => {
      try {
        let items = 0;
        for await (const item of invokeHandler(this.#handler, structuredClone(this.#check.payload), context)) {
          items++;
          const failure = this.#check.failure?.(item);
          if (failure !== undefined) return failure;
        }
        return items === 0 ? 'the response stream was empty' : undefined;
      } catch (err) {
        return err instanceof Error ? err.message : String(err);
      }
    })();
    try {
      return await Promise.race([run, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
