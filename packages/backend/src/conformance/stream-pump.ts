/**
 * Pulls an engine's async iterable ahead of its consumer into a bounded queue, so a consumer on the
 * other side of the native boundary takes every chunk produced so far in one call instead of one
 * crossing per token. Nothing is pulled before the first `take()`.
 */
export class StreamPump<T> {
  readonly #iterable: AsyncIterable<T>;
  readonly #highWater: number;
  #iterator: AsyncIterator<T> | undefined;
  #started = false;
  #queue: T[] = [];
  #ended = false;
  #failed = false;
  #failure: unknown;
  #closed = false;
  #wakeConsumer: (() => void) | undefined;
  #wakeProducer: (() => void) | undefined;

  constructor(iterable: AsyncIterable<T>, highWater = 1024) {
    this.#iterable = iterable;
    this.#highWater = highWater;
  }

  /**
   * Resolves with every chunk queued so far (at least one unless the stream is over) and whether
   * the stream has ended cleanly; rejects with the stream's error once its chunks are taken.
   */
  async take(): Promise<{ chunks: T[]; done: boolean }> {
    if (!this.#started) {
      this.#started = true;
      void this.#run();
    }
    while (this.#queue.length === 0 && !this.#ended) {
      await new Promise<void>((resolve) => (this.#wakeConsumer = resolve));
    }
    if (this.#queue.length === 0 && this.#failed) throw this.#failure;
    const chunks = this.#queue;
    this.#queue = [];
    this.#wakeProducer?.();
    return { chunks, done: this.#ended && !this.#failed };
  }

  /** Stops pulling and asks the iterator to finish (running the generator's `finally`). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeProducer?.();
    const iterator = this.#iterator;
    if (iterator?.return) Promise.resolve(iterator.return()).catch(() => {});
  }

  async #run(): Promise<void> {
    try {
      this.#iterator = this.#iterable[Symbol.asyncIterator]();
      while (!this.#closed) {
        const next = await this.#iterator.next();
        if (next.done || this.#closed) break;
        this.#queue.push(next.value);
        this.#wake();
        if (this.#queue.length >= this.#highWater) {
          await new Promise<void>((resolve) => (this.#wakeProducer = resolve));
        }
      }
    } catch (err) {
      this.#failed = true;
      this.#failure = err;
    } finally {
      this.#ended = true;
      this.#wake();
    }
  }

  #wake(): void {
    const wake = this.#wakeConsumer;
    this.#wakeConsumer = undefined;
    wake?.();
  }
}
