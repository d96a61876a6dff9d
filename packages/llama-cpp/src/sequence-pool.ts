import type { Context } from '@dynamo/backend';
import { WorkerOverloaded } from '@dynamo/backend';

/**
 * Hands out a fixed set of items (a llama.cpp context's sequences) one request at a time; requests
 * beyond them wait in FIFO order, up to `maxQueued`, and past that are refused.
 */
export class SequencePool<T> {
  readonly #free: T[];
  readonly #waiting: Array<{ grant: (item: T) => void; context: Context }> = [];
  readonly #maxQueued: number;

  constructor(items: T[], maxQueued: number) {
    this.#free = [...items];
    this.#maxQueued = maxQueued;
  }

  /** Requests waiting for an item. */
  get queued(): number {
    return this.#waiting.length;
  }

  /** Items in use. */
  active(total: number): number {
    return total - this.#free.length;
  }

  /**
   * An item, at once or when one is released; `undefined` when the request was stopped while it
   * waited. Throws when `maxQueued` requests are already waiting. With free items, `pick` chooses
   * among them (an index; default: the last released); a waiting request takes the next released.
   */
  async acquire(context: Context, pick?: (free: readonly T[]) => number): Promise<T | undefined> {
    if (this.#free.length > 0) return this.#free.splice(pick ? pick(this.#free) : this.#free.length - 1, 1)[0];
    if (this.#waiting.length >= this.#maxQueued) {
      throw new WorkerOverloaded(`overloaded: every sequence is busy and ${this.#maxQueued} request(s) already wait (raise --parallel or --max-queued)`);
    }
    return new Promise<T | undefined>((resolve) => {
      const waiter = { grant: resolve, context };
      this.#waiting.push(waiter);
      void context.stopped().then(() => {
        const at = this.#waiting.indexOf(waiter);
        if (at >= 0) {
          this.#waiting.splice(at, 1);
          resolve(undefined);
        }
      });
    });
  }

  /** Gives `item` to the longest-waiting request, or back to the pool. */
  release(item: T): void {
    const next = this.#waiting.shift();
    if (next) next.grant(item);
    else this.#free.push(item);
  }
}
