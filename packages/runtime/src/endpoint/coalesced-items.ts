/**
 * Merges two items of one stream into one, or returns `undefined` when they must go as they are.
 * Called with the item waiting to be sent and the next one, in order.
 */
export type MergeItems = (held: unknown, next: unknown) => unknown;

/**
 * One response stream's outgoing items, coalesced per turn of the event loop. The first item
 * leaves at once (it is the caller's time to first token); after it, the items a handler yields
 * before the loop moves on (the `process.nextTick` after the microtasks that produced them) are
 * merged where `merge` allows, so an engine that has several tokens ready sends one frame for
 * them, as stock's engines do, instead of one frame per token.
 */
export class CoalescedItems {
  readonly #send: (item: unknown) => Promise<void> | void;
  readonly #merge: MergeItems;
  #sentFirst = false;
  #held: unknown;
  #holding = false;
  #flushScheduled = false;
  /** Back-pressure from a send made by the end-of-turn flush, for the next `push` to return. */
  #backpressure: Promise<void> | void = undefined;

  constructor(send: (item: unknown) => Promise<void> | void, merge: MergeItems) {
    this.#send = send;
    this.#merge = merge;
  }

  /** Adds the next item. Returns a promise while the transport is backed up: await it before the next. */
  push(item: unknown): Promise<void> | void {
    if (!this.#sentFirst) {
      this.#sentFirst = true;
      return this.#send(item);
    }
    if (this.#holding) {
      const merged = this.#merge(this.#held, item);
      if (merged !== undefined) {
        this.#held = merged;
        return this.#takeBackpressure();
      }
      const backpressure = this.flush();
      this.#hold(item);
      return backpressure;
    }
    this.#hold(item);
    return this.#takeBackpressure();
  }

  /** Sends the held item now (at the end of the stream, or before an error item). */
  flush(): Promise<void> | void {
    const earlier = this.#takeBackpressure();
    if (!this.#holding) return earlier;
    const item = this.#held;
    this.#held = undefined;
    this.#holding = false;
    // A backed-up transport has one drain to wait for: the newer promise covers the earlier.
    return this.#send(item) ?? earlier;
  }

  #hold(item: unknown): void {
    this.#held = item;
    this.#holding = true;
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    process.nextTick(this.#endOfTurn);
  }

  /** Bound once: a paced stream holds every item after its first, one tick each. */
  readonly #endOfTurn = (): void => {
    this.#flushScheduled = false;
    this.#backpressure = this.flush();
  };

  #takeBackpressure(): Promise<void> | void {
    const backpressure = this.#backpressure;
    this.#backpressure = undefined;
    return backpressure;
  }
}
