import type { PreprocessedRequest, Preprocessor } from '@dynamo/llm';
import { ChatOutputParser, promptBatch, streamProcessor } from '@dynamo/llm/internal';
import { Cancelled, type DynamoException } from '@dynamo/runtime';
import { mergeStreams, stringifyJson } from '@dynamo/runtime/internal';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { GenerationSurface, ServedModel } from '../models/served-model.js';
import { type AttemptDeps, attemptContext, attemptDeltas, attemptEvents } from '../attempts/attempt-stream.js';
import { type Attempt, planAttempts } from '../attempts/plan.js';
import { prefillHop } from '../attempts/prefill-hop.js';
import { textDeltas } from '../attempts/text-stream.js';
import { UsageCounter } from './usage.js';
import { ClientRequest, type RouteDeps } from './client-request.js';
import { HttpError } from '../http/errors.js';
import { EventOutput } from './event-output.js';
import { responseIds } from './shapes.js';
import type { FrontendConfig } from '../settings.js';
import { checkRequestFields } from './request-fields.js';
import { type Answer, type EventsAnswer, streamAnswer, streamEvents, wholeAnswer } from './respond.js';

/** What the generation routes need from the frontend: its requests' plumbing and its settings. */
export interface GenerationDeps extends RouteDeps {
  http: FrontendConfig['http'];
  migration: FrontendConfig['migration'];
}

type Request = ClientRequest<GenerationSurface>;

/** The handler of `/v1/chat/completions` or `/v1/completions`. */
export function generationHandler(surface: GenerationSurface, deps: GenerationDeps) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const request = ClientRequest.open(surface, req, reply, deps, { check: (fields) => checkRequestFields(surface, fields, deps.http.ignoreUnknownFields) });
    try {
      if (request.fields.stream === true && request.model.input === 'Tokens') {
        const plan = await tokensPlan(request, deps);
        const events = eventsAnswer(request, deps, plan);
        if (events) {
          // The first batch decides the status: an error before any output is an HTTP error.
          const first = await events.events.next();
          void reply.hijack();
          request.done(await streamEvents(events, reply, first, deps.log));
          return undefined;
        }
        return await streamDeltas(request, reply, tokensAnswer(request, deps, plan), deps);
      }
      const answer = await generationAnswer(request, deps);
      if (request.fields.stream !== true) {
        const response = await wholeAnswer(answer);
        request.done(true);
        if (!request.wantsWorkerId || request.lastInstance === undefined) return response;
        // Instance ids are u64: written as bare integers, not rounded.
        return reply.type('application/json').send(stringifyJson({ ...response, nvext: { worker_id: { decode_worker_id: request.lastInstance } } }));
      }
      return await streamDeltas(request, reply, answer, deps);
    } catch (err) {
      request.done(false);
      throw err;
    }
  };
}

async function streamDeltas(request: Request, reply: FastifyReply, answer: Answer, deps: GenerationDeps): Promise<undefined> {
  // The first item decides the status: an error before any output is an HTTP error.
  const first = await answer.deltas.next();
  void reply.hijack();
  request.done(await streamAnswer(answer, reply, first, deps.log));
  return undefined;
}

/** The output of a generation request on its way (its worker requests sent), for a route to write out. */
export async function generationAnswer(request: Request, deps: GenerationDeps): Promise<Answer> {
  return request.model.input === 'Tokens' ? tokensAnswer(request, deps, await tokensPlan(request, deps)) : await textAnswer(request, deps);
}

/** The answer settings every surface shares. */
function answerOf(r: Request, deps: GenerationDeps, parts: Pick<Answer, 'choices' | 'usage' | 'promptTokens' | 'newParser' | 'echo'>): Omit<Answer, 'deltas'> {
  const { surface, fields } = r;
  const options = fields.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | null | undefined;
  const includeUsage = deps.http.forceIncludeUsage || options?.include_usage === true;
  const topLogprobs =
    surface === 'chat'
      ? fields.logprobs === true
        ? typeof fields.top_logprobs === 'number'
          ? fields.top_logprobs
          : 0
        : undefined
      : typeof fields.logprobs === 'number'
        ? fields.logprobs
        : undefined;
  return {
    ...parts,
    surface,
    ids: responseIds(surface, r.requestId, fields.model as string),
    context: r.context,
    includeUsage,
    continuousUsage: includeUsage && options?.continuous_usage_stats === true,
    tracker: r.tracker,
    reasoningField: deps.http.reasoningField,
    overloadStatus: deps.http.overloadStatus,
    keepAliveMs: deps.http.sseKeepAliveMs,
    singleToolCall: surface === 'chat' && fields.parallel_tool_calls === false,
    topLogprobs,
  };
}

