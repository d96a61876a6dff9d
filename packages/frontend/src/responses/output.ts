import { randomUUID } from 'node:crypto';
import type { ChatParts, ToolCallDelta } from '@dynamo/llm/internal';

import type { Usage } from '../openai/shapes.js';
import type { SseWriter } from '../http/sse.js';
import type { ResponsesRequest } from './request.js';
import type { ResponseTools } from './tools.js';

/** What every Response object of one request echoes. */
export interface ResponseEcho {
  request: ResponsesRequest;
  /** The request's tools, to name the model's calls as the request named them. */
  tools: ResponseTools;
  id: string;
  createdAt: number;
  model: string;
}

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';
type Item = Record<string, unknown> & { type: string; status: Status };

const hex = () => randomUUID().replaceAll('-', '');

/** A new echo record: `resp_` plus 32 hex digits, as stock names responses. */
export function responseEcho(request: ResponsesRequest, tools: ResponseTools, model: string): ResponseEcho {
  return { request, tools, id: `resp_${hex()}`, createdAt: Math.floor(Date.now() / 1000), model };
}

/** Why a Response is incomplete, for a chat finish reason: `max_output_tokens` or `content_filter`. */
export function incompleteReason(finishReason: string | null): string | undefined {
  return finishReason === 'length' ? 'max_output_tokens' : finishReason === 'content_filter' ? 'content_filter' : undefined;
}

const messageItem = (id: string, text: string, status: Status): Item => ({
  type: 'message',
  content: [{ type: 'output_text', annotations: [], logprobs: [], text }],
  id,
  role: 'assistant',
  status,
});
/** The text of a custom tool's call: its `input` argument, or what the model wrote when it is not one. */
function customInput(args: string): string {
  try {
    const input = (JSON.parse(args) as { input?: unknown }).input;
    if (typeof input === 'string') return input;
  } catch {
    // Not JSON: the model wrote the input itself.
  }
  return args;
}

/**
 * A function call item (a call of a namespace's function names the namespace, as stock does), or
 * a `custom_tool_call` with its `input` for a custom tool.
 */
const callItem = (id: string, call: ToolCallDelta, tools: ResponseTools, status: Status, args = call.function.arguments): Item => {
  const { namespace, name } = tools.responseName(call.function.name);
  if (tools.isCustom(call.function.name)) return { type: 'custom_tool_call', call_id: call.id, name, input: customInput(args), id, status };
  return { type: 'function_call', arguments: args, call_id: call.id, name, ...(namespace !== undefined && { namespace }), id, status };
};
const callId = (call: ToolCallDelta, tools: ResponseTools) => `${tools.isCustom(call.function.name) ? 'ctc' : 'fc'}_${hex()}`;
const reasoningItem = (id: string, text: string, status: Status): Item => ({
  type: 'reasoning',
  id,
  summary: [],
  content: text === '' && status === 'in_progress' ? [] : [{ type: 'reasoning_text', text }],
  status,
});

/** A chat usage as a Response's: input / output tokens with their details. */
export function responseUsage(usage: Usage): Record<string, unknown> {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens,
  };
}

/** The Response object, its fields in the order stock streams them (the request's settings echoed). */
export function responseObject(
  echo: ResponseEcho,
  state: { status: Status; output: Item[]; usage?: Usage | undefined; incomplete?: string | undefined; error?: { code: string; message: string } | undefined },
): Record<string, unknown> {
  const r = echo.request;
  const format = r.text?.format;
  return {
    background: false,
    billing: null,
    conversation: null,
    created_at: echo.createdAt,
    completed_at: state.status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    error: state.error ?? null,
    id: echo.id,
    incomplete_details: state.incomplete ? { reason: state.incomplete } : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    max_tool_calls: null,
    metadata: r.metadata ?? {},
    model: echo.model,
    object: 'response',
    output: state.output,
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: null,
    prompt: null,
    prompt_cache_key: (r.prompt_cache_key as string | undefined) ?? null,
    prompt_cache_retention: (r.prompt_cache_retention as string | undefined) ?? null,
    reasoning: r.reasoning ?? null,
    safety_identifier: (r.safety_identifier as string | undefined) ?? null,
    service_tier: (r.service_tier as string | undefined) ?? 'auto',
    status: state.status,
    temperature: r.temperature ?? 1,
    text: { ...r.text, format: format ?? { type: 'text' } },
    tool_choice: r.tool_choice ?? 'auto',
    tools: (r.tools ?? []).map((t) => (t.type === 'function' ? { ...t, strict: t.strict ?? true } : t)),
    top_logprobs: 0,
    top_p: r.top_p ?? 1,
    truncation: (r.truncation as string | undefined) ?? 'disabled',
    usage: state.usage ? responseUsage(state.usage) : null,
    presence_penalty: 0,
    frequency_penalty: 0,
    store: r.store ?? false,
  };
}

