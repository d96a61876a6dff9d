import type { ShutdownAction, ShutdownLogLevel, ShutdownPlanner } from '@dynamo/core';

/** One stage's record, as the planner reports it (its `record_stage` action). */
export type StageOutcome = Omit<Extract<ShutdownAction, { type: 'record_stage' }>, 'type'>;

/** What the planner's actions do in this process. Each waiting call's result is fed back as its answer. */
export interface ShutdownHost {
  unregister(): Promise<void>;
  stopAdmission(): void;
  /** Resolves with the number of requests still running when they all ended or `timeoutMs` passed. */
  waitInflight(timeoutMs: number | undefined): Promise<number>;
  drain(): Promise<void>;
  isQuiescent(): Promise<boolean | null>;
  /** Engine cleanup, bounded by the caller; resolves with an error message when it failed. */
  cleanup(timeoutMs: number): Promise<'ok' | { error: string } | 'timed_out'>;
  record(outcome: StageOutcome): void;
  log(level: ShutdownLogLevel, message: string): void;
  exit(code: number): void;
}

type Event = Parameters<ShutdownPlanner['on']>[1];

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Runs a shutdown plan: feeds the planner its events and performs the actions it returns, until it
 * says `done`. Waiting actions get a timer at their bound that feeds `tick`, since the planner
 * ignores late answers and stale ticks. The hard-exit deadline is the caller's (see
 * {@link ShutdownRun.deadline}).
 */
export class ShutdownRun {
  readonly #planner: ShutdownPlanner;
  readonly #host: ShutdownHost;
  readonly #now: () => number;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly done: Promise<void>;
  #resolve!: () => void;

  constructor(planner: ShutdownPlanner, host: ShutdownHost, now: () => number = () => performance.now()) {
    this.#planner = planner;
    this.#host = host;
    this.#now = now;
    this.done = new Promise((resolve) => (this.#resolve = resolve));
  }

  /** Starts the stages (arms the planner's budget). */
  begin(): void {
    this.#feed({ type: 'begin' });
  }

  /** The hard-exit timer fired: the planner records the stage in progress and asks to exit. */
  deadline(): void {
    this.#feed({ type: 'deadline' });
  }

  #feed(event: Event): void {
    for (const action of this.#planner.on(this.#now(), event)) this.#perform(action);
  }

  #answer(work: Promise<Event>): void {
    void work.then((event) => this.#feed(event));
  }

  #tickAfter(ms: number | null): void {
    if (ms === null) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#feed({ type: 'tick' });
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  #perform(action: ShutdownAction): void {
    const host = this.#host;
    switch (action.type) {
      case 'unregister':
        this.#answer(
          host.unregister().then(
            () => ({ type: 'unregistered' }),
            (err: unknown) => ({ type: 'unregistered', error: message(err) }),
          ),
        );
        return;
      case 'sleep': {
        const timer = setTimeout(() => {
          this.#timers.delete(timer);
          this.#feed({ type: 'wake' });
        }, action.ms);
        this.#timers.add(timer);
        return;
      }
      case 'stop_admission':
        host.stopAdmission();
        this.#feed({ type: 'admission_stopped' });
        return;
      case 'wait_inflight': {
        const timeout = action.timeout_ms ?? undefined;
        this.#answer(host.waitInflight(timeout).then((left) => (left === 0 ? { type: 'inflight_drained' } : { type: 'inflight_timed_out', inflight: left })));
        return;
      }
      case 'call_drain':
        this.#tickAfter(action.timeout_ms);
        this.#answer(
          host.drain().then(
            () => ({ type: 'drained' }),
            (err: unknown) => ({ type: 'drained', error: message(err) }),
          ),
        );
        return;
      case 'poll_quiescent':
        this.#tickAfter(action.timeout_ms);
        this.#answer(
          host.isQuiescent().then(
            (value) => ({ type: 'quiescent', value }),
            (err: unknown) => ({ type: 'quiescent', value: null, error: message(err) }),
          ),
        );
        return;
      case 'call_cleanup':
        this.#answer(
          host
            .cleanup(action.timeout_ms)
            .then((result) =>
              result === 'ok'
                ? { type: 'cleanup_done' }
                : result === 'timed_out'
                  ? { type: 'cleanup_timed_out' }
                  : { type: 'cleanup_done', error: result.error },
            ),
        );
        return;
      case 'record_stage':
        host.record(action);
        return;
      case 'log':
        host.log(action.level, action.message);
        return;
      case 'exit':
        this.#clearTimers();
        host.exit(action.code);
        return;
      case 'done':
        this.#clearTimers();
        this.#resolve();
        return;
      default: {
        // Every action is handled above (TypeScript checks it); an addon newer than this code
        // could still send another.
        const unknown: never = action;
        host.log('error', `unknown shutdown action ${JSON.stringify(unknown)}; ignored`);
      }
    }
  }

  #clearTimers(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
