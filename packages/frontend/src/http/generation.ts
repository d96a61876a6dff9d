import { randomUUID } from 'node:crypto';
import { ChatOutputParser, type ChatParts, joinParts, type PreprocessedRequest, postprocessBatches, type TextDelta } from '@dynamo/llm';
import { CannotConnect, Context, type DynamoException, type Log, parseTraceparent } from '@dynamo/runtime';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { FrontendMetrics, RequestTracker } from '../metrics.js';
import type { ModelRegistry } from '../models/registry.js';
import type { ServedModel, Surface } from '../models/served-model.js';
import { onFirstOutput } from '../pipeline/first-output.js';
import { migratingStream } from '../pipeline/migration.js';
import { textDeltas } from '../pipeline/text-stream.js';
import type { Candidate } from '../routing/router.js';
import { HttpError, toHttpError } from './errors.js';
import { chunkJson, completeResponse, parsedChunkJson, parsedResponse, plainChunkJson, type ResponseIds, responseIds, usageChunkJson, usageOf } from './openai-shapes.js';
import { checkRequestFields, pinnedInstance } from './request-fields.js';
import { SseWriter } from './sse.js';

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
  /** Contexts of the requests in flight, so shutdown can end them. */
  inflight: Set<Context>;
  log: Log;
}

/** One request on its way through the pipeline. */
interface Generation {
  surface: Surface;
  model: ServedModel;
  ids: ResponseIds;
  context: Context;
  promptTokens: number;
  streaming: boolean;
  includeUsage: boolean;
  tracker: RequestTracker;
  deltas: AsyncIterator<TextDelta>;
  /** Splits chat output into content, reasoning and tool calls when the model has parsers. */
  parser: ChatOutputParser | undefined;
  reasoningField: 'reasoning_content' | 'reasoning';
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
    if (typeof fields.model !== 'string') throw new HttpError(400, `request.model: ${fields.model === undefined ? 'missing field' : 'must be a string'}`);
    checkRequestFields(surface, fields, deps.ignoreUnknownFields);
    const model = deps.registry.get(fields.model);
    if (!model) throw new HttpError(404, `Model not found: ${fields.model}`);
    if (!model.serves(surface)) throw new HttpError(404, `model ${model.name} does not serve ${surface === 'chat' ? '/v1/chat/completions' : '/v1/completions'}`);
    const pinned = pinnedInstance(req.headers, fields);
    const requestId = header(req, 'x-request-id') || randomUUID();
    void reply.header('x-request-id', requestId);
    const streaming = fields.stream === true;
    const traceparent = header(req, 'traceparent');
    const trace = traceparent === undefined ? undefined : parseTraceparent(traceparent, header(req, 'tracestate'));
    const context = new Context({ id: requestId, ...(trace ? { trace } : {}) });

    let request: PreprocessedRequest | undefined;
    // Alone, a request is fastest preprocessed on this thread; with others in flight, off it.
    if (model.input === 'Tokens') request = await preprocess(surface, model, body, deps.inflight.size === 0);
    const parses = request && surface === 'chat' && (model.parsers.toolCallParser || model.parsers.reasoningParser || fields.tool_choice !== undefined);
    const parser = parses ? ChatOutputParser.forRequest(model.parsers, fields, (await model.preprocessor()).tokenizer) : undefined;
    const route = (failed: ReadonlySet<bigint>): Candidate => {
      if (pinned !== undefined) {
        const candidate = model.candidate(pinned);
        if (!candidate) throw new CannotConnect(`instance ${pinned} does not serve model ${model.name}`);
        return candidate;
      }
      const candidates = model.candidates();
      if (candidates.length === 0) throw new CannotConnect(`no instance of model ${model.name} is available`);
      return model.router.select(candidates, { model: model.name, requestId, failed, ...(request ? { tokenIds: request.token_ids } : {}) });
    };

