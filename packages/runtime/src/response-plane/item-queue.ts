/**
 * The consumer side of a response stream: items queued as frames arrive, read one at a time or
 * in batches, then the stream's end or its error. Pauses its source when the consumer falls
 * behind.
 */

// Beyond this many queued items the source is paused, so the worker feels TCP back-pressure
// instead of our memory growing. (Dynamo buffers 64 per response channel; 32 keeps less decoded
// ahead of a consumer that takes turns, which cut TTFT at c64.)
const HIGH_WATER = 32;
const LOW_WATER = 16;
// A batch read takes at most this many items: a fast engine's whole output, taken at once, made
// one long step that held up the loop (and every new request's first token) for it.
const MAX_BATCH = 16;

/**
 * What the consumer gets after the queued items:
 * - `open`: more items may come;
 * - `ended`: the end;
 * - `failed`: an error;
 * - `delivered`: the consumer has had the end or the error (or left), nothing more comes.
 */
type Outcome = { state: 'open' } | { state: 'ended' } | { state: 'failed'; error: Error } | { state: 'delivered' };

interface Waiter {
  /** Wants every queued item at once rather than the next one. */
  batch: boolean;
  resolve(result: IteratorResult<unknown>): void;
  reject(err: unknown): void;
}

/** What the consumer gets next: an iterator result, or the stream's error. */
type Taken = { result: IteratorResult<unknown> } | { error: Error };

const DONE: IteratorResult<unknown> = { done: true, value: undefined };
const OPEN: Outcome = { state: 'open' };
const ENDED: Outcome = { state: 'ended' };
const DELIVERED: Outcome = { state: 'delivered' };

/** Where the items come from, for back-pressure. */
export interface ItemSource {
  pause(): void;
  resume(): void;
}

export class ItemQueue {
  #items: unknown[] = [];
  #head = 0;
  #outcome: Outcome = OPEN;
  #source: ItemSource | undefined;
  #paused = false;
  /** The consumer has had an item: later batch reads take the whole backlog. */
  #taken = false;
  #waiter: Waiter | undefined;
  #wakeScheduled = false;
  readonly #wake = () => {
    this.#wakeScheduled = false;
    this.#settle();
  };

  /** True once no more items or errors will be queued. */
  get settled(): boolean {
    return this.#outcome.state !== 'open';
  }

  /** True once the consumer has had the end or the error, or left. */
  get delivered(): boolean {
    return this.#outcome.state === 'delivered';
  }

  /** Where items come from from now on (paused while the consumer is behind). */
  setSource(source: ItemSource | undefined): void {
    this.#source = source;
    this.#paused = false;
  }

  push(item: unknown): void {
    this.#items.push(item);
    const waiter = this.#waiter;
    if (waiter) {
      // A batch reader is woken after the frames of this socket read are all queued.
      if (!waiter.batch) this.#settle();
      else if (!this.#wakeScheduled) {
        this.#wakeScheduled = true;
        queueMicrotask(this.#wake);
      }
    }
    if (!this.#paused && this.#items.length - this.#head >= HIGH_WATER) {
      this.#paused = true;
      this.#source?.pause();
    }
  }

  /** No more items: the consumer gets the queued ones, then the end. Returns whether it was open. */
  end(): boolean {
    if (this.#outcome.state !== 'open') return false;
    this.#outcome = ENDED;
    this.#settle();
    return true;
  }

  /**
   * The stream failed: the consumer gets the queued items, then `error`. Returns false (and
   * changes nothing) when the stream already failed or its consumer is done.
   */
  fail(error: Error): boolean {
    if (this.#outcome.state === 'failed' || this.#outcome.state === 'delivered') return false;
    this.#outcome = { state: 'failed', error };
    this.#settle();
    return true;
  }

  /** Drops the queued items; the consumer gets what comes after them next. */
  discard(): void {
    this.#dropItems();
  }

  /** Drops what is queued, an error included: the consumer gets the end next. */
  abort(): void {
    this.#dropItems();
    if (this.#outcome.state !== 'delivered') this.#outcome = ENDED;
    this.#settle();
  }

  /** The consumer left: nothing more is delivered. */
  leave(): void {
    this.#dropItems();
    this.#outcome = DELIVERED;
  }

  read(batch: boolean): Promise<IteratorResult<unknown>> {
    const taken = this.#take(batch);
    if (taken) return 'error' in taken ? Promise.reject(taken.error) : Promise.resolve(taken.result);
    return new Promise((resolve, reject) => {
      this.#waiter = { batch, resolve, reject };
    });
  }

  /** The next item (or all queued ones), then the error or the end; undefined while none is ready. */
  #take(batch: boolean): Taken | undefined {
    if (this.#head < this.#items.length) {
      let value: unknown;
      // The first item goes alone, even to a batch reader: it is the caller's time to first
      // token, and a backlog read with it (a fast engine's whole output) would hold it back.
      if (batch && this.#taken) {
        const queued = this.#items.length - this.#head;
        if (queued > MAX_BATCH) {
          value = this.#items.slice(this.#head, this.#head + MAX_BATCH);
          this.#head += MAX_BATCH;
          // Drop what was taken once it is half the array, so the array does not grow forever.
          if (this.#head * 2 >= this.#items.length) {
            this.#items = this.#items.slice(this.#head);
            this.#head = 0;
          }
        } else {
          value = this.#head === 0 ? this.#items : this.#items.slice(this.#head);
          this.#items = [];
          this.#head = 0;
        }
      } else {
        value = this.#items[this.#head];
        if (batch) value = [value];
        this.#items[this.#head++] = undefined;
        if (this.#head === this.#items.length) this.#dropItems();
      }
      this.#taken = true;
      if (this.#paused && this.#items.length - this.#head <= LOW_WATER) {
        this.#paused = false;
        this.#source?.resume();
      }
      return { result: { done: false, value } };
    }
    const outcome = this.#outcome;
    if (outcome.state === 'failed') {
      this.#outcome = DELIVERED;
      return { error: outcome.error };
    }
    if (outcome.state === 'ended') {
      this.#outcome = DELIVERED;
      return { result: DONE };
    }
    return outcome.state === 'delivered' ? { result: DONE } : undefined;
  }

  /** Gives a waiting consumer what is ready. */
  #settle(): void {
    const waiter = this.#waiter;
    if (!waiter) return;
    const taken = this.#take(waiter.batch);
    if (!taken) return;
    this.#waiter = undefined;
    if ('error' in taken) waiter.reject(taken.error);
    else waiter.resolve(taken.result);
  }

  #dropItems(): void {
    this.#items = [];
    this.#head = 0;
  }
}