/**
 * The whole (non-streamed) Response for a chat answer's parts, as stock builds it: the reasoning
 * (when `reasoning.summary` asks for it), then the function calls, then the text, or one empty
 * message when there is nothing; an answer cut off is `incomplete`, and so is its last item.
 */
export function wholeResponse(
  echo: ResponseEcho,
  parts: ChatParts,
  finishReason: string | null,
  usage: Usage,
  withReasoning: boolean,
): Record<string, unknown> {
  const incomplete = incompleteReason(finishReason);
  const output: Item[] = [];
  if (withReasoning && parts.reasoning !== '') output.push(reasoningItem(`rs_${hex()}`, parts.reasoning, 'completed'));
  for (const call of parts.toolCalls) output.push(callItem(callId(call, echo.tools), call, echo.tools, 'completed'));
  if (parts.content !== '' || output.length === 0) output.push(messageItem(`msg_${hex()}`, parts.content, 'completed'));
  if (incomplete) output[output.length - 1]!.status = 'incomplete';
  return responseObject(echo, { status: incomplete ? 'incomplete' : 'completed', output, usage, incomplete });
}

/** An item being streamed: where it is in the output, and what it has said. */
interface Open {
  index: number;
  id: string;
  text: string;
  call?: ToolCallDelta;
  done: boolean;
}

/**
 * A Response streamed as stock 1.6.1 streams it: `response.created` and `.in_progress`, then per
 * item `response.output_item.added`, its deltas (`response.output_text.delta`,
 * `response.reasoning_text.delta`, `response.function_call_arguments.delta` or
 * `response.custom_tool_call_input.delta`) and its `.done`
 * events, then `response.completed` (or `.incomplete`, `.failed`) and `data: [DONE]`. Every event
 * is `event: <type>` with its JSON, numbered by `sequence_number`.
 */
export class ResponseStream {
  readonly #sse: SseWriter;
  readonly #echo: ResponseEcho;
  readonly #withReasoning: boolean;
  #seq = 0;
  #next = 0;
  #message: Open | undefined;
  #reasoning: Open | undefined;
  readonly #calls: Open[] = [];
  readonly #items = new Map<number, Item>();
  #incomplete: string | undefined;

  constructor(sse: SseWriter, echo: ResponseEcho, withReasoning: boolean) {
    this.#sse = sse;
    this.#echo = echo;
    this.#withReasoning = withReasoning;
    const response = responseObject(echo, { status: 'in_progress', output: [] });
    this.#emit('response.created', { response });
    this.#emit('response.in_progress', { response });
  }

