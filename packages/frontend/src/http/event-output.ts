import { STREAM_TOKENS_SHIFT, type StreamProcessor } from '@dynamo/core';
import { ReadFlag } from '@dynamo/runtime';

import type { RequestTracker } from '../metrics.js';
import type { OutputReader } from '../pipeline/migration.js';
import type { SseWriter } from './sse.js';

/**
 * One streamed choice's events on their way to the client, on the Rust path: each read of the
 * worker's call-home socket goes into the choice's `StreamProcessor` once. While the response has
 * started, nothing is queued and the client keeps up, the events a read adds are written at once,
 * from the read itself: no promise, no queue, per token. Otherwise (before the response started,
 * while the client pushes back or earlier events wait, and for the last events) the read's events
 * become the stream's next item, which the consumer (`streamEvents`) writes in order.
 */
export class EventOutput implements OutputReader {
  readonly processor: StreamProcessor;
  readonly #tracker: RequestTracker;
  readonly #promptTokens: number;
  #sse: SseWriter | undefined;
  /** Reads whose events wait in the stream's queue: writes from a read wait until none do. */
  #queued = 0;
  /** Tokens of the queued reads, counted when the consumer takes them. */
  #queuedTokens = 0;
  #lastOutputAt = performance.now();

  constructor(processor: StreamProcessor, tracker: RequestTracker, promptTokens: number) {
    this.processor = processor;
    this.#tracker = tracker;
    this.#promptTokens = promptTokens;
  }

  /** The response started: from now on, events may be written as their reads come. */
  start(sse: SseWriter): void {
    this.#sse = sse;
  }

  /** Reads whose events wait in the stream's queue, not yet taken by the consumer. */
  get queuedReads(): number {
    return this.#queued;
  }

  /** The consumer took `count` queued reads' events (and writes them): their tokens count now. */
  taken(count: number): void {
    this.#queued -= count;
    this.#tracker.tokens(this.#queuedTokens, this.#promptTokens);
    this.#queuedTokens = 0;
  }

  // ---- OutputReader -------------------------------------------------------------------------

  connect(): void {
    this.processor.connect();
  }

  read(piece: Buffer): number {
    const result = this.processor.read(piece);
    if ((result & ReadFlag.OUTPUT) === 0) return result;
    this.#lastOutputAt = performance.now();
    const tokens = result >>> STREAM_TOKENS_SHIFT;
    const sse = this.#sse;
    // The last events go through the consumer, which ends the response after them.
    if (sse !== undefined && this.#queued === 0 && (result & ReadFlag.FINISHED) === 0 && !sse.backedUp) {
      this.#tracker.tokens(tokens, this.#promptTokens);
      sse.direct(this.processor.take(sse.chunked));
      return result & ~ReadFlag.OUTPUT;
    }
    this.#queued += 1;
    this.#queuedTokens += tokens;
    return result;
  }

  take(): string {
    return this.processor.take();
  }

  finishLength(): void {
    this.processor.finishLength();
    this.#queued += 1;
  }

  get lastOutputAt(): number {
    return this.#lastOutputAt;
  }

  get problem(): string {
    return this.processor.problem;
  }

  get problemKind(): string {
    return this.processor.problemKind;
  }

  get buffered(): number {
    return this.processor.buffered;
  }

  get generated(): Uint32Array {
    return this.processor.generated;
  }

  get completionTokens(): number {
    return this.processor.completionTokens;
  }
}
