import { Context } from '../context.js';
import { StreamIncomplete, toDynamoException } from '../errors.js';
import { parseJson } from '../json.js';
import type { Log } from '../logger.js';
import type { EndpointLabels, ErrorType, RuntimeMetrics } from '../metrics.js';
import { decodeRequestEnvelope, type RequestEnvelope } from '../wire/control.js';
import type { RequestAcceptor } from '../request-plane/request-plane.js';
import { SERVER_OVERLOADED, SERVER_UNAVAILABLE } from '../wire/socket-helpers.js';
import { callHome, type ResponseSender } from '../response-plane/call-home.js';
import type { OffThreadSend } from '../response-plane/socket-handover.js';
import { parseTraceparent, TRACEPARENT, TRACESTATE, type TraceContext } from '../trace.js';
import { itemJson } from '../response-plane/frames.js';
import { annotatedErrorJson, annotatedJson } from './annotated.js';
import { CoalescedItems, type MergeItems } from './coalesced-items.js';
import { StreamTurns } from './fair-turns.js';
import { type EndpointHandler, invokeHandler } from './handler.js';

/** Limits of one served endpoint. */
export interface IngressOptions {
  /** Requests processed at once before new ones are refused as overloaded (default 10000). */
  maxInflight?: number;
  /** Called when a request's response stream completed without an error (feeds the health canary). */
  onSuccess?: () => void;
  /** Items go out as their own JSON, not wrapped in `Annotated { data }`. */
  plainItems?: boolean;
  /** Merges items yielded in the same turn of the event loop (after the first): see {@link CoalescedItems}. */
  mergeItems?: MergeItems;
  /** Sends each stream's first item from another thread: see {@link callHome}. */
  offThreadSend?: OffThreadSend | undefined;
}

/**
 * The worker side of one endpoint: accepts request envelopes from the request plane, calls home to
 * the caller, runs the handler and streams its items back as `Annotated` data frames.
 */
