import type { ServerResponse } from 'node:http';

/**
 * Server-sent events on a raw response. The first event is written at once (it is the time to
 * first token); later events are joined into one socket write per event-loop turn, because a
 * write per event costs a chunked-encoding frame and a buffer each, which at hundreds of events
 * per response was the frontend's largest cost. No promise is made unless the socket pushes back.
 */
export class SseWriter {
  readonly #res: ServerResponse;
  #pending = '';
  #scheduled = false;
  #started = false;
  readonly #flushLater = () => {
    this.#scheduled = false;
    this.#flush();
  };

  constructor(res: ServerResponse, headers: Record<string, string>) {
    this.#res = res;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  }

  /** Whether the client is gone (or the stream ended): nothing more can be written. */
  get closed(): boolean {
    return this.#res.destroyed || this.#res.writableEnded;
  }

  /** Sends `data: <json>`; returns a promise only when the caller should wait for the socket. */
  data(json: string): Promise<void> | undefined {
    this.#pending += `data: ${json}\n\n`;
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

  /** Sends Dynamo's error event: `event: error`, the message as comment lines. */
  error(message: string): void {
    this.#pending += `event: error\n${message
      .split(/\r?\n/)
      .map((line) => `: ${line}\n`)
      .join('')}\n`;
  }

  /** Sends `data: [DONE]` and ends the response. */
  done(): void {
    this.#pending += 'data: [DONE]\n\n';
    this.end();
  }

  /** Sends what is queued and ends the response (after an error event, without `[DONE]`). */
  end(): void {
    if (!this.closed) this.#res.end(this.#pending);
    this.#pending = '';
  }

  #flush(): void {
    if (this.#pending === '' || this.closed) return;
    this.#res.write(this.#pending);
    this.#pending = '';
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
