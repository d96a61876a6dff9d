import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Server-sent events on a raw response. The first event is written at once (it is the time to
 * first token); later events are joined into one socket write per event-loop turn, because a
 * write per event costs a chunked-encoding frame and a buffer each, which at hundreds of events
 * per response was the frontend's largest cost. No promise is made unless the socket pushes back.
 * While nothing is written for `keepAliveMs` (output held back, a slow engine), a comment line
 * goes out, so proxies with idle timeouts keep the connection.
 */
export class SseWriter {
  readonly #res: ServerResponse;
  #pending = '';
  #scheduled = false;
  #started = false;
  /** Runs before each write of this writer's own (another writer of the socket must pause). */
  beforeWrite: (() => void) | undefined;
  /** When another writer of the socket last wrote (`performance.now()`), for the keep-alive. */
  writtenAt: (() => number) | undefined;
  readonly #keepAliveMs: number;
  #keepAlive: NodeJS.Timeout | undefined;
  readonly #flushLater = () => {
    this.#scheduled = false;
    this.#flush();
  };

  constructor(res: ServerResponse, headers: Record<string, string>, keepAliveMs = 0) {
    this.#res = res;
    this.#keepAliveMs = keepAliveMs;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
    if (keepAliveMs > 0) {
      this.#keepAlive = setTimeout(this.#ping, keepAliveMs).unref();
      res.once('close', () => clearTimeout(this.#keepAlive));
    }
  }

  readonly #ping = () => {
    if (this.closed) return;
    const quiet = performance.now() - (this.writtenAt?.() ?? Number.NEGATIVE_INFINITY);
    if (quiet < this.#keepAliveMs) {
      this.#keepAlive = setTimeout(this.#ping, this.#keepAliveMs - quiet).unref();
      return;
    }
    this.beforeWrite?.();
    this.#res.write(':\n\n');
    this.#keepAlive?.refresh();
  };

  /** Whether the client's socket is pushing back: later writes should wait for it. */
  get backedUp(): boolean {
    return this.#res.writableNeedDrain || this.#res.socket?.writableNeedDrain === true;
  }

  /** The client's socket, while connected. */
  get socket(): Socket | undefined {
    return this.#res.socket ?? undefined;
  }

  /** Whether everything written so far has reached the kernel: nothing waits in Node or here. */
  get idle(): boolean {
    const socket = this.#res.socket;
    return !this.closed && this.#pending === '' && socket != null && socket.writableLength === 0 && socket.writableCorked === 0;
  }

  /** Whether the client is gone (or the stream ended): nothing more can be written. */
  get closed(): boolean {
    return this.#res.destroyed || this.#res.writableEnded;
  }

  /** Sends `data: <json>` (after `event: <type>` when given); returns a promise only when the caller should wait for the socket. */
  data(json: string, type?: string): Promise<void> | undefined {
    this.#pending += type === undefined ? `data: ${json}\n\n` : `event: ${type}\ndata: ${json}\n\n`;
    if (!this.#started) {
      this.#started = true;
      this.#flush();
      // Node's http corks the socket until the next tick; the first token should not wait for
      // the rest of this turn's work.
      this.#res.socket?.uncork();
    } else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#flushLater);
    }
    return this.#res.writableNeedDrain ? this.#drained() : undefined;
  }

  /**
   * Sends events already formed (`data: …` lines, as the Rust path writes them) at once: they come
   * a batch of socket reads at a time, so there is nothing to join them with in this turn.
   */
  events(formed: string): Promise<void> | undefined {
    if (formed.length === 0) return undefined;
    this.#flush();
    if (this.closed) return undefined;
    this.beforeWrite?.();
    this.#res.write(formed);
    this.#keepAlive?.refresh();
    if (!this.#started) {
      this.#started = true;
      this.#res.socket?.uncork();
    }
    return this.#res.writableNeedDrain ? this.#drained() : undefined;
  }

  /** Whether events for {@link direct} are framed as HTTP/1.1 chunks (known once the response started). */
  get chunked(): boolean {
    return this.#res.chunkedEncoding;
  }

  /**
   * Writes events straight to the response's socket, already framed for its transfer encoding
   * ({@link chunked}): the per-token path, without the response's own framing and corking.
   * Only after the response started; writes through the response keep their order with these.
   */
  direct(framed: string | Buffer): void {
    if (this.closed) return;
    this.#res.socket?.write(framed);
    this.#keepAlive?.refresh();
  }

  /** Sends a typed event (`event: <type>` and its data), as the Responses and Anthropic APIs stream. */
  event(type: string, json: string): Promise<void> | undefined {
    return this.data(json, type);
  }

  /**
   * Ends a failed stream as stock Dynamo does, so the OpenAI SDKs raise it as an error: the
   * error object (`{"error": {...}}`) as a data event, then `data: [DONE]`.
   */
  fail(errorJson: string): void {
    this.#pending += `data: ${errorJson}\n\n`;
    this.done();
  }

  /** Sends `data: [DONE]` (unless `marker` is false: Anthropic's streams have none) and ends the response. */
  done(marker = true): void {
    if (marker) this.#pending += 'data: [DONE]\n\n';
    clearTimeout(this.#keepAlive);
    this.beforeWrite?.();
    if (!this.closed) this.#res.end(this.#pending);
    this.#pending = '';
  }

  #flush(): void {
    if (this.#pending === '' || this.closed) return;
    this.beforeWrite?.();
    this.#res.write(this.#pending);
    this.#pending = '';
    this.#keepAlive?.refresh();
  }

  #drained(): Promise<void> {
    const res = this.#res;
    return new Promise((resolve) => {
      const go = () => {
        res.off('drain', go);
        res.off('close', go);
        resolve();
      };
      res.on('drain', go);
      res.on('close', go);
    });
  }
}
