import { Cancelled, WorkerOverloaded } from '@dynamo/runtime';

/** The order queued requests leave in: arrival (`fcfs`) or shortest prompt first (`wspt`, Smith's rule). */
export type QueuePolicy = 'fcfs' | 'wspt';

/** A full queue's refusal (529), with stock's structured details. */
export class QueueFull extends WorkerOverloaded {
  readonly details: { policy_class: string; limit_kind: 'requests' | 'raw_isl_tokens'; current: number; limit: number };

  constructor(details: QueueFull['details']) {
    super(`router policy class "${details.policy_class}" queue ${details.limit_kind} limit reached (current=${details.current}, limit=${details.limit})`);
    this.details = details;
  }
}

/** How long a queue may grow, per worker serving the model (unset: no limit, stock's default). */
export interface QueueLimits {
  requestsPerWorker?: number;
  islTokensPerWorker?: number;
}

interface Waiting<T> {
  seq: number;
  /** Prompt tokens: what `wspt` weighs, and what the token limit counts. */
  isl: number;
  run: () => T;
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
  forget: () => void;
}

/**
 * Requests waiting for a worker with room (stock 1.6.1's router queue, one policy class). A
 * request waits while the queue has others before it or while `full()` says every worker is
 * busy; {@link drain} lets requests go, in policy order, while workers have room. A queue past
 * its limits refuses with {@link QueueFull}; a request whose client leaves is dropped.
 */
export class RequestQueue<T> {
  readonly policy: QueuePolicy;
  readonly policyClass: string;
  readonly #limits: QueueLimits;
  readonly #items: Waiting<T>[] = [];
  readonly #onChange: (pending: number, islTokens: number) => void;
  #seq = 0;
  #islTokens = 0;

  constructor(policy: QueuePolicy, policyClass: string, limits: QueueLimits, onChange: (pending: number, islTokens: number) => void) {
    this.policy = policy;
    this.policyClass = policyClass;
    this.#limits = limits;
    this.#onChange = onChange;
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#items.length;
  }

  /**
   * Queues `run` (the routing of one request) until {@link drain} lets it go. Throws
   * {@link QueueFull} when the queue is at a limit for `workers` workers; rejects with
   * `Cancelled` when `signal` aborts first.
   */
  push(isl: number, workers: number, signal: AbortSignal | undefined, run: () => T): Promise<T> {
    const { requestsPerWorker, islTokensPerWorker } = this.#limits;
    if (requestsPerWorker !== undefined && this.#items.length >= requestsPerWorker * workers) {
      throw new QueueFull({ policy_class: this.policyClass, limit_kind: 'requests', current: this.#items.length, limit: requestsPerWorker * workers });
    }
    if (islTokensPerWorker !== undefined && this.#islTokens >= islTokensPerWorker * workers) {
      throw new QueueFull({ policy_class: this.policyClass, limit_kind: 'raw_isl_tokens', current: this.#islTokens, limit: islTokensPerWorker * workers });
    }
    return new Promise<T>((resolve, reject) => {
      const item: Waiting<T> = { seq: this.#seq++, isl, run, resolve, reject, forget: () => {} };
      if (signal) {
        const abort = () => {
          if (this.#remove(item)) reject(new Cancelled('client closed the request while it waited for a worker'));
        };
        signal.addEventListener('abort', abort, { once: true });
        item.forget = () => signal.removeEventListener('abort', abort);
      }
      this.#insert(item);
    });
  }

  /** Lets queued requests go, first in policy order, while `hasRoom()` says a worker can take one. */
  drain(hasRoom: () => boolean): void {
    while (this.#items.length > 0 && hasRoom()) {
      const item = this.#items.shift()!;
      this.#islTokens -= item.isl;
      item.forget();
      this.#changed();
      try {
        item.resolve(item.run());
      } catch (err) {
        item.reject(err);
      }
    }
  }

  /** Refuses every waiting request with `error` (the model is no longer served). */
  clear(error: Error): void {
    for (const item of this.#items.splice(0)) {
      item.forget();
      item.reject(error);
    }
    this.#islTokens = 0;
    this.#changed();
  }

  #insert(item: Waiting<T>): void {
    // Smith's rule with equal weights: the shortest job first; arrival breaks ties (and orders fcfs).
    const before = (a: Waiting<T>, b: Waiting<T>) => (this.policy === 'wspt' && a.isl !== b.isl ? a.isl < b.isl : a.seq < b.seq);
    let at = this.#items.length;
    while (at > 0 && before(item, this.#items[at - 1]!)) at -= 1;
    this.#items.splice(at, 0, item);
    this.#islTokens += item.isl;
    this.#changed();
  }

  #remove(item: Waiting<T>): boolean {
    const at = this.#items.indexOf(item);
    if (at < 0) return false;
    this.#items.splice(at, 1);
    this.#islTokens -= item.isl;
    this.#changed();
    return true;
  }

  #changed(): void {
    this.#onChange(this.#items.length, this.#islTokens);
  }
}
