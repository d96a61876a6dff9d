/**
 * One response stream on the caller side: waits for its worker to call home, then turns the
 * worker's frames into an async iterable of items and the caller's stop/kill into control frames.
 */

import type { Socket } from 'node:net';
import { CannotConnect, Disconnected, dynamoExceptionOf } from '../errors.js';
import type { ConnectionInfo } from '../wire/control.js';
import type { TwoPartFrame } from '../wire/envelope.js';
import { setPeerTimeout } from '../wire/socket-helpers.js';
import { controlWord, KILL_FRAME, parseDataFrame, parsePrologue, ResponseProtocolError, STOP_FRAME } from './frames.js';
import { ItemQueue } from './item-queue.js';
import { type PumpControl, ReadFlag, type StreamReader } from './stream-reader.js';
import { handOverReads } from './socket-handover.js';
import type { Log } from '../logger.js';

/** Where the worker's side of the stream is. */
type Phase =
  | 'waiting' // registered; the worker has not called home
  | 'prologue' // handshake seen; waiting for the prologue
  | 'streaming' // prologue ok; data frames flowing
  | 'complete' // complete_final seen; waiting for the sentinel
  | 'closed'; // no socket any more, or its frames are dropped

/**
 * What the caller asked of the worker: nothing yet, a stop (`wanted` until the stop frame could be
 * sent on a connected socket, then `sent`), or a kill (the stream is over for the caller).
 */
type Ask = 'none' | 'wanted' | 'sent' | 'killed';

/**
 * What a response stream is to its caller: where its items come from, and the controls that
 * reach the worker. {@link ResponseStreamServer} makes them.
 */
export interface PendingResponse {
  /** Goes into the request's control header as `connection_info`. */
  readonly connectionInfo: ConnectionInfo;
  /**
   * The response items (each data frame's `data`, parsed once), in order. Ends after the worker's
   * `complete_final`, or silently after {@link stop}/{@link kill}. Throws `CannotConnect` for an
   * error prologue, `Disconnected` when the stream ends without `complete_final` (the migration
   * trigger) or the worker never calls home, `ResponseProtocolError` for malformed frames.
   * Leaving a `for await` early kills the stream. Iterate it once.
   */
  readonly stream: AsyncIterable<unknown>;
  /**
   * The same items as {@link stream}, read as batches: each batch is every item that had arrived
   * when the reader asked (at least one), so a reader that falls behind catches up in one step.
   * The first batch is the first item alone, so a backlog never delays the first token. Iterate
   * one of the two, once.
   */
  readonly batches: AsyncIterable<unknown[]>;
  /** Asks the worker to stop generating (`"stop"`); items keep arriving until it ends the stream. */
  stop(): void;
  /** Kills the stream (`"kill"`): the worker stops at once and the stream ends now, silently. */
  kill(): void;
  /**
   * Abandons the stream because its request never reached a worker (e.g. the request-plane send
   * failed): drops the registration and ends the stream, throwing `error` if one is given.
   */
  cancel(error?: Error): void;
}

const DONE: IteratorResult<unknown> = { done: true, value: undefined };

/** Constructor arguments of {@link ResponseStream} (internal to the response plane). */
export interface ResponseStreamInit {
  connectionInfo: ConnectionInfo;
  callHomeTimeoutMs: number;
  signal: AbortSignal | undefined;
  log: Log;
  /** Reads the socket's bytes itself; the stream's items are what it produces. */
  reader?: StreamReader | undefined;
  /** Removes the stream from its server's pending map. */
  unregister(): void;
}

/**
 * See {@link PendingResponse}; the server feeds it frames and socket events. Two state machines
 * drive it: the worker's side (`Phase`) and the caller's wish (`Ask`); the consumer's side is an
 * {@link ItemQueue}.
 */