export class EndpointIngress {
  readonly #handler: EndpointHandler;
  readonly #itemJson: (item: unknown) => string;
  readonly #labels: EndpointLabels;
  readonly #metrics: RuntimeMetrics;
  /** This endpoint's series, bound once: prom-client otherwise hashes the label set on every update. */
  readonly #series: {
    readonly inflight: { inc(): void; dec(): void };
    readonly requests: { inc(n?: number): void };
    readonly requestBytes: { inc(n?: number): void };
    readonly responseBytes: { inc(n?: number): void };
    readonly cancellations: { inc(n?: number): void };
    readonly duration: { observe(seconds: number): void };
  };
  readonly #log: Log;
  readonly #maxInflight: number;
  readonly #onSuccess: (() => void) | undefined;
  readonly #mergeItems: MergeItems | undefined;
  readonly #offThreadSend: OffThreadSend | undefined;
  #inflight = 0;
  #closed = false;
  readonly #drainWaiters = new Set<() => void>();

  constructor(handler: EndpointHandler, labels: EndpointLabels, metrics: RuntimeMetrics, log: Log, options: IngressOptions = {}) {
    this.#handler = handler;
    this.#labels = labels;
    this.#metrics = metrics;
    this.#series = {
      inflight: metrics.inflight.labels(labels),
      requests: metrics.requests.labels(labels),
      requestBytes: metrics.requestBytes.labels(labels),
      responseBytes: metrics.responseBytes.labels(labels),
      cancellations: metrics.cancellations.labels(labels),
      duration: metrics.duration.labels(labels),
    };
    this.#log = log;
    this.#maxInflight = options.maxInflight ?? 10_000;
    this.#onSuccess = options.onSuccess;
    this.#itemJson = options.plainItems ? itemJson : annotatedJson;
    this.#mergeItems = options.mergeItems;
    this.#offThreadSend = options.offThreadSend;
  }

  /** Requests being processed. */
  get inflight(): number {
    return this.#inflight;
  }

  /** The request-plane acceptor: validates synchronously, acknowledges, processes in the background. */
  readonly accept: RequestAcceptor = (envelope, headers) => {
    if (this.#closed) return `${SERVER_UNAVAILABLE}worker is not accepting new requests (endpoint ${this.#labels.dynamo_endpoint} is draining)`;
    if (this.#inflight >= this.#maxInflight) return `${SERVER_OVERLOADED}${this.#inflight} requests in flight`;
    let request: RequestEnvelope;
    try {
      request = decodeRequestEnvelope(envelope);
    } catch (err) {
      this.#error('invalid_message');
      this.#log.warn({ err: (err as Error).message }, 'rejected a malformed request envelope');
      return `invalid request: ${(err as Error).message}`;
    }
    this.#inflight++;
    const series = this.#series;
    series.inflight.inc();
    series.requests.inc();
    series.requestBytes.inc(request.body.length);
    const started = performance.now();
    const trace = parseTraceparent(headers[TRACEPARENT], headers[TRACESTATE]);
    if (trace === undefined && headers[TRACEPARENT] !== undefined) {
      this.#log.debug({ traceparent: headers[TRACEPARENT] }, 'ignoring a malformed traceparent header');
    }
    void this.#process(request, trace).finally(() => {
      this.#inflight--;
      series.inflight.dec();
      series.duration.observe((performance.now() - started) / 1000);
      if (this.#inflight === 0) for (const wake of this.#drainWaiters) wake();
    });
    return '';
  };

  /** Refuses new requests from now on (they get `Server unavailable`). */
  stopAdmission(): void {
    this.#closed = true;
  }

  /** Accepts new requests again (after {@link stopAdmission}, for a drain that is undone). */
  resumeAdmission(): void {
    this.#closed = false;
  }

  /** Resolves when no request is in flight, or after `timeoutMs` (none: no bound); returns how many remain. */
  async drain(timeoutMs?: number): Promise<number> {
    if (this.#inflight === 0) return 0;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#drainWaiters.delete(wake);
        resolve();
      };
      const timer = timeoutMs === undefined ? undefined : setTimeout(wake, timeoutMs);
      timer?.unref();
      this.#drainWaiters.add(wake);
    });
    return this.#inflight;
  }

  async #process({ control, body }: RequestEnvelope, trace: TraceContext | undefined): Promise<void> {
    const log = this.#log;
    // Dialing the caller takes a round trip: the request is parsed and the handler started (up to
    // its first item) meanwhile, so the first item is ready when the connection is.
    const calling = callHome(control.connection_info, { log, offThreadSend: this.#offThreadSend });
    const started = this.#start(control, body, trace);
    let sender: ResponseSender;
    try {
      sender = await calling;
    } catch (err) {
      if ('first' in started) void started.iterator.return?.().catch(() => {});
      started.context?.kill();
      this.#error('response_stream');
      log.warn({ id: control.id, err: (err as Error).message }, 'could not call the caller back; request dropped');
      return;
    }
    if ('refusal' in started) {
      this.#error(started.refusal.errorType);
      await sender.prologue(started.refusal.message).catch(() => {});
      return;
    }
    const { context, iterator, first } = started;
    sender.onCancel(() => (sender.killed ? context.kill() : context.stopGenerating()));
    log.debug({ id: control.id }, 'request accepted');
    let responseBytes = 0;
    let failed = false;
    const send = (item: unknown) => {
      const json = this.#itemJson(item);
      responseBytes += json.length;
      return sender.sendJson(json);
    };
    const items = this.#mergeItems ? new CoalescedItems(send, this.#mergeItems) : undefined;
    try {
      await sender.prologue(null);
      const turns = new StreamTurns();
      for (let next = await first; !next.done; next = await iterator.next()) {
        const wait = turns.take();
        if (wait) await wait;
        if (sender.killed) break;
        const backpressure = items ? items.push(next.value) : send(next.value);
        if (backpressure) await backpressure;
      }
      if (sender.killed) await iterator.return?.();
      else await items?.flush();
    } catch (err) {
      failed = true;
      if (err instanceof StreamIncomplete) {
        // The handler asks for the stream to end without its final marker: the caller sees an
        // incomplete stream and may migrate the request.
        log.info({ id: control.id, reason: err.message }, 'handler ended the stream incomplete');
        void items?.flush();
        sender.abort();
        return;
      }
      if (!sender.killed) {
        this.#error('generate');
        log.warn({ id: control.id, err: (err as Error).message }, 'handler failed mid-stream');
        // What the handler yielded before it failed goes first.
        void items?.flush();
        sender.sendJson(annotatedErrorJson(err));
      }
    }
    if (responseBytes > 0) this.#series.responseBytes.inc(responseBytes);
    if (context.isStopped()) this.#series.cancellations.inc();
    else if (!failed) this.#onSuccess?.();
    if (sender.killed) return;
    await sender.complete().catch((err: unknown) => {
      this.#error('publish_final');
      log.debug({ id: control.id, err: (err as Error).message }, 'could not finish the response stream');
    });
  }

  /**
   * Parses the request and starts the handler, asking for its first item; or says why the request
   * is refused (sent as the error prologue once the caller is reached).
   */
  #start(control: RequestEnvelope['control'], body: Buffer, trace: TraceContext | undefined): Started {
    if (control.payload_codec === 'msgpack') {
      return { refusal: { errorType: 'deserialization', message: 'payload codec msgpack is not supported by this worker; send json' } };
    }
    let request: unknown;
    try {
      request = parseJson(body.toString('utf8'));
    } catch (err) {
      this.#log.warn({ id: control.id, err: (err as Error).message }, 'request body is not valid JSON');
      return { refusal: { errorType: 'deserialization', message: `deserialization error: request body is not valid JSON: ${(err as Error).message}` } };
    }
    const context = new Context({ id: control.id, metadata: stringValues(control.metadata), ...(trace ? { trace } : {}) });
    let iterator: AsyncIterator<unknown>;
    try {
      iterator = invokeHandler(this.#handler, request, context)[Symbol.asyncIterator]();
    } catch (err) {
      this.#log.warn({ id: control.id, err: (err as Error).message }, 'handler failed before streaming');
      return { refusal: { errorType: 'generate', message: toDynamoException(err).message }, context };
    }
    const first = iterator.next();
    // Awaited once the caller is reached; a rejection before then is not unhandled.
    first.catch(() => {});
    return { context, iterator, first };
  }

  #error(type: ErrorType): void {
    this.#metrics.errors.inc({ ...this.#labels, error_type: type });
  }
}

/** A request parsed and its handler started, or why it is refused. */
type Started =
  | { context: Context; iterator: AsyncIterator<unknown>; first: Promise<IteratorResult<unknown>> }
  | { refusal: { errorType: ErrorType; message: string }; context?: Context };

function stringValues(metadata: Record<string, unknown> | undefined): Record<string, string> {
  if (!metadata) return {};
  return Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
}
