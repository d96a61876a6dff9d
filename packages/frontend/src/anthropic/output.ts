import { randomUUID } from 'node:crypto';
import type { ChatParts, ToolCallDelta } from '@dynamo/llm/internal';

import type { Usage } from '../openai/shapes.js';
import type { SseWriter } from '../http/sse.js';

const hex = () => randomUUID().replaceAll('-', '');

/** Anthropic's error `type` for an HTTP status. */
export function anthropicErrorType(status: number, overloadStatus: number): string {
  if (status === overloadStatus || status === 503 || status === 529) return 'overloaded_error';
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    403: 'permission_error',
    404: 'not_found_error',
    409: 'conflict_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    504: 'timeout_error',
  };
  return types[status] ?? (status >= 400 && status < 500 && status !== 499 ? 'invalid_request_error' : 'api_error');
}

/** Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`. */
export function anthropicErrorBody(status: number, message: string, overloadStatus: number): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: anthropicErrorType(status, overloadStatus), message } };
}

/** How a chat answer ended, in Anthropic's words: `end_turn`, `max_tokens`, `stop_sequence` (and which), `tool_use`, `refusal`. */
export function stopReason(
  finishReason: string | null,
  stopString: string | undefined,
  madeCalls: boolean,
): { stop_reason: string | null; stop_sequence: string | null } {
  if (finishReason === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (finishReason === 'content_filter') return { stop_reason: 'refusal', stop_sequence: null };
  if (finishReason === 'tool_calls' && madeCalls) return { stop_reason: 'tool_use', stop_sequence: null };
  if (finishReason === null) return { stop_reason: null, stop_sequence: null };
  return stopString !== undefined ? { stop_reason: 'stop_sequence', stop_sequence: stopString } : { stop_reason: 'end_turn', stop_sequence: null };
}

/** Anthropic usage: input tokens not read from the cache, output tokens, cache reads. */
export function anthropicUsage(usage: Usage): Record<string, number> {
  const cached = Math.min(usage.prompt_tokens_details?.cached_tokens ?? 0, usage.prompt_tokens);
  return {
    input_tokens: usage.prompt_tokens - cached,
    output_tokens: usage.completion_tokens,
    cache_creation_input_tokens: 0,
    ...(cached > 0 && { cache_read_input_tokens: cached }),
  };
}

/** A tool call's arguments as the object Anthropic's `input` holds ({} when they are not an object). */
function inputOf(call: ToolCallDelta): Record<string, unknown> {
  try {
    const parsed = JSON.parse(call.function.arguments || '{}') as unknown;
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const toolUse = (call: ToolCallDelta) => ({ type: 'tool_use', id: `toolu_${hex()}`, name: call.function.name, input: inputOf(call) });

/** A new message id: `msg_` plus 32 hex digits. */
export const messageId = () => `msg_${hex()}`;

/**
 * The whole (non-streamed) Message for a chat answer's parts, as stock builds it: thinking, then
 * tool_use blocks, then the text (one empty text block when there is nothing).
 */
export function wholeMessage(id: string, model: string, parts: ChatParts, stop: ReturnType<typeof stopReason>, usage: Usage): Record<string, unknown> {
  const content: unknown[] = [];
  if (parts.reasoning !== '') content.push({ type: 'thinking', thinking: parts.reasoning, signature: '' });
  for (const call of parts.toolCalls) content.push(toolUse(call));
  if (parts.content !== '' || content.length === 0) content.push({ type: 'text', text: parts.content });
  return { id, type: 'message', role: 'assistant', content, model, ...stop, usage: anthropicUsage(usage) };
}

/**
 * A Message streamed as Anthropic's API streams it: `message_start`, then per content block
 * `content_block_start`, its deltas (`thinking_delta`, `text_delta`, `input_json_delta`) and
 * `content_block_stop`, then `message_delta` (the stop reason and usage) and `message_stop`.
 * Tool calls come as whole `tool_use` blocks, each when the parser has read it.
 */
export class MessageStream {
  readonly #sse: SseWriter;
  #index = -1;
  #open: 'thinking' | 'text' | undefined;

  constructor(sse: SseWriter, id: string, model: string, promptTokens: number) {
    this.#sse = sse;
    const message = {
      id,
      type: 'message',
      role: 'assistant',
      content: [],
      model,
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: promptTokens, output_tokens: 0, cache_creation_input_tokens: 0 },
    };
    this.#emit('message_start', { message });
  }

  /** Streams what a delta of the chat answer said. */
  push(parts: ChatParts): Promise<void> | undefined {
    let wait: Promise<void> | undefined;
    if (parts.reasoning !== '') {
      if (this.#open !== 'thinking') this.#start('thinking', { type: 'thinking', thinking: '', signature: '' });
      wait = this.#emit('content_block_delta', { index: this.#index, delta: { type: 'thinking_delta', thinking: parts.reasoning } });
    }
    if (parts.content !== '') {
      if (this.#open !== 'text') this.#start('text', { type: 'text', text: '' });
      wait = this.#emit('content_block_delta', { index: this.#index, delta: { type: 'text_delta', text: parts.content } });
    }
    for (const call of parts.toolCalls) {
      this.#close();
      this.#index += 1;
      this.#emit('content_block_start', { index: this.#index, content_block: { ...toolUse(call), input: {} } });
      this.#emit('content_block_delta', { index: this.#index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(inputOf(call)) } });
      wait = this.#emit('content_block_stop', { index: this.#index });
    }
    return wait;
  }

  /** Ends the message: its stop reason and usage, then `message_stop`. */
  end(stop: ReturnType<typeof stopReason>, usage: Usage): void {
    this.#close();
    const delta = stop.stop_sequence === null ? { stop_reason: stop.stop_reason } : stop;
    this.#emit('message_delta', { delta, usage: anthropicUsage(usage) });
    this.#emit('message_stop', {});
    this.#sse.done(false);
  }

  /** Ends the stream after a failure with Anthropic's `error` event. */
  fail(status: number, message: string, overloadStatus: number): void {
    this.#sse.event('error', JSON.stringify(anthropicErrorBody(status, message, overloadStatus)));
    this.#sse.done(false);
  }

  #start(kind: 'thinking' | 'text', block: Record<string, unknown>): void {
    this.#close();
    this.#index += 1;
    this.#open = kind;
    this.#emit('content_block_start', { index: this.#index, content_block: block });
  }

  #close(): void {
    if (this.#open === undefined) return;
    if (this.#open === 'thinking') this.#emit('content_block_delta', { index: this.#index, delta: { type: 'signature_delta', signature: '' } });
    this.#emit('content_block_stop', { index: this.#index });
    this.#open = undefined;
  }

  #emit(type: string, fields: Record<string, unknown>): Promise<void> | undefined {
    return this.#sse.event(type, JSON.stringify({ type, ...fields }));
  }
}
