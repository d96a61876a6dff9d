/**
 * One response stream on the caller side: waits for its worker to call home, then turns the
 * worker's frames into an async iterable of items and the caller's stop/kill into control frames.
 */

import type { Socket } from 'node:net';
import { CannotConnect, Disconnected } from '../errors.js';
import type { ConnectionInfo } from '../request-plane/control.js';
import type { TwoPartFrame } from '../request-plane/envelope.js';
import type { PlaneLogger } from '../request-plane/socket-helpers.js';
import { controlWord, KILL_FRAME, parseDataFrame, parsePrologue, ResponseProtocolError, STOP_FRAME } from './frames.js';
import type { PendingResponse } from './stream-server.js';

// Dynamo buffers 64 items per response channel; beyond that we stop reading the socket so the
// worker feels TCP back-pressure instead of our memory growing.
const HIGH_WATER = 64;
const LOW_WATER = 16;

type Phase =
  | 'waiting' // registered; the worker has not called home
  | 'prologue' // handshake seen; waiting for the prologue
  | 'streaming' // prologue ok; data frames flowing
  | 'complete' // complete_final seen; waiting for the sentinel
  | 'closed'; // no socket any more

interface Waiter {
  /** Wants every queued item at once rather than the next one. */
  batch: boolean;
  resolve(result: IteratorResult<unknown>): void;
  reject(err: unknown): void;
}

/** What the consumer gets next: an iterator result, or the stream's error. */
type Taken = { result: IteratorResult<unknown> } | { error: Error };

const DONE: IteratorResult<unknown> = { done: true, value: undefined };

/** Constructor arguments of {@link ResponseStream} (internal to the response plane). */
export interface ResponseStreamInit {
  connectionInfo: ConnectionInfo;
  callHomeTimeoutMs: number;
  signal: AbortSignal | undefined;
  log: PlaneLogger;
  /** Removes the stream from its server's pending map. */
  unregister(): void;
}

