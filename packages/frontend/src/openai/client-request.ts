import { randomUUID } from 'node:crypto';
import type { Preprocessor } from '@dynamo/llm';
import { Cancelled, CannotConnect, Context, type Log, WorkerOverloaded } from '@dynamo/runtime';
import { parseTraceparent } from '@dynamo/runtime/internal';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { EndpointLabel, FrontendMetrics, RequestTracker } from '../metrics.js';
import type { ModelRegistry } from '../models/registry.js';
import type { ServedModel, Surface } from '../models/served-model.js';
import { QueueFull } from '../routing/request-queue.js';
import type { Candidate } from '../routing/router.js';
import { type AgentSession, agentSession } from '../routing/agent-session.js';
import { HttpError } from '../http/errors.js';
import { pinnedInstance } from './request-fields.js';

/** What every inference route needs from the frontend. */
export interface RouteDeps {
  registry: ModelRegistry;
  metrics: FrontendMetrics;
  /** Contexts of the requests in flight, so shutdown can end them. */
  inflight: Set<Context>;
  log: Log;
}

const LABEL: Record<Surface, EndpointLabel> = { chat: 'chat_completions', completions: 'completions', embeddings: 'embeddings' };

/** How a route opens its requests. */
export interface OpenOptions {
  /** The route's own checks of the body, before the model is looked up (as stock orders them). */
  check?: (fields: Record<string, unknown>) => void;
  /** The body the pipeline serves, made from the client's (checked) one: another API's mapping onto chat. */
  fields?: (fields: Record<string, unknown>) => Record<string, unknown>;
  /** The `endpoint` label of its metrics (default: the surface's). */
  label?: EndpointLabel;
}
const ROUTE: Record<Surface, string> = { chat: '/v1/chat/completions', completions: '/v1/completions', embeddings: '/v1/embeddings' };

