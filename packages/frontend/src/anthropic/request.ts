import { parseOrThrow } from '@dynamo/runtime';
import { z } from 'zod';

import { HttpError } from '../http/errors.js';

const textBlock = z.looseObject({ type: z.literal('text'), text: z.string() });
const imageBlock = z.looseObject({
  type: z.literal('image'),
  source: z.looseObject({ type: z.string(), media_type: z.string().optional(), data: z.string().optional(), url: z.string().optional() }),
});
const toolUseBlock = z.looseObject({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.unknown() });
const toolResultBlock = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string(),
  content: z.union([z.string(), z.array(z.union([textBlock, imageBlock]))]).optional(),
  is_error: z.boolean().optional(),
});
const thinkingBlock = z.looseObject({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional() });
const redactedThinkingBlock = z.looseObject({ type: z.literal('redacted_thinking') });
const Block = z.discriminatedUnion('type', [textBlock, imageBlock, toolUseBlock, toolResultBlock, thinkingBlock, redactedThinkingBlock], {
  error: 'must be a text, image, tool_use, tool_result, thinking or redacted_thinking block',
});
type Block = z.output<typeof Block>;

const MessageSchema = z.looseObject({
  // Claude Code sends `system` turns mid-conversation (its agent and skill lists); stock renders them in place.
  role: z.enum(['user', 'assistant', 'system'], { error: 'must be user, assistant or system' }),
  content: z.union([z.string(), z.array(Block).min(1, 'must contain at least one content block')]),
});

const system = z.union([z.string(), z.array(z.looseObject({ text: z.string() }))]);

const ToolSchema = z.looseObject({
  name: z.string().min(1, 'cannot be empty'),
  type: z.literal('custom', { error: 'only client tools (with an input_schema) are supported' }).optional(),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown(), { error: 'field required for client tools' }),
});

const ToolChoiceSchema = z.looseObject({
  type: z.enum(['auto', 'any', 'none', 'tool'], { error: 'must be auto, any, none or tool' }),
  name: z.string().optional(),
  disable_parallel_tool_use: z.boolean().optional(),
});

/** An Anthropic Messages request (`/v1/messages`), the fields stock Dynamo 1.6.1 maps onto chat. */
export const MessagesRequestSchema = z.looseObject({
  model: z.string(),
  max_tokens: z.number().int().min(1, 'must be greater than 0').max(0xffff_ffff),
  messages: z.array(MessageSchema).min(1, 'field required'),
  system: system.optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  thinking: z.looseObject({ type: z.string(), budget_tokens: z.number().int().optional() }).optional(),
  metadata: z.unknown().optional(),
});
export type MessagesRequest = z.output<typeof MessagesRequestSchema>;

/** A `count_tokens` request: the parts of a Messages request that make the prompt. */
export const CountTokensRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(MessageSchema).min(1, 'field required'),
  system: system.optional(),
  tools: z.array(ToolSchema).optional(),
});

/** Checks a Messages body; a 400 names the bad field. */
export function parseMessagesRequest(body: Record<string, unknown>): MessagesRequest {
  return parseOrThrow(MessagesRequestSchema, body, 'request');
}

type ChatMessage = Record<string, unknown> & { role: string };

function imageUrl(block: z.output<typeof imageBlock>, where: string): string {
  const { source } = block;
  if (source.type === 'base64' && source.media_type && source.data) return `data:${source.media_type};base64,${source.data}`;
  if (source.type === 'url' && source.url) return source.url;
  throw new HttpError(400, `${where}.source: must be {"type": "base64", "media_type", "data"} or {"type": "url", "url"}`, { param: `${where}.source` });
}

/** A user turn's text and image blocks as chat content: one string, or parts when there are images. */
function userContent(blocks: Array<z.output<typeof textBlock> | z.output<typeof imageBlock>>, where: string): string | unknown[] {
  if (blocks.every((b) => b.type === 'text')) return blocks.map((b) => (b as { text: string }).text).join('');
  return blocks.map((b, i) => (b.type === 'text' ? { type: 'text', text: b.text } : { type: 'image_url', image_url: { url: imageUrl(b, `${where}.${i}`) } }));
}

/** The first line of Claude Code's system prompt: it names the client version per session. */
const BILLING_HEADER = 'x-anthropic-billing-header:';

/** How a Messages request's prompt is made. */
export interface PromptOptions {
  /**
   * Drop Claude Code's billing-header line from the start of the system prompt, as stock does by
   * default (`--strip-anthropic-preamble`): it changes per session, and at the very start of the
   * prompt it would keep any two sessions from sharing a cached prefix.
   */
  stripPreamble: boolean;
}

/**
 * The system prompt as text (blocks joined with a newline), less the billing-header line when
 * `stripPreamble` and a newline follows it (stock's rule: leading whitespace goes with it).
 */
