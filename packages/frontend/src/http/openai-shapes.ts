import type { ChatParts } from '@dynamo/llm';

import type { Surface } from '../models/served-model.js';

/** Token counts as OpenAI reports them. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** What every chunk and response of one request shares. */
export interface ResponseIds {
  id: string;
  created: number;
  model: string;
}

/** The ids of a response: `chatcmpl-<request id>` or `cmpl-<request id>`. */
export function responseIds(surface: Surface, requestId: string, model: string): ResponseIds {
  return { id: `${surface === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestId}`, created: Math.floor(Date.now() / 1000), model };
}

/** One streamed chunk's JSON: a chat delta or a completions text piece. */
export function chunkJson(surface: Surface, ids: ResponseIds, text: string, finishReason: string | null, first: boolean): string {
  if (surface === 'chat') {
    const delta = first ? { role: 'assistant', content: text } : { content: text };
    return JSON.stringify({ id: ids.id, object: 'chat.completion.chunk', created: ids.created, model: ids.model, choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }] });
  }
  return JSON.stringify({ id: ids.id, object: 'text_completion', created: ids.created, model: ids.model, choices: [{ index: 0, text, finish_reason: finishReason, logprobs: null }] });
}

/** A streamed chat chunk of parsed output: content, and reasoning and tool calls when there are some. */
export function parsedChunkJson(ids: ResponseIds, parts: ChatParts, finishReason: string | null, first: boolean, reasoningField = 'reasoning_content'): string {
  const delta: Record<string, unknown> = first ? { role: 'assistant', content: parts.content } : { content: parts.content };
  if (parts.reasoning !== '') delta[reasoningField] = parts.reasoning;
  if (parts.toolCalls.length > 0) delta.tool_calls = parts.toolCalls;
  return JSON.stringify({ id: ids.id, object: 'chat.completion.chunk', created: ids.created, model: ids.model, choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }] });
}

/** A whole chat response of parsed output: empty content is null, as stock Dynamo sends it. */
export function parsedResponse(ids: ResponseIds, parts: ChatParts, finishReason: string, usage: Usage, reasoningField = 'reasoning_content'): Record<string, unknown> {
  const message: Record<string, unknown> = { role: 'assistant', content: parts.content === '' ? null : parts.content };
  if (parts.reasoning !== '') message[reasoningField] = parts.reasoning;
  if (parts.toolCalls.length > 0) message.tool_calls = parts.toolCalls.map(({ id, type, function: fn }) => ({ id, type, function: fn }));
  return { id: ids.id, object: 'chat.completion', created: ids.created, model: ids.model, choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null }], usage };
}

/**
 * The JSON of a plain chunk (not the first, no finish reason) for one request, as `chunkJson`
 * writes it but built once: per token only the text is serialized, into a fixed prefix and
 * suffix.
 */
export function plainChunkJson(surface: Surface, ids: ResponseIds): (text: string) => string {
  const marker = JSON.stringify('\u0000');
  const template = chunkJson(surface, ids, '\u0000', null, false);
  // The text is the last string field: the model name before it may hold the marker too.
  const at = template.lastIndexOf(marker);
  const prefix = template.slice(0, at);
  const suffix = template.slice(at + marker.length);
  return (text) => prefix + JSON.stringify(text) + suffix;
}

/** The usage-only chunk sent last with `stream_options.include_usage`. */
export function usageChunkJson(surface: Surface, ids: ResponseIds, usage: Usage): string {
  const object = surface === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  return JSON.stringify({ id: ids.id, object, created: ids.created, model: ids.model, choices: [], usage });
}

/** A whole (non-streamed) response. */
export function completeResponse(surface: Surface, ids: ResponseIds, text: string, finishReason: string, usage: Usage): Record<string, unknown> {
  const choice =
    surface === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: finishReason, logprobs: null }
      : { index: 0, text, finish_reason: finishReason, logprobs: null };
  return { id: ids.id, object: surface === 'chat' ? 'chat.completion' : 'text_completion', created: ids.created, model: ids.model, choices: [choice], usage };
}

/**
 * Usage from the frontend's counts, with the engine's cached-token count when it sent one and the
 * reasoning-token count when a reasoning parser applied.
 */
export function usageOf(promptTokens: number, completionTokens: number, engineUsage: unknown, reasoningTokens?: number): Usage {
  const usage: Usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  const cached = (engineUsage as { prompt_tokens_details?: { cached_tokens?: unknown } } | undefined)?.prompt_tokens_details?.cached_tokens;
  if (typeof cached === 'number') usage.prompt_tokens_details = { cached_tokens: cached };
  if (reasoningTokens !== undefined) usage.completion_tokens_details = { reasoning_tokens: reasoningTokens };
  return usage;
}
