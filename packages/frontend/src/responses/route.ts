import type { ChoiceDelta } from '@dynamo/llm';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { type ResponseEcho, responseEcho, ResponseStream, wholeResponse } from './output.js';
import { parseResponsesRequest, type ResponsesRequest, responseTools, toChatRequest } from './request.js';
import type { ResponseTools } from './tools.js';
import { ChoiceOutput } from '../openai/choice-output.js';
import { ClientRequest } from '../openai/client-request.js';
import { toHttpError } from '../http/errors.js';
import { type GenerationDeps, generationAnswer } from '../openai/generation.js';
import { type Answer, account, gatherChoice } from '../openai/respond.js';
import { SseWriter } from '../http/sse.js';

/** The response header that lists the hosted tool types a request offered and the model was not shown. */
const DROPPED_TOOLS_HEADER = 'x-dynamo-dropped-tools';

/**
 * The handler of `/v1/responses`: the OpenAI Responses API over the chat pipeline, as stock
 * Dynamo 1.6.1 maps it (see `responses/request.ts`): the request becomes a chat completion, its
 * parsed output (text, tool calls, reasoning) becomes a Response, whole or as typed SSE events.
 * Stateless: `previous_response_id` and background responses are refused (501). Hosted tools
 * (web search and the like) are left out of the prompt, logged, and named in `x-dynamo-dropped-tools`.
 */
export function responsesHandler(deps: GenerationDeps) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    let parsed: ResponsesRequest | undefined;
    let tools: ResponseTools | undefined;
    const request = ClientRequest.open('chat', req, reply, deps, {
      label: 'responses',
      fields: (body) => {
        parsed = parseResponsesRequest(body);
        tools = responseTools(parsed);
        return toChatRequest(parsed, tools);
      },
    });
    const responses = parsed!;
    try {
      const answer = await generationAnswer(request, deps);
      const echo = responseEcho(responses, tools!, request.model.name);
      const withReasoning = responses.reasoning?.summary != null;
      const headers: Record<string, string> = {};
      if (echo.tools.dropped.length > 0) {
        headers[DROPPED_TOOLS_HEADER] = echo.tools.dropped.join(', ');
        deps.log.warn({ request_id: answer.context.id(), dropped: echo.tools.dropped }, 'hosted tools left out of the prompt: this server cannot run them');
      }
      if (responses.stream !== true) {
        const response = await wholeAnswer(answer, echo, withReasoning);
        request.done(true);
        void reply.headers(headers);
        return response;
      }
      const first = await answer.deltas.next();
      void reply.hijack();
      request.done(await streamAnswer(answer, reply, first, echo, withReasoning, headers, deps));
      return undefined;
    } catch (err) {
      request.done(false);
      throw err;
    }
  };
}

async function wholeAnswer(a: Answer, echo: ResponseEcho, withReasoning: boolean): Promise<Record<string, unknown>> {
  const choice = await gatherChoice(a);
  return wholeResponse(echo, choice.whole.parts, choice.finishReason, a.usage.usage(choice.reasoningTokens), withReasoning);
}

async function streamAnswer(
  a: Answer,
  reply: FastifyReply,
  first: IteratorResult<ChoiceDelta>,
  echo: ResponseEcho,
  withReasoning: boolean,
  headers: Record<string, string>,
  deps: GenerationDeps,
): Promise<boolean> {
  const sse = new SseWriter(reply.raw, { 'x-request-id': a.context.id(), ...headers }, a.keepAliveMs);
  const stream = new ResponseStream(sse, echo, withReasoning);
  const choice = new ChoiceOutput(0, a);
  try {
    for (let r = first; !r.done; r = await a.deltas.next()) {
      const delta = r.value;
      account(a, delta);
      const wait = stream.push(choice.parts(delta));
      if (delta.openaiFinishReason !== undefined) stream.finish(choice.finish(delta.openaiFinishReason));
      if (wait) await wait;
      if (sse.closed) return false;
    }
    if (a.context.isKilled() || sse.closed) return false;
    if (choice.finishReason === null) {
      stream.push(choice.rest());
      stream.finish(choice.finish(undefined));
    }
    stream.end(a.usage.usage(choice.reasoningTokens));
    return true;
  } catch (err) {
    const error = toHttpError(err, a.overloadStatus);
    deps.log.warn({ request_id: a.context.id(), status: error.status, err: error.message }, 'response stream failed after it started');
    stream.fail(error.message);
    return false;
  }
}