/** A Tokens-input request's worker requests: the body preprocessed, its attempts planned. */
interface TokensPlan {
  pre: Preprocessor;
  prompts: PreprocessedRequest[];
  n: number;
  attempts: Attempt[];
  attemptDeps: AttemptDeps;
}

/**
 * Preprocesses a Tokens-input model's request into one worker request per prompt, each sent for
 * its `n` choices (or once per choice, see `planAttempts`).
 */
async function tokensPlan(r: Request, deps: GenerationDeps): Promise<TokensPlan> {
  const { surface, model, fields, context } = r;
  const pre = await r.preprocessor();
  // Alone, a request is fastest preprocessed on this thread; with others in flight, off it.
  const prompts = await preprocess(surface, model, pre, fields, { onCallingThread: r.alone, maxDataUrlBytes: deps.http.maxDataUrlBytes });
  if (context.isKilled()) throw new Cancelled('client closed the request while it was preprocessed');
  const n = prompts[0]!.sampling_options?.n ?? 1;
  const attempts = planAttempts(prompts, n, model.generatesChoices);
  const attemptDeps: AttemptDeps = {
    tokenizer: pre.tokenizer,
    migrationLimit: r.pinned !== undefined ? 0 : (deps.migration.limit ?? model.cardMigrationLimit),
    route: (failed, request, routeId) => r.route(failed, request.token_ids, routeId),
    onMigrate: (err: DynamoException, instanceId: bigint) => {
      if (err.kind === 'WorkerOverloaded') model.routing.overloaded(instanceId);
      deps.metrics.migrations.inc({ model: model.name.toLowerCase() });
      deps.log.warn(
        { request_id: r.requestId, model: model.name, instance_id: instanceId.toString(16), err: err.message },
        'worker failed mid-request; migrating',
      );
    },
    onFirstOutput: (routeId) => model.routing.firstOutput(routeId),
    responseTimeoutMs: deps.migration.backendStreamTimeoutMs,
    maxSeqLen: deps.migration.maxSeqLen ?? (model.card.context_length > 0 ? model.card.context_length : undefined),
    onMaxSeqLen: (length) => {
      deps.metrics.migrationMaxSeqLenExceeded.inc({ model: model.name.toLowerCase() });
      deps.log.warn(
        { request_id: r.requestId, model: model.name, length },
        'the sequence is past the migration max sequence length: no more migrations for this request',
      );
    },
    ...((model.base ?? model).disaggregated && { prefill: prefillOf(r, deps) }),
  };
  return { pre, prompts, n, attempts, attemptDeps };
}

/** A disaggregated model's prefill hop: its prefill workers placed by their own router (KV-aware in kv mode). */
function prefillOf(r: Request, deps: GenerationDeps): NonNullable<AttemptDeps['prefill']> {
  const base = r.model.base ?? r.model;
  const workers = () => base.prefillWorkers?.();
  return (request, context, routeId) => {
    const requestId = `${routeId}-prefill`;
    return prefillHop(request, context, {
      model: r.model.name,
      required: base.needsPrefill,
      route: (failed, prefill) => {
        const pool = workers();
        const candidates = pool?.candidates('prefill') ?? [];
        if (!pool || candidates.length === 0) return undefined;
        return pool.routing.place(
          candidates,
          {
            model: pool.name,
            requestId,
            tokenIds: prefill.token_ids,
            failed,
            signal: context.signal,
            ...(r.model.loraName !== undefined && { loraName: r.model.loraName }),
          },
          undefined,
        );
      },
      finished: () => workers()?.routing.finished(requestId),
      onFailed: (err, instanceId) =>
        deps.log.warn(
          { request_id: r.requestId, model: r.model.name, instance_id: instanceId.toString(16), err: err.message },
          'prefill worker failed; the request goes on without it',
        ),
    });
  };
}

/** Whether a chat's output goes through the model's parsers (tool calls, reasoning). */
function parsesOutput(r: Request): boolean {
  return r.surface === 'chat' && Boolean(r.model.parsers.toolCallParser || r.model.parsers.reasoningParser || r.fields.tool_choice !== undefined);
}