const header = (req: FastifyRequest, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * One client request to an inference route: its body, the model it names, its context (the
 * `x-request-id` and trace it came with), its metrics and the router bookkeeping. From
 * {@link open} on, the client is watched: one that leaves before its request reaches a worker
 * is never sent to one, and one that leaves later stops its worker.
 */
export class ClientRequest<S extends Surface = Surface> {
  readonly routeIds = new Set<string>();
  /** The instance its latest worker request went to. */
  lastInstance: bigint | undefined;
  /** Whether it was the only request in flight when it arrived. */
  readonly alone: boolean;
  readonly #deps: RouteDeps;
  readonly #reply: FastifyReply;
  readonly #onClose: () => void;

  private constructor(
    readonly surface: S,
    readonly fields: Record<string, unknown>,
    readonly model: ServedModel,
    readonly context: Context,
    readonly pinned: bigint | undefined,
    /** The session its headers name, for session affinity. */
    readonly session: AgentSession | undefined,
    readonly label: EndpointLabel,
    readonly tracker: RequestTracker,
    deps: RouteDeps,
    req: FastifyRequest,
    reply: FastifyReply,
  ) {
    this.#deps = deps;
    this.#reply = reply;
    this.alone = deps.inflight.size === 0;
    deps.inflight.add(context);
    this.#onClose = () => {
      if (reply.raw.writableFinished) return;
      context.kill();
      deps.metrics.disconnects.inc({ model: model.name.toLowerCase() });
    };
    reply.raw.on('close', this.#onClose);
    // A client gone before the handler ran (its body arrived, then it hung up) closed already.
    if (req.raw.socket?.destroyed) this.#onClose();
  }

  /**
   * Checks the body (a JSON object naming a model, and the route's own checks) and opens the
   * request. Throws `HttpError` 400 / 404.
   */
  static open<S extends Surface>(surface: S, req: FastifyRequest, reply: FastifyReply, deps: RouteDeps, options: OpenOptions = {}): ClientRequest<S> {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'request body must be a JSON object');
    const given = body as Record<string, unknown>;
    if (typeof given.model !== 'string')
      throw new HttpError(400, `request.model: ${given.model === undefined ? 'missing field' : 'must be a string'}`, { param: 'model' });
    options.check?.(given);
    const fields = options.fields ? options.fields(given) : given;
    const model = deps.registry.get(given.model);
    if (!model) throw new HttpError(404, `Model not found: ${given.model}`, { param: 'model' });
    if (!model.serves(surface)) throw new HttpError(404, `model ${model.name} does not serve ${ROUTE[surface]}`, { param: 'model' });
    const pinned = pinnedInstance(req.headers, fields);
    const requestId = header(req, 'x-request-id') || randomUUID();
    void reply.header('x-request-id', requestId);
    const traceparent = header(req, 'traceparent');
    const trace = traceparent === undefined ? undefined : parseTraceparent(traceparent, header(req, 'tracestate'));
    const context = new Context({ id: requestId, ...(trace ? { trace } : {}) });
    const label = options.label ?? LABEL[surface];
    const tracker = deps.metrics.track(model.name, label, given.stream === true);
    return new ClientRequest(surface, fields, model, context, pinned, agentSession(req.headers, given.prompt_cache_key), label, tracker, deps, req, reply);
  }

  /**
   * Whether the body asks for the worker in the response (`nvext.extra_fields: ["worker_id"]`,
   * as stock 1.6.1 answers it).
   */
  get wantsWorkerId(): boolean {
    const extra = (this.fields.nvext as { extra_fields?: unknown } | null | undefined)?.extra_fields;
    return Array.isArray(extra) && extra.includes('worker_id');
  }

  /** The request id (the worker sees it as its context id). */
  get requestId(): string {
    return this.context.id();
  }

  /** The model's preprocessor (Tokens input); 503 when its files could not be loaded. */
  async preprocessor(): Promise<Preprocessor> {
    try {
      return await this.model.preprocessor();
    } catch (err) {
      throw new HttpError(503, `model ${this.model.name} is not available: its files could not be loaded (${(err as Error).message})`, { cause: err });
    }
  }

  /**
   * The instance for one worker request: the pinned one, or the routing's choice among the live
   * ones serving this surface (its session's worker, else the router's), avoiding `failed`;
   * `routeId` keys the routing's bookkeeping. A refusal because every worker is busy is counted
   * (`model_rejection_total`).
   */
  async route(failed: ReadonlySet<bigint>, tokenIds: readonly number[] | undefined, routeId: string): Promise<Candidate> {
    if (this.context.isKilled()) throw new Cancelled('client closed the request before it was sent to a worker');
    const { model } = this;
    const { routing } = model;
    const request = {
      model: model.name,
      requestId: routeId,
      failed,
      signal: this.context.signal,
      current: () => model.candidates(this.surface),
      ...(tokenIds ? { tokenIds: tokenIds as number[] } : {}),
      ...(model.loraName === undefined ? {} : { loraName: model.loraName }),
    };
    try {
      if (this.pinned !== undefined) {
        const candidate = model.candidate(this.pinned, this.surface);
        if (!candidate) throw new CannotConnect(`instance ${this.pinned} does not serve model ${model.name}`);
        this.routeIds.add(routeId);
        this.lastInstance = candidate.instanceId;
        return routing.pin(candidate, request, this.session);
      }
      const candidates = model.candidates(this.surface);
      if (candidates.length === 0) throw new CannotConnect(`no instance of model ${model.name} is available`);
      this.routeIds.add(routeId);
      const chosen = await routing.place(candidates, request, this.session);
      this.lastInstance = chosen.instanceId;
      return chosen;
    } catch (err) {
      // A full queue is its own refusal (stock counts it as queue backpressure).
      if (err instanceof WorkerOverloaded && !(err instanceof QueueFull))
        this.#deps.metrics.rejections.inc({ model: model.name.toLowerCase(), endpoint: this.label });
      throw err;
    }
  }

  /** Ends the request's bookkeeping (metrics, routing, in-flight set, client watch). */
  done(ok: boolean): void {
    this.tracker.finish(ok);
    for (const id of this.routeIds) this.model.routing.finished(id);
    this.#deps.inflight.delete(this.context);
    this.#reply.raw.off('close', this.#onClose);
  }
}
