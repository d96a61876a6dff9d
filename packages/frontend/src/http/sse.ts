import type { ServerResponse } from 'node:http';

/**
 * Server-sent events on a raw response, written straight to the socket: one `write` per event
 * and no promise unless the socket pushes back (then the caller awaits the returned one).
 */
export class SseWriter {
  readonly #res: ServerResponse;

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
    return this.#write(`data: ${json}\n\n`);
  }

  /** Sends Dynamo's error event: `event: error`, the message as comment lines. */
  error(message: string): Promise<void> | undefined {
    const lines = message.split(/\r?\n/).map((line) => `: ${line}\n`).join('');
    return this.#write(`event: error\n${lines}\n`);
  }

  /** Sends `data: [DONE]` and ends the response. */
  done(): void {
    if (!this.closed) this.#res.end('data: [DONE]\n\n');
  }

  /** Ends the response without `[DONE]` (after an error event). */
  end(): void {
    if (!this.closed) this.#res.end();
  }

  #write(text: string): Promise<void> | undefined {
    if (this.closed || this.#res.write(text)) return undefined;
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
