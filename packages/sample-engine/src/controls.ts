/**
 * The sample engine's engine controls, with stock Dynamo's names and reply shapes: `sleep` /
 * `wake_up` and `pause_generation` / `resume_generation` hold streams before their next token
 * until released (so a slept engine answers nothing until woken), and `clear_kv_blocks` drops the
 * simulated KV cache's unused blocks.
 */
export const SAMPLE_CONTROLS = ['sleep', 'wake_up', 'pause_generation', 'resume_generation', 'clear_kv_blocks'] as const;

type PauseMode = 'keep' | 'wait' | 'abort';
const PAUSE_MODES: ReadonlySet<string> = new Set<PauseMode>(['keep', 'wait', 'abort']);

/** One stream's state: whether it has made a token yet, and whether a pause aborted it. */
export interface HeldStream {
  started: boolean;
  aborted: boolean;
}

/** A promise with its resolver (Node 20 has no `Promise.withResolvers`). */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Whether streams may make their next token. Asleep, or paused in `keep` mode, every stream waits;
 * paused in `wait` mode, streams that already started finish and new ones wait (the pause replies
 * once those finished); paused in `abort` mode, running streams end as cancelled.
 */
export class GenerationHold {
  #sleeping: number | undefined;
  #pause: PauseMode | undefined;
  #released = deferred();
  #idle = deferred();
  readonly #streams = new Set<HeldStream>();

  /** A stream begins. */
  open(): HeldStream {
    const stream = { started: false, aborted: false };
    this.#streams.add(stream);
    return stream;
  }

  /** A stream ended, however it ended. */
  close(stream: HeldStream): void {
    this.#streams.delete(stream);
    if (![...this.#streams].some((s) => s.started)) this.#idle.resolve();
  }

  /**
   * Whether `stream` may make its next token: false when it must end now, cancelled (a pause in
   * `abort` mode). A promise only while the engine holds streams (asleep or paused), settled
   * when released or at once when `signal` aborts (the caller checks its context); otherwise
   * the answer is immediate, so a running stream pays no promise per token.
   */
  next(stream: HeldStream, signal: AbortSignal): boolean | Promise<boolean> {
    if (stream.aborted || signal.aborted || !this.#holds(stream)) {
      stream.started = true;
      return !stream.aborted;
    }
    return this.#whenReleased(stream, signal);
  }

  async #whenReleased(stream: HeldStream, signal: AbortSignal): Promise<boolean> {
    while (!stream.aborted && !signal.aborted && this.#holds(stream)) {
      const released = this.#released.promise;
      await new Promise<void>((resolve) => {
        const onAbort = () => resolve();
        signal.addEventListener('abort', onAbort, { once: true });
        void released.then(() => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    }
    stream.started = true;
    return !stream.aborted;
  }

  #holds(stream: HeldStream): boolean {
    if (this.#sleeping !== undefined) return true;
    return this.#pause !== undefined && !(this.#pause === 'wait' && stream.started);
  }

  /** Runs control `name`; the reply as stock's engines word it. */
  async control(name: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    switch (name) {
      case 'sleep': {
        const level = body.level ?? 1;
        if (level !== 1 && level !== 2 && level !== 3) return { status: 'error', message: `Invalid sleep level ${JSON.stringify(level)}; expected 1, 2 or 3` };
        if (this.#sleeping !== undefined) return { status: 'ok', message: 'Engine already sleeping', is_sleeping: true };
        this.#sleeping = level;
        return { status: 'ok', message: `Engine slept (level=${level})`, is_sleeping: true };
      }
      case 'wake_up':
        if (this.#sleeping === undefined) return { status: 'ok', message: 'Engine already awake', is_sleeping: false };
        this.#sleeping = undefined;
        this.#release();
        return { status: 'ok', message: 'Engine woke up', is_sleeping: false };
      case 'pause_generation': {
        const mode = body.mode ?? 'keep';
        if (typeof mode !== 'string' || !PAUSE_MODES.has(mode)) return { status: 'error', message: `Invalid mode '${String(mode)}'; expected keep|wait|abort` };
        this.#pause = mode as PauseMode;
        if (mode === 'abort') for (const stream of this.#streams) stream.aborted = true;
        this.#release();
        if (mode === 'wait') {
          this.#idle = deferred();
          if (![...this.#streams].some((s) => s.started)) this.#idle.resolve();
          await this.#idle.promise;
        }
        return { status: 'ok', message: 'Engine paused' };
      }
      case 'resume_generation':
        this.#pause = undefined;
        this.#release();
        return { status: 'ok', message: 'Engine resumed' };
      default:
        return { status: 'error', message: `unsupported engine control: ${name}` };
    }
  }

  /** Wakes every waiting stream to look again (the state changed). */
  #release(): void {
    this.#released.resolve();
    this.#released = deferred();
  }
}
