/**
 * The worker side of Dynamo's call-home response plane: after acknowledging a request, the worker
 * dials the caller's stream server, names the pending stream in a handshake, sends a prologue,
 * then the items, the `complete_final` end marker and the sentinel. It keeps reading the socket
 * the whole time, because the caller's `"stop"` / `"kill"` arrive on it.
 */

import { connect, type Socket } from 'node:net';
import { Cancelled, CannotConnect } from '../errors.js';
import type { ConnectionInfo } from '../wire/control.js';
import { TwoPartDecoder, type TwoPartFrame } from '../wire/envelope.js';
import { type BatchedWriter, PEER_KEEPALIVE, setPeerTimeout, splitHostPort, tickBatchedWriter } from '../wire/socket-helpers.js';
import { controlWord, encodeHandshake, encodeItemFrame, encodePrologue, END_FRAME, itemJson, SENTINEL_FRAME } from './frames.js';
import { type Log, silentLog } from '../logger.js';
import { SpareConnections } from './spare-connections.js';
import { type OffThreadSend, writeOffThread } from './socket-handover.js';

/** This process's spare connections, shared by every endpoint it serves. */
const spares = new SpareConnections();

/** Options of {@link callHome}. */
export interface CallHomeOptions {
  /** Give up connecting to the caller after this long; default 5000 ms. */
  connectTimeoutMs?: number;
  /** After the sentinel (or an error prologue), wait this long for the caller to close; default 10 s. */
  closeWaitMs?: number;
  log?: Log;
  /**
   * Sends the first item from another thread while this one waits (`@dynamo/core`'s
   * `sendOffThread`), so that the caller's reader, which Linux wakes on the writing thread's CPU,
   * does not wait for this thread's next steps.
   */
  offThreadSend?: OffThreadSend | undefined;
}

/**
 * Connects to the caller named in `connectionInfo` and sends the handshake. A caller that sets
 * `handshake_timeout_ms` gets a connection dialed ahead when one is ready ({@link SpareConnections}).
 *
 * @throws CannotConnect when the caller cannot be reached.
 */
export async function callHome(connectionInfo: ConnectionInfo, options: CallHomeOptions = {}): Promise<ResponseSender> {
  const { info } = connectionInfo;
  if (connectionInfo.transport !== 'tcp_server') {
    throw new CannotConnect(`unsupported response transport '${String(connectionInfo.transport)}'; only tcp_server is implemented`);
  }
  let host: string;
  let port: number;
  try {
    ({ host, port } = splitHostPort(info.address));
  } catch (err) {
    throw new CannotConnect(`cannot call home: ${(err as Error).message}`, { cause: err });
  }
  const ahead = info.handshake_timeout_ms;
  if (ahead !== undefined) {
    const spare = spares.take(info.address);
    spares.refill(info.address, host, port, ahead);
    if (spare) return new ResponseSender(spare, info.subject, info.context, options);
  }
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port, noDelay: true, ...PEER_KEEPALIVE });
    const timer = setPeerTimeout(() => {
      if (!s.connecting) return;
      s.destroy();
      reject(new CannotConnect(`cannot call home to ${info.address}: no connection within ${connectTimeoutMs} ms`));
    }, connectTimeoutMs);
    s.once('error', (err) => {
      clearTimeout(timer);
      reject(new CannotConnect(`cannot call home to ${info.address}: ${err.message}`, { cause: err }));
    });
    s.once('connect', () => {
      clearTimeout(timer);
      resolve(s);
    });
  });
  return new ResponseSender(socket, info.subject, info.context, options);
}

type Phase =
  | 'handshaken' // handshake written, prologue not yet
  | 'open' // prologue ok: items may be sent
  | 'ending' // end marker + sentinel (or error prologue) written; waiting for the caller's close
  | 'closed';

/**
 * The writing end of one response stream. Send items with {@link send} (await it: it resolves at
 * once unless the socket is backed up), finish with {@link complete}, or {@link abort} to end the
 * stream without `complete_final` (which makes the caller migrate or fail the request).
 *
 * {@link signal} aborts (with `Cancelled`) when the caller sends `"stop"` or `"kill"` or goes away;
 * after a kill or the caller leaving, sends are dropped.
 */
