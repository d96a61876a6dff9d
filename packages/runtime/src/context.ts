import { randomUUID } from 'node:crypto';
import { Cancelled } from './errors.js';
import type { TraceContext } from './trace.js';

/** Options for constructing a {@link Context} directly (tests, or an engine calling itself). */
export interface ContextOptions {
  /** Request id; a random UUID when omitted. */
  id?: string;
  /** Initial request metadata. */
  metadata?: Iterable<readonly [string, string]> | Record<string, string>;
  /** The W3C trace the request belongs to (from its `traceparent` header). */
  trace?: TraceContext;
}

/**
 * The per-request handle an engine's `generate` receives. It tells the engine when the caller has
 * stopped (finish soon, with a `cancelled` terminal) or killed (drop everything) the request.
 */
export class Context {
  readonly #id: string;
  readonly #controller = new AbortController();
  #stopped = false;
  #killed = false;
  readonly #onKill = new Set<() => void>();
  /** Free-form request metadata (trace ids, routing hints); mutable by the engine. */
  readonly metadata: Map<string, string>;
  /**
   * The W3C trace the caller sent in `traceparent` / `tracestate`, if any. Pass this context to a
   * client call (`{ context }`) and the call continues the trace.
   */
  readonly trace: TraceContext | undefined;

  constructor(options: ContextOptions = {}) {
    this.#id = options.id ?? randomUUID();
    this.trace = options.trace;
    const initial = options.metadata ?? [];
    this.metadata = new Map(Symbol.iterator in initial ? initial : Object.entries(initial));
  }

  /** The request id (Dynamo's context id). */
  id(): string {
    return this.#id;
  }

  /** True once the caller asked the stream to stop (or killed it). Check it between yields. */
  isStopped(): boolean {
    return this.#stopped;
  }

  /** True once the caller killed the stream: stop without a final chunk. */
  isKilled(): boolean {
    return this.#killed;
  }

  /** Aborted on stop or kill, with a {@link Cancelled} reason: pass it to I/O the engine awaits. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Asks the engine to finish this request early; idempotent. */
  stopGenerating(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#controller.abort(new Cancelled(`request ${this.#id} was stopped`));
  }

  /** Kills the request: stopped, and no further output is wanted; idempotent. */
  kill(): void {
    if (this.#killed) return;
    this.#killed = true;
    this.stopGenerating();
    for (const hook of this.#onKill) hook();
    this.#onKill.clear();
  }

  /** Resolves when the request is killed (at once if it already was). */
  killed(): Promise<void> {
    if (this.#killed) return Promise.resolve();
    return new Promise((resolve) => this.#onKill.add(resolve));
  }

  /** Resolves when the request is stopped or killed. */
  stopped(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => this.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}