  /** Streams what a delta of the chat answer said. */
  push(parts: ChatParts): Promise<void> | undefined {
    let wait: Promise<void> | undefined;
    // Reasoning is an item only before the text starts, and only when asked for.
    if (this.#withReasoning && parts.reasoning !== '' && !this.#message) {
      const r = (this.#reasoning ??= this.#open(`rs_${hex()}`));
      if (r.text === '') {
        this.#emit('response.output_item.added', { output_index: r.index, item: reasoningItem(r.id, '', 'in_progress') });
        this.#emit('response.content_part.added', { item_id: r.id, output_index: r.index, content_index: 0, part: { type: 'reasoning_text', text: '' } });
      }
      r.text += parts.reasoning;
      wait = this.#emit('response.reasoning_text.delta', { item_id: r.id, output_index: r.index, content_index: 0, delta: parts.reasoning });
    }
    if (parts.content !== '') {
      this.#closeReasoning('completed');
      if (!this.#message) {
        const m = (this.#message = this.#open(`msg_${hex()}`));
        this.#emit('response.output_item.added', {
          output_index: m.index,
          item: { type: 'message', content: [], id: m.id, role: 'assistant', status: 'in_progress' },
        });
        this.#emit('response.content_part.added', {
          item_id: m.id,
          output_index: m.index,
          content_index: 0,
          part: { type: 'output_text', annotations: [], logprobs: [], text: '' },
        });
      }
      this.#message.text += parts.content;
      wait = this.#emit('response.output_text.delta', {
        item_id: this.#message.id,
        output_index: this.#message.index,
        content_index: 0,
        delta: parts.content,
        logprobs: [],
      });
    }
    for (const call of parts.toolCalls) {
      this.#closeReasoning('completed');
      const c = this.#open(callId(call, this.#echo.tools));
      c.call = call;
      c.text = call.function.arguments;
      this.#calls.push(c);
      this.#emit('response.output_item.added', { output_index: c.index, item: callItem(c.id, call, this.#echo.tools, 'in_progress', '') });
      wait = this.#echo.tools.isCustom(call.function.name)
        ? this.#emit('response.custom_tool_call_input.delta', { item_id: c.id, output_index: c.index, delta: customInput(call.function.arguments) })
        : this.#emit('response.function_call_arguments.delta', { item_id: c.id, output_index: c.index, delta: call.function.arguments });
    }
    return wait;
  }

  /** The chat answer finished with `finishReason`: its calls are complete. */
  finish(finishReason: string | null): void {
    this.#incomplete = incompleteReason(finishReason);
    if (finishReason === 'tool_calls') for (const c of this.#calls) this.#closeCall(c, 'completed');
  }

  /** Ends the stream: every open item closed, then `response.completed` (or `.incomplete`) with the usage. */
  end(usage: Usage): void {
    const last = this.#next - 1;
    const statusOf = (o: Open): Status => (this.#incomplete && o.index === last ? 'incomplete' : 'completed');
    if (this.#reasoning && !this.#reasoning.done) this.#closeReasoning(statusOf(this.#reasoning));
    if (this.#message && !this.#message.done) this.#closeMessage(statusOf(this.#message));
    for (const c of this.#calls) this.#closeCall(c, statusOf(c));
    const type = this.#incomplete ? 'response.incomplete' : 'response.completed';
    this.#emit(type, {
      response: responseObject(this.#echo, {
        status: this.#incomplete ? 'incomplete' : 'completed',
        output: this.#output(),
        usage,
        incomplete: this.#incomplete,
      }),
    });
    this.#sse.done();
  }

  /** Ends the stream after a failure: open items incomplete, then `response.failed` naming the error. */
  fail(message: string): void {
    if (this.#reasoning && !this.#reasoning.done) this.#closeReasoning('incomplete');
    if (this.#message && !this.#message.done) this.#closeMessage('incomplete');
    for (const c of this.#calls) this.#closeCall(c, 'incomplete');
    this.#emit('response.failed', {
      response: responseObject(this.#echo, { status: 'failed', output: this.#output(), error: { code: 'server_error', message } }),
    });
    this.#sse.done();
  }

  #open(id: string): Open {
    return { index: this.#next++, id, text: '', done: false };
  }

  #output(): Item[] {
    return [...this.#items.entries()].sort(([a], [b]) => a - b).map(([, item]) => item);
  }

  #closeReasoning(status: Status): void {
    const r = this.#reasoning;
    if (!r || r.done) return;
    r.done = true;
    this.#emit('response.reasoning_text.done', { item_id: r.id, output_index: r.index, content_index: 0, text: r.text });
    this.#emit('response.content_part.done', { item_id: r.id, output_index: r.index, content_index: 0, part: { type: 'reasoning_text', text: r.text } });
    this.#done(r, reasoningItem(r.id, r.text, status));
  }

  #closeMessage(status: Status): void {
    const m = this.#message!;
    m.done = true;
    const part = { type: 'output_text', annotations: [], logprobs: [], text: m.text };
    this.#emit('response.output_text.done', { item_id: m.id, output_index: m.index, content_index: 0, text: m.text, logprobs: [] });
    this.#emit('response.content_part.done', { item_id: m.id, output_index: m.index, content_index: 0, part });
    this.#done(m, messageItem(m.id, m.text, status));
  }

  #closeCall(c: Open, status: Status): void {
    if (c.done) return;
    c.done = true;
    const item = callItem(c.id, c.call!, this.#echo.tools, status);
    if (item.type === 'custom_tool_call') this.#emit('response.custom_tool_call_input.done', { item_id: c.id, output_index: c.index, input: item.input });
    else this.#emit('response.function_call_arguments.done', { name: item.name, item_id: c.id, output_index: c.index, arguments: c.text });
    this.#done(c, item);
  }

  #done(o: Open, item: Item): void {
    this.#items.set(o.index, item);
    this.#emit('response.output_item.done', { output_index: o.index, item });
  }

  #emit(type: string, fields: Record<string, unknown>): Promise<void> | undefined {
    return this.#sse.event(type, JSON.stringify({ type, sequence_number: this.#seq++, ...fields }));
  }
}
