import type { ShutdownPlanner } from '@dynamo/core';

/** One stage's record, as the planner reports it. */
export interface StageOutcome {
  stage: string;
  reason: string;
  elapsed_ms: number;
  remaining_total_ms: number | null;
  detail: string | null;
}

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
  log(level: 'debug' | 'info' | 'warn' | 'error', message: string): void;
  exit(code: number): void;
}

type Action = { type: string; [key: string]: unknown };
type Event = { type: string; [key: string]: unknown };

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
    const actions = this.#planner.on(this.#now(), event) as Action[];
    for (const action of actions) this.#perform(action);
  }

  #answer(work: Promise<Event>): void {
    void work.then((event) => this.#feed(event));
  }

  #tickAfter(ms: unknown): void {
    if (typeof ms !== 'number') return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#feed({ type: 'tick' });
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  #perform(action: Action): void {
    const host = this.#host;
    switch (action.type) {
      case 'unregister':
        return this.#answer(host.unregister().then(
          () => ({ type: 'unregistered' }),
          (err: unknown) => ({ type: 'unregistered', error: message(err) }),
        ));
      case 'sleep': {
        const timer = setTimeout(() => {
          this.#timers.delete(timer);
          this.#feed({ type: 'wake' });
        }, action.ms as number);
        this.#timers.add(timer);
        return;
      }
      case 'stop_admission':
        host.stopAdmission();
        return this.#feed({ type: 'admission_stopped' });
      case 'wait_inflight': {
        const timeout = (action.timeout_ms as number | null) ?? undefined;
        return this.#answer(host.waitInflight(timeout).then((left) => (left === 0 ? { type: 'inflight_drained' } : { type: 'inflight_timed_out', inflight: left })));
      }
      case 'call_drain':
        this.#tickAfter(action.timeout_ms);
        return this.#answer(host.drain().then(
          () => ({ type: 'drained' }),
          (err: unknown) => ({ type: 'drained', error: message(err) }),
        ));
      case 'poll_quiescent':
        this.#tickAfter(action.timeout_ms);
        return this.#answer(host.isQuiescent().then(
          (value) => ({ type: 'quiescent', value }),
          (err: unknown) => ({ type: 'quiescent', value: null, error: message(err) }),
        ));
      case 'call_cleanup':
        return this.#answer(host.cleanup(action.timeout_ms as number).then((result) =>
          result === 'ok' ? { type: 'cleanup_done' } : result === 'timed_out' ? { type: 'cleanup_timed_out' } : { type: 'cleanup_done', error: result.error },
        ));
      case 'record_stage':
        return host.record(action as unknown as StageOutcome);
      case 'log':
        return host.log(action.level as 'info', action.message as string);
      case 'exit':
        this.#clearTimers();
        return host.exit(action.code as number);
      case 'done':
        this.#clearTimers();
        return this.#resolve();
      default:
        host.log('error', `unknown shutdown action ${JSON.stringify(action)}; ignored`);
    }
  }

  #clearTimers(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