    const tracker = deps.metrics.track(model.name, surface === 'chat' ? 'chat_completions' : 'completions', streaming);
    deps.inflight.add(context);
    const onClose = () => {
      if (reply.raw.writableFinished) return;
      context.kill();
      deps.metrics.disconnects.inc({ model: model.name.toLowerCase() });
    };
    reply.raw.on('close', onClose);
    const done = (ok: boolean) => {
      tracker.finish(ok);
      model.router.finished?.(requestId);
      deps.inflight.delete(context);
      reply.raw.off('close', onClose);
    };

    const usage = fields.stream_options as { include_usage?: unknown } | null | undefined;
    try {
      let deltas: AsyncIterable<TextDelta>;
      if (request) {
        const limit = pinned !== undefined ? 0 : (deps.migrationLimit ?? model.cardMigrationLimit);
        const outputs = migratingStream(request, {
          limit,
          context,
          route,
          onMigrate: (err: DynamoException, instanceId: bigint) => {
            deps.metrics.migrations.inc({ model: model.name.toLowerCase() });
            deps.log.warn({ request_id: requestId, model: model.name, instance_id: instanceId.toString(16), err: err.message }, 'worker failed mid-request; migrating');
          },
        });
        deltas = postprocessBatches((await model.preprocessor()).tokenizer, request, onFirstOutput(outputs, () => model.router.firstOutput?.(requestId)));
      } else {
        const target = route(new Set());
        deltas = textDeltas(surface, target.client.direct(body, target.instanceId, { context }));
      }
      const generation: Generation = {
        surface,
        model,
        ids: responseIds(surface, requestId, fields.model),
        context,
        promptTokens: request?.token_ids.length ?? 0,
        streaming,
        includeUsage: deps.forceIncludeUsage || usage?.include_usage === true,
        tracker,
        deltas: deltas[Symbol.asyncIterator](),
        parser,
        reasoningField: deps.reasoningField ?? 'reasoning_content',
      };
      if (!streaming) {
        const response = await aggregate(generation);
        done(true);
        return response;
      }
      // The first item decides the status: an error before any output is an HTTP error.
      const first = await generation.deltas.next();
      void reply.hijack();
      done(await stream(generation, reply, first, deps.log));
      return undefined;
    } catch (err) {
      done(false);
      throw err;
    }
  };
}

/** Preprocesses a Tokens-input request: template, tokenization, validation, context length. */
async function preprocess(surface: Surface, model: ServedModel, body: unknown, onCallingThread: boolean): Promise<PreprocessedRequest> {
  let pre;
  try {
    pre = await model.preprocessor();
  } catch (err) {
    throw new HttpError(503, `model ${model.name} is not available: its files could not be loaded (${(err as Error).message})`, { cause: err });
  }
  let request: PreprocessedRequest;
  if (surface === 'chat') {
    request = (await pre.preprocessChat(body, { onCallingThread })).request;
  } else {
    const all = await pre.preprocessCompletions(body);
    if (all.length !== 1) throw new HttpError(400, `Validation: a batch of ${all.length} prompts is not supported; send one prompt per request`);
    request = all[0]!;
  }
  const context = model.card.context_length;
  if (context > 0 && request.token_ids.length >= context) {
    throw new HttpError(
      400,
      `This model's maximum context length is ${context} tokens. However, your messages resulted in ${request.token_ids.length} tokens. Please reduce the length of the messages.`,
    );
  }
  return request;
}

/** A response that made tool calls finishes with `tool_calls`, unless it was cut off. */
function finishReason(parser: ChatOutputParser, reason: TextDelta['openaiFinishReason']): string {
  const base = reason ?? 'stop';
  return base === 'stop' && parser.sawToolCalls ? 'tool_calls' : base;
}

const isEmpty = (parts: ChatParts): boolean => parts.content === '' && parts.reasoning === '' && parts.toolCalls.length === 0;

/** The prompt's length: ours for Tokens input, the worker's report for Text input. */
function promptTokens(g: Generation, last: TextDelta | undefined): number {
  return g.promptTokens === 0 && last?.usage ? last.usage.prompt_tokens : g.promptTokens;
}

