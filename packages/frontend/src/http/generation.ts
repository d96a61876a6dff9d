import { randomUUID } from 'node:crypto';
import { ChatOutputParser, type PreprocessedRequest, type Preprocessor, promptBatch } from '@dynamo/llm';
import { Cancelled, CannotConnect, Context, type DynamoException, type Log, mergeStreams, parseTraceparent } from '@dynamo/runtime';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { FrontendMetrics, RequestTracker } from '../metrics.js';
import type { ModelRegistry } from '../models/registry.js';
import type { ServedModel, Surface } from '../models/served-model.js';
import { type AttemptDeps, attemptContext, attemptDeltas } from '../pipeline/attempt-stream.js';
import { planAttempts } from '../pipeline/plan.js';
import { textDeltas } from '../pipeline/text-stream.js';
import { UsageCounter } from '../pipeline/usage.js';
import type { Candidate } from '../routing/router.js';
import { HttpError } from './errors.js';
import { responseIds } from './openai-shapes.js';
import { checkRequestFields, pinnedInstance } from './request-fields.js';
import { type Answer, streamAnswer, wholeAnswer } from './respond.js';

/** What the generation routes need from the frontend. */
export interface GenerationDeps {
  registry: ModelRegistry;
  metrics: FrontendMetrics;
  /** Overrides every card's migration limit when set. */
  migrationLimit: number | undefined;
  /** Always send the usage chunk (`DYN_ENABLE_FORCE_INCLUDE_USAGE`). */
  forceIncludeUsage: boolean;
  /** Accept unknown top-level fields (`DYN_IGNORE_OPENAI_FE_UNSUPPORTED_FIELDS`). */
  ignoreUnknownFields: boolean;
  /** The response field reasoning goes in: `reasoning_content` (default) or `reasoning`. */
  reasoningField?: 'reasoning_content' | 'reasoning';
  /** The status of a worker with no room (`DYN_HTTP_OVERLOAD_STATUS_CODE`, 529). */
  overloadStatus: number;
  /** Silence after which a stream gets a keep-alive comment; 0 sends none. */
  keepAliveMs: number;
  /** Largest `data:` URL in a media part (`DYN_MM_MAX_DATA_URL_MB`). */
  maxDataUrlBytes: number;
  /** Contexts of the requests in flight, so shutdown can end them. */
  inflight: Set<Context>;
  log: Log;
}

/** One client request on its way through the pipeline. */
interface Request {
  surface: Surface;
  fields: Record<string, unknown>;
  model: ServedModel;
  requestId: string;
  context: Context;
  pinned: bigint | undefined;
  tracker: RequestTracker;
  /** Router bookkeeping ids used (one per worker request). */
  routeIds: Set<string>;
}

const header = (req: FastifyRequest, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** The handler of `/v1/chat/completions` or `/v1/completions`. */
export function generationHandler(surface: Surface, deps: GenerationDeps) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'request body must be a JSON object');
    const fields = body as Record<string, unknown>;
    if (typeof fields.model !== 'string') throw new HttpError(400, `request.model: ${fields.model === undefined ? 'missing field' : 'must be a string'}`, { param: 'model' });
    checkRequestFields(surface, fields, deps.ignoreUnknownFields);
    const model = deps.registry.get(fields.model);
    if (!model) throw new HttpError(404, `Model not found: ${fields.model}`, { param: 'model' });
    if (!model.serves(surface)) throw new HttpError(404, `model ${model.name} does not serve ${surface === 'chat' ? '/v1/chat/completions' : '/v1/completions'}`, { param: 'model' });
    const pinned = pinnedInstance(req.headers, fields);
    const requestId = header(req, 'x-request-id') || randomUUID();
    void reply.header('x-request-id', requestId);
    const streaming = fields.stream === true;
    const traceparent = header(req, 'traceparent');
    const trace = traceparent === undefined ? undefined : parseTraceparent(traceparent, header(req, 'tracestate'));
    const context = new Context({ id: requestId, ...(trace ? { trace } : {}) });
    // Alone, a request is fastest preprocessed on this thread; with others in flight, off it.
    const alone = deps.inflight.size === 0;

    // The client is watched from here on: one that leaves while its request is preprocessed is
    // never sent to a worker, and one that leaves later stops its worker.
    const tracker = deps.metrics.track(model.name, surface === 'chat' ? 'chat_completions' : 'completions', streaming);
    deps.inflight.add(context);
    const onClose = () => {
      if (reply.raw.writableFinished) return;
      context.kill();
      deps.metrics.disconnects.inc({ model: model.name.toLowerCase() });
    };
    reply.raw.on('close', onClose);
    // A client gone before the handler ran (its body arrived, then it hung up) closed already.
    if (req.raw.socket?.destroyed) onClose();
    const request: Request = { surface, fields, model, requestId, context, pinned, tracker, routeIds: new Set() };
    const done = (ok: boolean) => {
      tracker.finish(ok);
      for (const id of request.routeIds) model.router.finished?.(id);
      deps.inflight.delete(context);
      reply.raw.off('close', onClose);
    };
    try {
      const answer = model.input === 'Tokens' ? await tokensAnswer(request, deps, alone) : textAnswer(request, deps);
      if (!streaming) {
        const response = await wholeAnswer(answer);
        done(true);
        return response;
      }
      // The first item decides the status: an error before any output is an HTTP error.
      const first = await answer.deltas.next();
      void reply.hijack();
      done(await streamAnswer(answer, reply, first, deps.log));
      return undefined;
    } catch (err) {
      done(false);
      throw err;
    }
  };
}