export function systemText(s: z.output<typeof system> | undefined, options: PromptOptions): string | undefined {
  if (s === undefined) return undefined;
  const text = typeof s === 'string' ? s : s.map((b) => b.text).join('\n');
  const trimmed = text.trimStart();
  const newline = trimmed.indexOf('\n');
  return options.stripPreamble && trimmed.startsWith(BILLING_HEADER) && newline >= 0 ? trimmed.slice(newline + 1) : text;
}

/** The text blocks of a `system` turn, joined with a newline as stock joins them; other blocks are dropped. */
const systemTurnText = (blocks: Block[]) => blocks.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');

/** The chat messages of an Anthropic conversation, as stock maps them. */
export function chatMessages(
  request: { system?: z.output<typeof system> | undefined; messages: MessagesRequest['messages'] },
  options: PromptOptions,
): ChatMessage[] {
  const out: ChatMessage[] = [];
  const sys = systemText(request.system, options);
  if (sys !== undefined) out.push({ role: 'system', content: sys });
  request.messages.forEach((message, m) => {
    const where = `request.messages.${m}.content`;
    if (typeof message.content === 'string') {
      out.push({ role: message.role, content: message.content });
      return;
    }
    const blocks: Block[] = message.content;
    if (message.role === 'system') {
      out.push({ role: 'system', content: systemTurnText(blocks) });
      return;
    }
    if (message.role === 'assistant') {
      const text = blocks
        .filter((b) => b.type === 'text')
        .map((b) => (b as { text: string }).text)
        .join('');
      const calls = blocks
        .filter((b) => b.type === 'tool_use')
        .map((b) => ({
          id: (b as { id: string }).id,
          type: 'function',
          function: { name: (b as { name: string }).name, arguments: JSON.stringify((b as { input: unknown }).input ?? {}) },
        }));
      const thinking = blocks
        .filter((b) => b.type === 'thinking')
        .map((b) => (b as { thinking: string }).thinking)
        .join('\n');
      out.push({ role: 'assistant', content: text, ...(calls.length > 0 && { tool_calls: calls }), ...(thinking !== '' && { reasoning_content: thinking }) });
      return;
    }
    // A user turn: its tool results become tool messages, its text and images a user message.
    let pending: Array<z.output<typeof textBlock> | z.output<typeof imageBlock>> = [];
    const flush = () => {
      if (pending.length > 0) out.push({ role: 'user', content: userContent(pending, where) });
      pending = [];
    };
    blocks.forEach((block, b) => {
      if (block.type === 'text' || block.type === 'image') pending.push(block);
      else if (block.type === 'tool_result') {
        flush();
        const content =
          block.content === undefined ? '' : typeof block.content === 'string' ? block.content : userContent(block.content, `${where}.${b}.content`);
        out.push({ role: 'tool', tool_call_id: block.tool_use_id, content });
      }
    });
    flush();
  });
  return out;
}

/**
 * The chat-completions body a Messages request becomes, as stock maps it: the system prompt and
 * turns as chat messages (`system` turns in place) (tool results as tool messages, images as `image_url` parts),
 * `max_tokens` as `max_completion_tokens`, `stop_sequences` as `stop`, tools in chat's shape,
 * `tool_choice` `any` as `required` and `tool` as a named function, `disable_parallel_tool_use` as
 * `parallel_tool_calls: false`, `thinking.type: "enabled"` as `enable_thinking`.
 */
export function toChatRequest(r: MessagesRequest, options: PromptOptions): Record<string, unknown> {
  const choice = r.tool_choice;
  let toolChoice: unknown;
  if (choice) {
    if (choice.name !== undefined) toolChoice = { type: 'function', function: { name: choice.name } };
    else toolChoice = choice.type === 'any' || choice.type === 'tool' ? 'required' : choice.type;
  }
  const tools = r.tools && r.tools.length > 0 ? r.tools : undefined;
  return {
    model: r.model,
    messages: chatMessages(r, options),
    max_completion_tokens: r.max_tokens,
    ...(r.temperature !== undefined && { temperature: r.temperature }),
    ...(r.top_p !== undefined && { top_p: r.top_p }),
    ...(r.top_k !== undefined && { top_k: r.top_k }),
    ...(r.stop_sequences && r.stop_sequences.length > 0 && { stop: r.stop_sequences }),
    ...(tools && {
      tools: tools.map((t) => ({
        type: 'function',
        function: { name: t.name, ...(t.description !== undefined && { description: t.description }), parameters: t.input_schema },
      })),
    }),
    ...(toolChoice !== undefined && { tool_choice: toolChoice }),
    ...(choice?.disable_parallel_tool_use !== undefined && { parallel_tool_calls: !choice.disable_parallel_tool_use }),
    ...(r.thinking?.type === 'enabled' && { chat_template_args: { enable_thinking: true } }),
    stream: true,
    stream_options: { include_usage: true },
  };
}
