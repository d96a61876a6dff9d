import { STREAM_TOKENS_SHIFT, type StreamProcessor } from '@dynamo/core';
import { type PumpControl, ReadFlag } from '@dynamo/runtime';
import { socketFd } from '@dynamo/runtime/internal';

import type { RequestTracker } from '../metrics.js';
import type { OutputReader } from '../attempts/migration.js';
import type { SseWriter } from '../http/sse.js';

/**
 * One streamed choice's events on their way to the client, on the Rust path: each read of the
 * worker's call-home socket goes into the choice's `StreamProcessor` once. While the response has
 * started, nothing is queued and the client keeps up, the events a read adds are written at once,
 * from the read itself: no promise, no queue, per token. Otherwise (before the response started,
 * while the client pushes back or earlier events wait, and for the last events) the read's events
 * become the stream's next item, which the consumer (`streamEvents`) writes in order.
 *
 * Where the sockets allow it, the processor reads the call-home socket itself ({@link pump}) and,
 * while the conditions above hold and nothing of JavaScript's is queued for the client's socket,
 * sends the events to it from the same native callback ("direct sends"): then a token costs no
 * JavaScript at all. Any write of JavaScript's own stops direct sends first ({@link SseWriter}'s
 * `beforeWrite`); the next read that reaches JavaScript allows them again once the socket is idle.
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
  /** Sockets pumped so far: a stop only applies to its own pump. */
  #pumps = 0;
  /** The client's socket is the processor's for direct sends. */
  #client = false;
  readonly #stopDirect = () => {
    this.processor.sendDirect(false);
  };

  constructor(processor: StreamProcessor, tracker: RequestTracker, promptTokens: number) {
    this.processor = processor;
    this.#tracker = tracker;
    this.#promptTokens = promptTokens;
  }

  /** The response started: from now on, events may be written as their reads come. */
  start(sse: SseWriter): void {
    if (this.#sse === undefined) {
      this.#sse = sse;
      const socket = sse.socket;
      const fd = socket && socketFd(socket);
      if (fd !== undefined) {
        this.processor.setClient(fd, sse.chunked);
        this.#client = true;
        sse.beforeWrite = this.#stopDirect;
        sse.writtenAt = () => this.lastOutputAt;
      }
    }
    this.#allowDirect();
  }

  /** The response is over: no more direct sends, and the pumped output is counted. */
  finish(): void {
    if (this.#client) {
      this.#client = false;
      this.processor.sendDirect(false);
      this.processor.releaseClient();
    }
    this.#count();
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
    this.#count();
  }

  /** Direct sends are allowed exactly while a read's events could be written at once from JavaScript. */
  #allowDirect(): void {
    if (this.#client) this.processor.sendDirect(this.#queued === 0 && this.#sse!.idle);
  }

  /** Counts the output the processor timed (pumped reads). */
  #count(): void {
    if (this.#pumps === 0) return;
    const gaps = this.processor.takeGaps();
    if (gaps.length > 0) this.#tracker.timed(gaps, this.#promptTokens);
  }

  /** A pumped read that reached JavaScript: its output as in {@link read}; returns the stream's flags. */
  #pumped(flags: number): number {
    const processor = this.processor;
    const sse = this.#sse;
    // What a cut-short direct send left goes first; Node queues it and sends it as the client reads.
    if (flags & ReadFlag.UNSENT) sse?.direct(processor.takeUnsent());
    if (flags & ReadFlag.ACCOUNT) this.#count();
    if (flags & ReadFlag.OUTPUT) {
      this.#lastOutputAt = performance.now();
      if (sse !== undefined && this.#queued === 0 && (flags & ReadFlag.FINISHED) === 0 && sse.idle) {
        sse.direct(processor.take(sse.chunked));
        flags &= ~ReadFlag.OUTPUT;
      } else {
        this.#queued += 1;
      }
    }
    this.#allowDirect();
    return flags & ~(ReadFlag.UNSENT | ReadFlag.ACCOUNT);
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

  pump(fd: number, onRead: (flags: number) => void): PumpControl {
    const pump = ++this.#pumps;
    const processor = this.processor;
    processor.pump(fd, (flags) => onRead(this.#pumped(flags)));
    // Controls of an earlier socket's pump (before a migration) must not touch this one.
    const current = () => this.#pumps === pump;
    return {
      pause: () => {
        if (current()) processor.pausePump(true);
      },
      resume: () => {
        if (current()) processor.pausePump(false);
      },
      stop: () => {
        if (current()) processor.unpump();
      },
    };
  }

  finishLength(): void {
    this.processor.finishLength();
    this.#queued += 1;
  }

  get lastOutputAt(): number {
    const quiet = this.processor.msSinceOutput;
    return quiet === null ? this.#lastOutputAt : Math.max(this.#lastOutputAt, performance.now() - quiet);
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