/** Picks the instance for a worker request: the pinned one, or the router's choice among the live ones. */
function route(r: Request, failed: ReadonlySet<bigint>, tokenIds: readonly number[] | undefined, routeId: string): Candidate {
  if (r.context.isKilled()) throw new Cancelled('client closed the request before it was sent to a worker');
  const { model } = r;
  if (r.pinned !== undefined) {
    const candidate = model.candidate(r.pinned);
    if (!candidate) throw new CannotConnect(`instance ${r.pinned} does not serve model ${model.name}`);
    return candidate;
  }
  const candidates = model.candidates();
  if (candidates.length === 0) throw new CannotConnect(`no instance of model ${model.name} is available`);
  r.routeIds.add(routeId);
  return model.router.select(candidates, { model: model.name, requestId: routeId, failed, ...(tokenIds ? { tokenIds: tokenIds as number[] } : {}) });
}

/** The answer settings every surface shares. */
function answerOf(r: Request, deps: GenerationDeps, parts: Pick<Answer, 'choices' | 'deltas' | 'usage' | 'promptTokens' | 'newParser' | 'echo'>): Answer {
  const { surface, fields } = r;
  const options = fields.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | null | undefined;
  const includeUsage = deps.forceIncludeUsage || options?.include_usage === true;
  const topLogprobs =
    surface === 'chat' ? (fields.logprobs === true ? (typeof fields.top_logprobs === 'number' ? fields.top_logprobs : 0) : undefined) : typeof fields.logprobs === 'number' ? fields.logprobs : undefined;
  return {
    ...parts,
    surface,
    ids: responseIds(surface, r.requestId, fields.model as string),
    context: r.context,
    includeUsage,
    continuousUsage: includeUsage && options?.continuous_usage_stats === true,
    tracker: r.tracker,
    reasoningField: deps.reasoningField ?? 'reasoning_content',
    overloadStatus: deps.overloadStatus,
    keepAliveMs: deps.keepAliveMs,
    singleToolCall: surface === 'chat' && fields.parallel_tool_calls === false,
    topLogprobs,
  };
}

/**
 * A Tokens-input model's answer: the body preprocessed into one worker request per prompt, each
 * sent for its `n` choices (or once per choice, see `planAttempts`), the outputs merged.
 */
