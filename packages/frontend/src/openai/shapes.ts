import type { TokenLogprob } from '@dynamo/llm';
import type { ChatParts } from '@dynamo/llm/internal';

import type { GenerationSurface } from '../models/served-model.js';

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
export function responseIds(surface: GenerationSurface, requestId: string, model: string): ResponseIds {
  return { id: `${surface === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestId}`, created: Math.floor(Date.now() / 1000), model };
}

/** Chat `logprobs`: each token with its bytes and up to `top` alternatives (stock also names its id). */
export function chatLogprobs(entries: readonly TokenLogprob[], top: number): { content: unknown[]; refusal: null } {
  return {
    content: entries.map((e) => ({
      token: e.token,
      logprob: e.logprob,
      token_id: e.tokenId,
      bytes: e.bytes,
      top_logprobs: e.top.slice(0, top).map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })),
    })),
    refusal: null,
  };
}

/** Completions `logprobs`: tokens, their log probabilities, up to `top` alternatives each, and where each token starts in the text. */
export function completionLogprobs(entries: readonly TokenLogprob[], top: number, textOffsets: readonly number[]): Record<string, unknown> {
  return {
    tokens: entries.map((e) => e.token),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => Object.fromEntries(e.top.slice(0, top).map((t) => [t.token, t.logprob]))),
    text_offset: textOffsets,
  };
}

/** What one chunk of one choice carries. */
export interface ChunkContent {
  /** Chat: content, reasoning and tool calls; completions: the text. */
  parts: ChatParts;
  finishReason: string | null;
  /** Chat: the first chunk of a choice names the role. */
  first: boolean;
  logprobs?: unknown;
  usage?: Usage;
}

/** One streamed chunk's JSON: a chat delta or a completions text piece, for choice `index`. */
export function chunkJson(surface: GenerationSurface, ids: ResponseIds, index: number, c: ChunkContent, reasoningField = 'reasoning_content'): string {
  const usage = c.usage ? { usage: c.usage } : {};
  if (surface === 'completions') {
    const choice = { index, text: c.parts.content, finish_reason: c.finishReason, logprobs: c.logprobs ?? null };
    return JSON.stringify({ id: ids.id, object: 'text_completion', created: ids.created, model: ids.model, choices: [choice], ...usage });
  }
  const delta: Record<string, unknown> = c.first ? { role: 'assistant', content: c.parts.content } : { content: c.parts.content };
  if (c.parts.reasoning !== '') delta[reasoningField] = c.parts.reasoning;
  if (c.parts.toolCalls.length > 0) delta.tool_calls = c.parts.toolCalls;
  const choice = { index, delta, finish_reason: c.finishReason, logprobs: c.logprobs ?? null };
  return JSON.stringify({ id: ids.id, object: 'chat.completion.chunk', created: ids.created, model: ids.model, choices: [choice], ...usage });
}

/**
 * The JSON of a plain chunk of choice `index` (text only: not the first, no finish reason,
 * logprobs or usage), as `chunkJson` writes it but built once: per token only the text is
 * serialized, into a fixed prefix and suffix.
 */
export function plainChunkJson(surface: GenerationSurface, ids: ResponseIds, index: number): (text: string) => string {
  const marker = JSON.stringify('\u0000');
  const template = chunkJson(surface, ids, index, { parts: { content: '\u0000', reasoning: '', toolCalls: [] }, finishReason: null, first: false });
  // The text is the last string field before the finish reason: the model name may hold the marker too.
  const at = template.lastIndexOf(marker);
  const prefix = template.slice(0, at);
  const suffix = template.slice(at + marker.length);
  return (text) => prefix + JSON.stringify(text) + suffix;
}

/** The usage-only chunk sent last with `stream_options.include_usage`. */
export function usageChunkJson(surface: GenerationSurface, ids: ResponseIds, usage: Usage): string {
  const object = surface === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  return JSON.stringify({ id: ids.id, object, created: ids.created, model: ids.model, choices: [], usage });
}

/** One choice of a whole (non-streamed) response. */
export interface WholeChoice {
  index: number;
  parts: ChatParts;
  finishReason: string | null;
  logprobs: unknown;
}

/** A whole response: chat messages (empty content is null when the output was parsed, as stock sends it) or completions texts. */
export function wholeResponse(
  surface: GenerationSurface,
  ids: ResponseIds,
  choices: readonly WholeChoice[],
  usage: Usage,
  parsed: boolean,
  reasoningField = 'reasoning_content',
): Record<string, unknown> {
  if (surface === 'completions') {
    const out = choices.map((c) => ({ index: c.index, text: c.parts.content, finish_reason: c.finishReason, logprobs: c.logprobs }));
    return { id: ids.id, object: 'text_completion', created: ids.created, model: ids.model, choices: out, usage };
  }
  const out = choices.map((c) => {
    const message: Record<string, unknown> = { role: 'assistant', content: parsed && c.parts.content === '' ? null : c.parts.content };
    if (c.parts.reasoning !== '') message[reasoningField] = c.parts.reasoning;
    if (c.parts.toolCalls.length > 0) message.tool_calls = c.parts.toolCalls.map(({ id, type, function: fn }) => ({ id, type, function: fn }));
    return { index: c.index, message, finish_reason: c.finishReason, logprobs: c.logprobs };
  });
  return { id: ids.id, object: 'chat.completion', created: ids.created, model: ids.model, choices: out, usage };
}