/** Collects the whole output into one response; an engine error becomes the HTTP error. */
async function aggregate(g: Generation): Promise<Record<string, unknown>> {
  let text = '';
  let last: TextDelta | undefined;
  for (let r = await g.deltas.next(); !r.done; r = await g.deltas.next()) {
    const delta = r.value;
    g.tracker.tokens(delta.tokenIds.length, g.promptTokens);
    if (delta.finishReason === 'error') throw new HttpError(500, `the engine failed: ${delta.error ?? 'unknown error'}`);
    text += delta.text;
    g.parser?.countTokens(delta.tokenIds);
    last = delta;
  }
  if (g.context.isKilled()) throw new HttpError(499, 'client closed the request');
  const usage = usageOf(promptTokens(g, last), last?.completionTokens ?? 0, last?.usage, g.parser?.reasoningTokens);
  if (!g.parser) return completeResponse(g.surface, g.ids, text, last?.openaiFinishReason ?? 'stop', usage);
  const parts = joinParts(g.parser.push(text), g.parser.finish());
  return parsedResponse(g.ids, parts, finishReason(g.parser, last?.openaiFinishReason), usage, g.reasoningField);
}

/**
 * Streams the output as SSE after `first`. A failure mid-stream becomes an error event (the
 * status line is already sent). Returns whether the response was complete.
 */
async function stream(g: Generation, reply: FastifyReply, first: IteratorResult<TextDelta>, log: Log): Promise<boolean> {
  const sse = new SseWriter(reply.raw, { 'x-request-id': g.context.id() });
  const plain = plainChunkJson(g.surface, g.ids);
  let last: TextDelta | undefined;
  let sent = 0;
  try {
    for (let r = first; !r.done; r = await g.deltas.next()) {
      const delta = r.value;
      g.tracker.tokens(delta.tokenIds.length, g.promptTokens);
      if (delta.finishReason === 'error') {
        sse.error(`the engine failed: ${delta.error ?? 'unknown error'}`);
        sse.end();
        return false;
      }
      last = delta;
      let json: string;
      if (g.parser) {
        g.parser.countTokens(delta.tokenIds);
        const finishing = delta.openaiFinishReason !== undefined;
        const parts = finishing ? joinParts(g.parser.push(delta.text), g.parser.finish()) : g.parser.push(delta.text);
        if (!finishing && sent > 0 && isEmpty(parts)) continue;
        json = parsedChunkJson(g.ids, parts, finishing ? finishReason(g.parser, delta.openaiFinishReason) : null, sent === 0, g.reasoningField);
      } else {
        if (delta.text === '' && delta.openaiFinishReason === undefined && sent > 0) continue;
        const finish = delta.openaiFinishReason ?? null;
        json = sent > 0 && finish === null ? plain(delta.text) : chunkJson(g.surface, g.ids, delta.text, finish, sent === 0);
      }
      const wait = sse.data(json);
      sent += 1;
      if (wait) await wait;
      if (sse.closed) return false;
    }
    if (g.context.isKilled() || sse.closed) return false;
    if (last?.openaiFinishReason === undefined) {
      sse.data(g.parser ? parsedChunkJson(g.ids, g.parser.finish(), finishReason(g.parser, undefined), sent === 0, g.reasoningField) : chunkJson(g.surface, g.ids, '', 'stop', sent === 0));
    }
    if (g.includeUsage) {
      sse.data(usageChunkJson(g.surface, g.ids, usageOf(promptTokens(g, last), last?.completionTokens ?? 0, last?.usage, g.parser?.reasoningTokens)));
    }
    sse.done();
    return true;
  } catch (err) {
    const error = toHttpError(err);
    log.warn({ request_id: g.context.id(), model: g.model.name, status: error.status, err: error.message }, 'stream failed after it started');
    sse.error(error.message);
    sse.end();
    return false;
  }
}
