import type { ChoiceDelta } from '@dynamo/llm';
import { parseOrThrow } from '@dynamo/runtime';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { MessageStream, messageId, stopReason, wholeMessage } from './output.js';
import {
  chatMessages,
  CountTokensRequestSchema,
  type MessagesRequest,
  parseMessagesRequest,
  type PromptOptions,
  systemText,
  toChatRequest,
} from './request.js';
import { ChoiceOutput } from '../openai/choice-output.js';
import { ClientRequest } from '../openai/client-request.js';
import { toHttpError } from '../http/errors.js';
import { type GenerationDeps, generationAnswer } from '../openai/generation.js';
import { type Answer, account, gatherChoice } from '../openai/respond.js';
import { SseWriter } from '../http/sse.js';

/** The route prefix of the Anthropic Messages API; errors under it use Anthropic's shape. */
export const ANTHROPIC_PATH = '/v1/messages';

/**
 * The handler of `/v1/messages` (behind `--enable-anthropic-api`, as in stock): the Anthropic
 * Messages API over the chat pipeline, as stock Dynamo 1.6.1 maps it (`anthropic/request.ts`),
 * answered whole or as Anthropic's streaming events.
 */
export function messagesHandler(deps: GenerationDeps, prompt: PromptOptions) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    let parsed: MessagesRequest | undefined;
    const request = ClientRequest.open('chat', req, reply, deps, {
      label: 'messages',
      fields: (body) => toChatRequest((parsed = parseMessagesRequest(body)), prompt),
    });
    const messages = parsed!;
    try {
      const answer = await generationAnswer(request, deps);
      const id = messageId();
      if (messages.stream !== true) {
        const message = await whole(answer, id, request.model.name);
        request.done(true);
        return message;
      }
      const first = await answer.deltas.next();
      void reply.hijack();
      request.done(await stream(answer, reply, first, id, request.model.name, deps));
      return undefined;
    } catch (err) {
      request.done(false);
      throw err;
    }
  };
}

async function whole(a: Answer, id: string, model: string): Promise<Record<string, unknown>> {
  let stopString: string | undefined;
  const choice = await gatherChoice(a, (delta) => (stopString = stopStringOf(delta) ?? stopString));
  const parts = choice.whole.parts;
  return wholeMessage(id, model, parts, stopReason(choice.finishReason, stopString, parts.toolCalls.length > 0), a.usage.usage(choice.reasoningTokens));
}

/** The stop string a delta stopped at, if it did (Anthropic names it in `stop_sequence`). */
const stopStringOf = (delta: ChoiceDelta): string | undefined => (typeof delta.stopReason === 'string' ? delta.stopReason : undefined);

async function stream(a: Answer, reply: FastifyReply, first: IteratorResult<ChoiceDelta>, id: string, model: string, deps: GenerationDeps): Promise<boolean> {
  const sse = new SseWriter(reply.raw, { 'x-request-id': a.context.id() }, a.keepAliveMs);
  const events = new MessageStream(sse, id, model, a.promptTokens);
  const choice = new ChoiceOutput(0, a);
  let stopString: string | undefined;
  let calls = 0;
  try {
    for (let r = first; !r.done; r = await a.deltas.next()) {
      const delta = r.value;
      account(a, delta);
      stopString = stopStringOf(delta) ?? stopString;
      const parts = choice.parts(delta);
      calls += parts.toolCalls.length;
      if (delta.openaiFinishReason !== undefined) choice.finish(delta.openaiFinishReason);
      const wait = events.push(parts);
      if (wait) await wait;
      if (sse.closed) return false;
    }
    if (a.context.isKilled() || sse.closed) return false;
    if (choice.finishReason === null) {
      const rest = choice.rest();
      calls += rest.toolCalls.length;
      events.push(rest);
      choice.finish(undefined);
    }
    events.end(stopReason(choice.finishReason, stopString, calls > 0), a.usage.usage(choice.reasoningTokens));
    return true;
  } catch (err) {
    const error = toHttpError(err, a.overloadStatus);
    deps.log.warn({ request_id: a.context.id(), status: error.status, err: error.message }, 'message stream failed after it started');
    events.fail(error.status, error.message, a.overloadStatus);
    return false;
  }
}

/**
 * The handler of `/v1/messages/count_tokens`: the prompt's tokens, counted exactly (the model's
 * chat template and tokenizer) for a model served here with Tokens input, else estimated as stock
 * estimates every count (a token per 3 bytes of text).
 */
export function countTokensHandler(deps: GenerationDeps, prompt: PromptOptions) {
  return async (req: FastifyRequest): Promise<{ input_tokens: number }> => {
    const body = parseOrThrow(CountTokensRequestSchema, req.body, 'request');
    const model = deps.registry.get(body.model);
    const chat = {
      model: body.model,
      messages: chatMessages(body, prompt),
      ...(body.tools &&
        body.tools.length > 0 && {
          tools: body.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
        }),
    };
    if (model?.input === 'Tokens' && model.serves('chat')) {
      const { request } = await (await model.preprocessor()).preprocessChat(chat);
      return { input_tokens: request.token_ids.length };
    }
    const bytes = Buffer.byteLength(JSON.stringify(chat.messages)) + Buffer.byteLength(systemText(body.system, prompt) ?? '');
    return { input_tokens: Math.max(bytes > 0 ? 1 : 0, Math.floor(bytes / 3)) };
  };
}