/** A Tokens-input model's answer: the outputs of its attempts postprocessed and merged. */
function tokensAnswer(r: Request, deps: GenerationDeps, plan: TokensPlan): Answer {
  const { surface, fields, context } = r;
  const { pre, prompts, n, attempts, attemptDeps } = plan;
  const deltas =
    attempts.length === 1
      ? attemptDeltas(attempts[0]!, r.requestId, context, attemptDeps)
      : mergeStreams(
          attempts.map((attempt, at) => attemptDeltas(attempt, `${r.requestId}-${at}`, attemptContext(context, `${r.requestId}-${at}`), attemptDeps)),
        );
  const answer = answerOf(r, deps, {
    choices: prompts.length * n,
    usage: new UsageCounter(attempts),
    promptTokens: prompts.reduce((sum, p) => sum + p.token_ids.length, 0),
    newParser: parsesOutput(r) ? () => ChatOutputParser.forRequest(r.model.parsers, fields, pre.tokenizer) : undefined,
    echo: surface === 'completions' && fields.echo === true ? echoTexts(fields, pre, n) : undefined,
  });
  return { ...answer, deltas: deltas[Symbol.asyncIterator]() };
}

/**
 * A streamed Tokens-input answer on the Rust path (`StreamProcessor`), when the request is one
 * it writes: one prompt, one choice, no parsers, log probabilities, echo or running usage.
 * Undefined otherwise.
 */
function eventsAnswer(r: Request, deps: GenerationDeps, plan: TokensPlan): EventsAnswer | undefined {
  const { attempts, prompts } = plan;
  const attempt = attempts[0]!;
  // A disaggregated answer may come from its prefill worker whole: the JavaScript path carries it.
  if (attempts.length !== 1 || attempt.choices !== 1 || parsesOutput(r) || (r.surface === 'completions' && r.fields.echo === true) || plan.attemptDeps.prefill)
    return undefined;
  const answer = answerOf(r, deps, {
    choices: 1,
    usage: new UsageCounter(attempts),
    promptTokens: prompts[0]!.token_ids.length,
    newParser: undefined,
    echo: undefined,
  });
  if (answer.topLogprobs !== undefined || answer.continuousUsage) return undefined;
  const output = new EventOutput(
    streamProcessor(plan.pre.tokenizer, attempt.request, { surface: r.surface, ...answer.ids }),
    answer.tracker,
    answer.promptTokens,
  );
  const events = attemptEvents(attempt, r.requestId, r.context, plan.attemptDeps, output);
  return { ...answer, output, events: events[Symbol.asyncIterator]() };
}

/** A Text-input model's answer: the body goes to the worker as it is, and its OpenAI chunks come back. */
async function textAnswer(r: Request, deps: GenerationDeps): Promise<Answer> {
  const n = typeof r.fields.n === 'number' && Number.isInteger(r.fields.n) && r.fields.n > 1 ? r.fields.n : 1;
  const target = await r.route(new Set(), undefined, r.requestId);
  const deltas = textDeltas(r.surface, target.client.direct(r.fields, target.instanceId, { context: r.context }));
  const answer = answerOf(r, deps, {
    choices: n,
    usage: new UsageCounter([{ firstIndex: 0, choices: n, countsPrompt: true }]),
    promptTokens: 0,
    newParser:
      r.surface === 'chat' && (r.model.parsers.toolCallParser || r.model.parsers.reasoningParser)
        ? () => ChatOutputParser.forRequest(r.model.parsers, r.fields)
        : undefined,
    echo: undefined,
  });
  return { ...answer, deltas: deltas[Symbol.asyncIterator]() };
}

/** The prompt text each choice of an `echo` completions request starts with (prompt ids decoded). */
function echoTexts(fields: Record<string, unknown>, pre: Preprocessor, n: number): (index: number) => string {
  const prompts = promptBatch(fields.prompt as Parameters<typeof promptBatch>[0]).map((p) =>
    typeof p === 'string' ? p : pre.tokenizer.decode(Uint32Array.from(p), false),
  );
  return (index) => prompts[Math.floor(index / n)] ?? '';
}

/** Preprocesses a Tokens-input body: template, tokenization, validation, context length; one request per prompt. */
async function preprocess(
  surface: GenerationSurface,
  model: ServedModel,
  pre: Preprocessor,
  body: unknown,
  options: { onCallingThread: boolean; maxDataUrlBytes: number },
): Promise<PreprocessedRequest[]> {
  const requests = surface === 'chat' ? [(await pre.preprocessChat(body, options)).request] : await pre.preprocessCompletions(body, options);
  const context = model.card.context_length;
  for (const request of requests) {
    // As stock's, the worker learns the adapter from `model` (the adapter's name) and `routing.lora_name`.
    if (model.loraName !== undefined) request.routing = { ...request.routing, lora_name: model.loraName };
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