/** See {@link PendingResponse}; the server feeds it frames and socket events. */
export class ResponseStream implements PendingResponse, AsyncIterableIterator<unknown> {
  readonly connectionInfo: ConnectionInfo;
  readonly #log: PlaneLogger;
  readonly #unregister: () => void;
  readonly #signal: AbortSignal | undefined;
  readonly #onAbort = () => this.kill();
  #phase: Phase = 'waiting';
  #socket: Socket | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopRequested = false;
  #stopSent = false;
  #killed = false;
  #paused = false;
  // Consumer side: a queue read from `#head`, then either an error or the end.
  #items: unknown[] = [];
  #head = 0;
  #error: Error | undefined;
  #ended = false;
  #delivered = false; // the consumer has seen the end or the error
  #taken = false; // the consumer has had an item
  #waiter: Waiter | undefined;
  #wakeScheduled = false;
  readonly #wake = () => {
    this.#wakeScheduled = false;
    this.#settle();
  };

  constructor(init: ResponseStreamInit) {
    this.connectionInfo = init.connectionInfo;
    this.#log = init.log;
    this.#unregister = init.unregister;
    this.#signal = init.signal;
    this.#timer = setTimeout(() => {
      this.#unregister();
      // A caller that already asked to stop gets the early end it wanted, not an error.
      if (this.#stopRequested) {
        this.#end();
        return;
      }
      this.#fail(
        new Disconnected(
          `worker never called home for request ${init.connectionInfo.info.context} within ${init.callHomeTimeoutMs} ms`,
        ),
      );
    }, init.callHomeTimeoutMs);
    if (this.#signal?.aborted) this.kill();
    else this.#signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  get stream(): AsyncIterable<unknown> {
    return this;
  }

  get batches(): AsyncIterable<unknown[]> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => this.#read(true) as Promise<IteratorResult<unknown[]>>,
        return: () => this.return() as Promise<IteratorResult<unknown[]>>,
      }),
    };
  }

  /** True once no more items or errors will be queued. */
  get settled(): boolean {
    return this.#ended;
  }

  // ---- caller controls --------------------------------------------------------------------

  stop(): void {
    if (this.#stopRequested || this.#ended) return;
    this.#stopRequested = true;
    this.#sendStop();
  }

  kill(): void {
    if (this.#killed) return;
    this.#dropQueue();
    this.#error = undefined;
    this.#end();
    this.#abandon();
  }

  cancel(error?: Error): void {
    if (!error || this.#ended) {
      this.kill();
      return;
    }
    this.#dropQueue();
    this.#fail(error);
    this.#abandon();
  }

  /** Forgets the registration and tells a connected worker to stop at once. */
  #abandon(): void {
    if (this.#killed) return;
    this.#killed = true;
    this.#stopRequested = true;
    this.#unregister();
    const socket = this.#socket;
    if (socket && !socket.destroyed && (this.#phase === 'prologue' || this.#phase === 'streaming')) {
      socket.write(KILL_FRAME);
    }
    // Frames still in flight are dropped from here on; the socket keeps reading until the EOF.
    if (this.#phase !== 'waiting') this.#phase = 'closed';
    this.#closeSocket();
  }

  // ---- async iteration --------------------------------------------------------------------

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  next(): Promise<IteratorResult<unknown>> {
    return this.#read(false);
  }

  #read(batch: boolean): Promise<IteratorResult<unknown>> {
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
        value = this.#head === 0 ? this.#items : this.#items.slice(this.#head);
        this.#items = [];
        this.#head = 0;
      } else {
        value = this.#items[this.#head];
        if (batch) value = [value];
        this.#items[this.#head++] = undefined;
        if (this.#head === this.#items.length) {
          this.#items = [];
          this.#head = 0;
        }
      }
      this.#taken = true;
      if (this.#paused && this.#items.length - this.#head <= LOW_WATER) {
        this.#paused = false;
        this.#socket?.resume();
      }
      return { result: { done: false, value } };
    }
    if (this.#error) {
      const error = this.#error;
      this.#error = undefined;
      this.#delivered = true;
      return { error };
    }
    if (this.#ended) {
      this.#delivered = true;
      return { result: DONE };
    }
    return undefined;
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

  /** Called when a `for await` exits early: the caller no longer wants the response. */
  return(): Promise<IteratorResult<unknown>> {
    if (!this.#ended) this.kill();
    this.#dropQueue();
    this.#error = undefined;
    this.#delivered = true;
    return Promise.resolve(DONE);
  }

  // ---- fed by the server --------------------------------------------------------------------

  /** The worker's handshake named this stream. */
  attach(socket: Socket): void {
    clearTimeout(this.#timer);
    this.#socket = socket;
    if (this.#killed) {
      // Killed before the worker called home: tell it, so it stops generating.
      socket.end(KILL_FRAME);
      this.#phase = 'closed';
      return;
    }
    this.#phase = 'prologue';
    this.#sendStop();
  }

  onFrame(frame: TwoPartFrame): void {
    if (this.#phase === 'streaming' && frame.header.length === 0) {
      let parsed;
      try {
        parsed = parseDataFrame(frame.body);
      } catch (err) {
        this.#protocolError((err as Error).message);
        return;
      }
      if (parsed.end) {
        this.#phase = 'complete';
        this.#end();
      } else {
        this.#push(parsed.data);
      }
      return;
    }
    if (this.#phase === 'prologue') {
      if (frame.body.length > 0 || frame.header.length === 0) {
        this.#protocolError('expected a header-only prologue frame');
        return;
      }
      let error: string | null;
      try {
        error = parsePrologue(frame.header);
      } catch (err) {
        this.#protocolError((err as Error).message);
        return;
      }
      if (error === null) {
        this.#phase = 'streaming';
        return;
      }
      this.#fail(new CannotConnect(`worker generate() failed before response stream: ${error}`));
      this.#phase = 'closed';
      this.#closeSocket();
      return;
    }
    if (this.#phase === 'complete') {
      if (frame.body.length === 0 && controlWord(frame.header) === 'sentinel') {
        // Normal end: the caller closes after the sentinel; the worker waits for that. Nothing
        // more may come, so close outright (no half-close, no timer): one syscall, not three.
        this.#socket?.destroy();
        return;
      }
      this.#protocolError(frame.header.length === 0 ? 'data frame after complete_final' : 'unexpected frame after complete_final');
      return;
    }
    if (this.#phase === 'streaming') {
      // A header frame while streaming: only the sentinel is defined, and only after the end.
      const word = frame.body.length === 0 ? controlWord(frame.header) : undefined;
      if (word === 'sentinel') this.#protocolError('sentinel before complete_final');
      else if (word === undefined) this.#protocolError('unexpected header frame in the data stream');
      else this.#log.warn({ subject: this.connectionInfo.info.subject, word }, 'ignoring control frame sent by the worker');
    }
    // 'closed' (killed/failed): late frames are dropped.
  }

  /** The frame decoder gave up (oversized or garbage lengths). */
  onDecodeError(err: Error): void {
    this.#protocolError(err.message);
  }

  /** The call-home socket closed; `leftover` is the size of an unfinished frame, if any. */
  onClose(leftover: number): void {
    const phase = this.#phase;
    this.#phase = 'closed';
    this.#socket = undefined;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    if (phase === 'complete' || this.#ended) return;
    if (this.#stopRequested) {
      // The caller asked for the stop; an early end is what it wanted.
      this.#end();
      return;
    }
    this.#fail(
      new Disconnected(
        `Stream ended before generation completed (request ${this.connectionInfo.info.context}` +
          (leftover > 0 ? `, ${leftover} bytes of a truncated frame` : '') +
          ')',
      ),
    );
  }

  // ---- internals ----------------------------------------------------------------------------

  #sendStop(): void {
    if (!this.#stopRequested || this.#stopSent || this.#killed) return;
    const socket = this.#socket;
    if (!socket || socket.destroyed || (this.#phase !== 'prologue' && this.#phase !== 'streaming')) return;
    this.#stopSent = true;
    socket.write(STOP_FRAME);
  }

  #push(item: unknown): void {
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
      this.#socket?.pause();
    }
  }

  /** No more items: the consumer gets the queued ones, then the end. */
  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#settle();
  }

  /** The stream failed: the consumer gets the queued items, then `err`. */
  #fail(err: Error): void {
    // A killed stream ends silently, and a stream fails at most once.
    if (this.#killed || this.#delivered || this.#error) {
      this.#log.debug({ subject: this.connectionInfo.info.subject, err }, 'response stream error after the stream was over');
      return;
    }
    this.#error = err;
    this.#ended = true;
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#settle();
  }

  #protocolError(reason: string): void {
    this.#log.warn({ subject: this.connectionInfo.info.subject, reason }, 'call-home response stream protocol error; closing it');
    this.#fail(new ResponseProtocolError(`response stream protocol error: ${reason}`));
    this.#socket?.destroy();
    this.#phase = 'closed';
  }

  #dropQueue(): void {
    this.#items = [];
    this.#head = 0;
  }

  #closeSocket(): void {
    const socket = this.#socket;
    if (!socket || socket.destroyed) return;
    if (this.#paused) {
      this.#paused = false;
      socket.resume();
    }
    socket.end();
    // A worker that never closes its side must not keep the socket forever.
    // Cleared on close: an armed timer keeps the closed socket reachable for 10 s (50k sockets,
    // ~130 MB of heap, at 5k requests/s).
    const timer = setTimeout(() => socket.destroy(), 10_000).unref();
    socket.once('close', () => clearTimeout(timer));
  }
}