export class ResponseSender {
  /** The request (context) id this stream answers. */
  readonly contextId: string;
  readonly #socket: Socket;
  readonly #subject: string;
  readonly #closeWaitMs: number;
  readonly #log: Log;
  #controller: AbortController | undefined;
  #cancelReason: Cancelled | undefined;
  #onCancel: (() => void) | undefined;
  readonly #closed: Promise<void>;
  #phase: Phase = 'handshaken';
  #stopped = false;
  #killed = false;
  readonly #writer: BatchedWriter;
  readonly #offThreadSend: OffThreadSend | undefined;
  #sentItem = false;
  #drain: Promise<void> | undefined;

  /** @internal Use {@link callHome}. */
  constructor(socket: Socket, subject: string, contextId: string, options: CallHomeOptions) {
    this.#socket = socket;
    this.#writer = tickBatchedWriter(socket);
    this.#subject = subject;
    this.contextId = contextId;
    this.#closeWaitMs = options.closeWaitMs ?? 10_000;
    this.#log = options.log ?? silentLog;
    this.#offThreadSend = options.offThreadSend;
    this.#closed = new Promise((resolve) => socket.once('close', () => resolve()));

    const decoder = new TwoPartDecoder({ maxFrameBytes: 64 * 1024 });
    const onFrame = (frame: TwoPartFrame) => this.#onFrame(frame);
    socket.on('data', (chunk: Buffer) => {
      try {
        decoder.push(chunk, onFrame);
      } catch (err) {
        this.#log.warn({ subject, err }, 'caller sent an undecodable frame on the response stream; treating it as kill');
        this.#onKill('caller sent an undecodable frame');
        socket.destroy();
      }
    });
    socket.on('error', (err) => {
      this.#log.debug({ subject, err }, 'response stream socket error');
      if (this.#phase !== 'ending') this.#onKill(`response stream failed: ${err.message}`);
    });
    socket.on('end', () => {
      // The caller closing is the expected end after our sentinel: everything we wrote has been
      // read, so close outright. Any earlier it means kill; flush what is queued, then close.
      if (this.#phase === 'ending') {
        socket.destroy();
        return;
      }
      if (this.#phase !== 'closed') this.#onKill('caller closed the response stream');
      if (!socket.destroyed) socket.end();
    });
    socket.on('close', () => {
      if (this.#phase !== 'ending' && this.#phase !== 'closed') this.#onKill('response stream closed');
      this.#phase = 'closed';
    });
    // Batched: the handshake leaves in the same writev as the prologue and the first items.
    this.#writer.write(encodeHandshake(subject));
  }

  /** Aborted when the caller stops or kills the stream, or disconnects; the reason is `Cancelled`. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#cancelReason) this.#controller.abort(this.#cancelReason);
    }
    return this.#controller.signal;
  }

  /** Calls `fn` once when the caller stops or kills the stream or goes away (cheaper than `signal`). */
  onCancel(fn: () => void): void {
    if (this.#cancelReason) fn();
    else this.#onCancel = fn;
  }

  #cancel(reason: Cancelled): void {
    if (this.#cancelReason) return;
    this.#cancelReason = reason;
    this.#controller?.abort(reason);
    const fn = this.#onCancel;
    this.#onCancel = undefined;
    fn?.();
  }

  /** True once the caller asked to stop (graceful: items may still be sent, then {@link complete}). */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** True once the caller killed the stream or went away: further items are dropped. */
  get killed(): boolean {
    return this.#killed;
  }

  /** Resolves when the socket is closed. */
  get closed(): Promise<void> {
    return this.#closed;
  }

  /**
   * Sends the prologue: `{"error":null}` when `error` is absent, else the error, after which the
   * stream is over (the caller fails the request as CannotConnect). {@link send} sends an ok
   * prologue implicitly if none was sent.
   */
  async prologue(error?: string | null): Promise<void> {
    if (this.#phase !== 'handshaken') return;
    if (error === undefined || error === null) {
      this.#phase = 'open';
      this.#write(encodePrologue(null));
      return;
    }
    this.#write(encodePrologue(error));
    await this.#finish();
  }

  /**
   * Sends one item (any JSON-serializable value except null/undefined), serialized once. Returns a
   * promise only while the socket is backed up; `await` the result either way. Dropped silently
   * after the stream was killed or ended.
   */
  send(item: unknown): Promise<void> | void {
    return this.sendJson(itemJson(item));
  }

  /** Like {@link send} for an item already serialized as JSON text. */
  sendJson(json: string): Promise<void> | void {
    if (this.#phase === 'handshaken') {
      this.#phase = 'open';
      this.#write(encodePrologue(null));
    }
    if (this.#phase !== 'open' || this.#killed) return;
    if (this.#sentItem) return this.#write(encodeItemFrame(json)) ? undefined : this.#drained();
    // The first item is the caller's time to first token: it leaves now, after the handshake and
    // prologue, rather than after whatever else the handler produces in this tick (an engine
    // that never yields to the event loop would otherwise send its whole output at once).
    this.#sentItem = true;
    let ok: boolean;
    if (this.#offThreadSend) {
      this.#writer.flush();
      ok = writeOffThread(this.#socket, encodeItemFrame(json), this.#offThreadSend);
    } else {
      ok = this.#write(encodeItemFrame(json));
      this.#writer.flush();
    }
    if (!ok) return this.#drained();
  }

  /**
   * Ends the stream normally: the `complete_final` marker and the sentinel, then waits (bounded)
   * for the caller to close. After a kill it only closes.
   */
  async complete(): Promise<void> {
    if (this.#phase === 'ending' || this.#phase === 'closed') return this.#closed;
    if (this.#killed) {
      this.abort();
      return this.#closed;
    }
    if (this.#phase === 'handshaken') this.#write(encodePrologue(null));
    this.#write(END_FRAME);
    this.#write(SENTINEL_FRAME);
    await this.#finish();
  }

  /**
   * Closes the stream without `complete_final`: the caller sees an incomplete stream (its
   * migration trigger). Items already written are flushed first.
   */
  abort(): void {
    if (this.#phase === 'closed') return;
    this.#phase = 'closed';
    const socket = this.#socket;
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  #write(frame: Buffer): boolean {
    return this.#writer.write(frame);
  }

  #drained(): Promise<void> {
    this.#drain ??= new Promise<void>((resolve) => {
      const done = () => {
        this.#socket.off('drain', done);
        this.#socket.off('close', done);
        this.#drain = undefined;
        resolve();
      };
      this.#socket.on('drain', done);
      this.#socket.on('close', done);
    });
    return this.#drain;
  }

  /** Flushes, then waits up to `closeWaitMs` for the caller's close before closing ourselves. */
  async #finish(): Promise<void> {
    this.#phase = 'ending';
    const socket = this.#socket;
    const timer = setTimeout(() => {
      this.#log.debug({ subject: this.#subject }, 'caller did not close the response stream in time; closing it');
      socket.destroy();
    }, this.#closeWaitMs);
    await this.#closed;
    clearTimeout(timer);
  }

  #onFrame(frame: TwoPartFrame): void {
    const word = frame.body.length === 0 ? controlWord(frame.header) : undefined;
    if (word === 'stop') {
      if (this.#stopped) return;
      this.#stopped = true;
      this.#log.debug({ subject: this.#subject }, 'caller stopped the response stream');
      this.#cancel(new Cancelled(`request ${this.contextId} was stopped by the caller`));
    } else if (word === 'kill') {
      this.#log.debug({ subject: this.#subject }, 'caller killed the response stream');
      this.#onKill(`request ${this.contextId} was killed by the caller`);
      if (this.#phase !== 'ending') this.abort();
    } else {
      this.#log.warn(
        { subject: this.#subject, headerBytes: frame.header.length, bodyBytes: frame.body.length },
        'ignoring an unexpected frame from the caller',
      );
    }
  }

  #onKill(reason: string): void {
    if (this.#killed) return;
    this.#killed = true;
    this.#stopped = true;
    this.#cancel(new Cancelled(reason));
  }
}