async function tokensAnswer(r: Request, deps: GenerationDeps, onCallingThread: boolean): Promise<Answer> {
  const { surface, model, fields, context } = r;
  const pre = await preprocessorOf(model);
  const prompts = await preprocess(surface, model, pre, fields, { onCallingThread, maxDataUrlBytes: deps.maxDataUrlBytes });
  if (context.isKilled()) throw new Cancelled('client closed the request while it was preprocessed');
  const n = prompts[0]!.sampling_options?.n ?? 1;
  const attempts = planAttempts(prompts, n, model.generatesChoices);
  const single = attempts.length === 1;
  const attemptDeps: AttemptDeps = {
    tokenizer: pre.tokenizer,
    migrationLimit: r.pinned !== undefined ? 0 : (deps.migrationLimit ?? model.cardMigrationLimit),
    route: (failed, request, routeId) => route(r, failed, request.token_ids, routeId),
    onMigrate: (err: DynamoException, instanceId: bigint) => {
      deps.metrics.migrations.inc({ model: model.name.toLowerCase() });
      deps.log.warn({ request_id: r.requestId, model: model.name, instance_id: instanceId.toString(16), err: err.message }, 'worker failed mid-request; migrating');
    },
    onFirstOutput: (routeId) => model.router.firstOutput?.(routeId),
  };
  const deltas = mergeStreams(
    attempts.map((attempt, at) => {
      const id = single ? r.requestId : `${r.requestId}-${at}`;
      return attemptDeltas(attempt, id, single ? context : attemptContext(context, id), attemptDeps);
    }),
  );
  const parses = surface === 'chat' && (model.parsers.toolCallParser || model.parsers.reasoningParser || fields.tool_choice !== undefined);
  return answerOf(r, deps, {
    choices: prompts.length * n,
    deltas: deltas[Symbol.asyncIterator](),
    usage: new UsageCounter(attempts),
    promptTokens: prompts.reduce((sum, p) => sum + p.token_ids.length, 0),
    newParser: parses ? () => ChatOutputParser.forRequest(model.parsers, fields, pre.tokenizer) : undefined,
    echo: surface === 'completions' && fields.echo === true ? echoTexts(fields, pre, n) : undefined,
  });
}

/** A Text-input model's answer: the body goes to the worker as it is, and its OpenAI chunks come back. */
function textAnswer(r: Request, deps: GenerationDeps): Answer {
  const n = typeof r.fields.n === 'number' && Number.isInteger(r.fields.n) && r.fields.n > 1 ? r.fields.n : 1;
  const target = route(r, new Set(), undefined, r.requestId);
  const deltas = textDeltas(r.surface, target.client.direct(r.fields, target.instanceId, { context: r.context }));
  return answerOf(r, deps, {
    choices: n,
    deltas: deltas[Symbol.asyncIterator](),
    usage: new UsageCounter([{ firstIndex: 0, choices: n, countsPrompt: true }]),
    promptTokens: 0,
    newParser: r.surface === 'chat' && (r.model.parsers.toolCallParser || r.model.parsers.reasoningParser) ? () => ChatOutputParser.forRequest(r.model.parsers, r.fields) : undefined,
    echo: undefined,
  });
}

/** The prompt text each choice of an `echo` completions request starts with (prompt ids decoded). */
function echoTexts(fields: Record<string, unknown>, pre: Preprocessor, n: number): (index: number) => string {
  const prompts = promptBatch(fields.prompt as Parameters<typeof promptBatch>[0]).map((p) => (typeof p === 'string' ? p : pre.tokenizer.decode(Uint32Array.from(p), false)));
  return (index) => prompts[Math.floor(index / n)] ?? '';
}

async function preprocessorOf(model: ServedModel): Promise<Preprocessor> {
  try {
    return await model.preprocessor();
  } catch (err) {
    throw new HttpError(503, `model ${model.name} is not available: its files could not be loaded (${(err as Error).message})`, { cause: err });
  }
}

/** Preprocesses a Tokens-input body: template, tokenization, validation, context length; one request per prompt. */
async function preprocess(surface: Surface, model: ServedModel, pre: Preprocessor, body: unknown, options: { onCallingThread: boolean; maxDataUrlBytes: number }): Promise<PreprocessedRequest[]> {
  const requests = surface === 'chat' ? [(await pre.preprocessChat(body, options)).request] : await pre.preprocessCompletions(body);
  const context = model.card.context_length;
  for (const request of requests) {
    if (context > 0 && request.token_ids.length >= context) {
      throw new HttpError(
        400,
        `This model's maximum context length is ${context} tokens. However, your messages resulted in ${request.token_ids.length} tokens. Please reduce the length of the messages.`,
        { param: surface === 'chat' ? 'messages' : 'prompt' },
      );
    }
  }
  return requests;
}