export class ResponseStream implements PendingResponse, AsyncIterableIterator<unknown> {
  readonly connectionInfo: ConnectionInfo;
  /** Takes the socket's bytes whole after the handshake (see {@link onBytes}), when set. */
  readonly reader: StreamReader | undefined;
  readonly #log: Log;
  readonly #unregister: () => void;
  readonly #signal: AbortSignal | undefined;
  readonly #onAbort = () => this.kill();
  readonly #queue = new ItemQueue();
  #phase: Phase = 'waiting';
  #ask: Ask = 'none';
  #socket: Socket | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(init: ResponseStreamInit) {
    this.connectionInfo = init.connectionInfo;
    this.#log = init.log;
    this.reader = init.reader;
    this.#unregister = init.unregister;
    this.#signal = init.signal;
    this.#timer = setPeerTimeout(() => {
      // The worker called home while this process was stalled past the deadline.
      if (this.#socket) return;
      this.#unregister();
      // A caller that already asked to stop gets the early end it wanted, not an error.
      if (this.#ask !== 'none') {
        this.#end();
        return;
      }
      this.#fail(new Disconnected(`worker never called home for request ${init.connectionInfo.info.context} within ${init.callHomeTimeoutMs} ms`));
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
        next: () => this.#queue.read(true) as Promise<IteratorResult<unknown[]>>,
        return: () => this.return() as Promise<IteratorResult<unknown[]>>,
      }),
    };
  }

  /** True once no more items or errors will be queued. */
  get settled(): boolean {
    return this.#queue.settled;
  }

  // ---- caller controls --------------------------------------------------------------------

  stop(): void {
    if (this.#ask !== 'none' || this.#queue.settled) return;
    this.#ask = 'wanted';
    this.#sendStop();
  }

  kill(): void {
    if (this.#ask === 'killed') return;
    this.#queue.abort();
    this.#release();
    this.#abandon();
  }

  cancel(error?: Error): void {
    if (!error || this.#queue.settled) {
      this.kill();
      return;
    }
    this.#queue.discard();
    this.#fail(error);
    this.#abandon();
  }

  /** Forgets the registration and tells a connected worker to stop at once. */
  #abandon(): void {
    if (this.#ask === 'killed') return;
    this.#ask = 'killed';
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
    return this.#queue.read(false);
  }

  /** Called when a `for await` exits early: the caller no longer wants the response. */
  return(): Promise<IteratorResult<unknown>> {
    if (!this.#queue.settled) this.kill();
    this.#queue.leave();
    return Promise.resolve(DONE);
  }

  // ---- fed by the server --------------------------------------------------------------------

  /** The worker's handshake named this stream. */
  attach(socket: Socket): void {
    clearTimeout(this.#timer);
    this.#socket = socket;
    if (this.#ask === 'killed') {
      // Killed before the worker called home: tell it, so it stops generating.
      socket.end(KILL_FRAME);
      this.#phase = 'closed';
      return;
    }
    this.#phase = 'prologue';
    this.#queue.setSource(socket);
    this.reader?.connect();
    this.#sendStop();
  }

  /** One socket read of a stream with a {@link reader}, after the handshake. */
  onBytes(chunk: Buffer): void {
    if (!this.#reading) return;
    this.#onRead(this.reader!.read(chunk));
  }

  /**
   * Lets a reader that can read sockets natively read this one from here on (Node reads it no
   * more; its writes, end and destroy stay Node's). Returns whether it does.
   */
  pump(socket: Socket): boolean {
    const reader = this.reader;
    if (!reader?.pump || !this.#reading || socket.destroyed) return false;
    let pump: PumpControl | undefined;
    const handed = handOverReads(socket, (fd) => {
      pump = reader.pump!(fd, (flags) => {
        if (this.#reading) this.#onRead(flags);
        // Node never saw the end: closing its side runs the usual close handling.
        if (flags & ReadFlag.CLOSED) socket.destroy();
      });
    });
    if (pump) {
      socket.once('close', pump.stop);
      // The consumer's back-pressure pauses the native reads now.
      this.#queue.setSource(pump);
    }
    return handed;
  }

  get #reading(): boolean {
    return this.#phase === 'prologue' || this.#phase === 'streaming' || this.#phase === 'complete';
  }

  #onRead(flags: number): void {
    const reader = this.reader!;
    if ((flags & ~ReadFlag.CLOSED) === 0) return;
    if (flags & ReadFlag.STARTED) this.#phase = 'streaming';
    if (flags & ReadFlag.OUTPUT) this.#queue.push(reader.take());
    if (flags & ReadFlag.STRAY_CONTROL)
      this.#log.warn({ subject: this.connectionInfo.info.subject, word: reader.problem }, 'ignoring control frame sent by the worker');
    if (flags & ReadFlag.WORKER_ERROR) {
      // As an error item read by the client: the items before it, then the error; the worker is told to stop.
      this.#fail(dynamoExceptionOf(reader.problemKind, reader.problem));
      this.#abandon();
    } else if (flags & ReadFlag.REFUSED) {
      this.#refused(reader.problem);
    } else if (flags & ReadFlag.VIOLATION) {
      this.#protocolError(reader.problem);
    } else if (flags & ReadFlag.END) {
      this.#phase = 'complete';
      this.#end();
    }
    if (flags & ReadFlag.SENTINEL) this.#socket?.destroy();
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
        this.#queue.push(parsed.data);
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
      this.#refused(error);
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

  /** The frame decoder gave up (oversized or garbage lengths), or the stream's reader threw. */
  onDecodeError(err: Error): void {
    this.#protocolError(err.message);
  }

  /** The call-home socket closed; `leftover` is the size of an unfinished frame the server's decoder holds. */
  onClose(leftover: number): void {
    if (this.reader) leftover = this.reader.buffered;
    const phase = this.#phase;
    this.#phase = 'closed';
    this.#socket = undefined;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#queue.setSource(undefined);
    if (phase === 'complete' || this.#queue.settled) return;
    if (this.#ask !== 'none') {
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
    if (this.#ask !== 'wanted') return;
    const socket = this.#socket;
    if (!socket || socket.destroyed || (this.#phase !== 'prologue' && this.#phase !== 'streaming')) return;
    this.#ask = 'sent';
    socket.write(STOP_FRAME);
  }

  /** No more items: the consumer gets the queued ones, then the end. */
  #end(): void {
    if (this.#queue.end()) this.#release();
  }

  /** The stream failed: the consumer gets the queued items, then `err`. */
  #fail(err: Error): void {
    // A killed stream ends silently, and a stream fails at most once.
    if (this.#ask === 'killed' || !this.#queue.fail(err)) {
      this.#log.debug({ subject: this.connectionInfo.info.subject, err }, 'response stream error after the stream was over');
      return;
    }
    this.#release();
  }

  /** Nothing more is queued: the call-home timer and the abort listener go. */
  #release(): void {
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener('abort', this.#onAbort);
  }

  /** The worker's error prologue: it could not start the handler. */
  #refused(error: string): void {
    this.#fail(new CannotConnect(`worker generate() failed before response stream: ${error}`));
    this.#phase = 'closed';
    this.#closeSocket();
  }

  #protocolError(reason: string): void {
    this.#log.warn({ subject: this.connectionInfo.info.subject, reason }, 'call-home response stream protocol error; closing it');
    this.#fail(new ResponseProtocolError(`response stream protocol error: ${reason}`));
    this.#socket?.destroy();
    this.#phase = 'closed';
  }

  #closeSocket(): void {
    const socket = this.#socket;
    if (!socket || socket.destroyed) return;
    this.#queue.setSource(undefined);
    if (socket.isPaused()) socket.resume();
    socket.end();
    // A worker that never closes its side must not keep the socket forever.
    // Cleared on close: an armed timer keeps the closed socket reachable for 10 s (50k sockets,
    // ~130 MB of heap, at 5k requests/s).
    const timer = setTimeout(() => socket.destroy(), 10_000).unref();
    socket.once('close', () => clearTimeout(timer));
  }
}
