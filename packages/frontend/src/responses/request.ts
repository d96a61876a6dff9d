import { REASONING_EFFORTS } from '@dynamo/llm/internal';
import { parseOrThrow } from '@dynamo/runtime';
import { z } from 'zod';

import { HttpError } from '../http/errors.js';
import { ResponseTools, ToolSchema } from './tools.js';

const text = z.string();
const inputText = z.looseObject({ type: z.literal('input_text'), text });
const inputImage = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().nullish(),
  file_id: z.string().nullish(),
  detail: z.string().nullish(),
});
const inputFile = z.looseObject({ type: z.literal('input_file') });
const inputPart = z.discriminatedUnion('type', [inputText, inputImage, inputFile], { error: 'must be an input_text, input_image or input_file part' });
const outputPart = z.union([z.looseObject({ type: z.literal('output_text'), text }), z.looseObject({ type: z.literal('refusal'), refusal: text })]);

const message = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'system', 'developer', 'assistant'], { error: 'must be user, system, developer or assistant' }),
  content: z.union([text, z.array(z.union([inputPart, outputPart]))]),
});
const functionCall = z.looseObject({ type: z.literal('function_call'), call_id: text, name: text, namespace: z.string().nullish(), arguments: text });
const toolOutput = z.union([text, z.array(inputPart)]);
const functionCallOutput = z.looseObject({ type: z.literal('function_call_output'), call_id: text, output: toolOutput });
const customToolCall = z.looseObject({ type: z.literal('custom_tool_call'), call_id: text, name: text, input: text });
const customToolCallOutput = z.looseObject({ type: z.literal('custom_tool_call_output'), call_id: text, output: toolOutput });
const reasoning = z.looseObject({
  type: z.literal('reasoning'),
  summary: z.array(z.looseObject({ text })).nullish(),
  content: z.array(z.looseObject({ text })).nullish(),
});
const itemReference = z.looseObject({ type: z.literal('item_reference'), id: text });

/** One `input` item of a Responses request. */
const InputItemSchema = z.union([functionCall, functionCallOutput, customToolCall, customToolCallOutput, reasoning, itemReference, message], {
  error:
    'must be a message ({role, content}), a function_call, a function_call_output, a custom_tool_call, a custom_tool_call_output, a reasoning item or an item_reference',
});
type InputItem = z.output<typeof InputItemSchema>;

const ToolChoiceSchema = z.union(
  [
    z.enum(['none', 'auto', 'required']),
    z.looseObject({ type: z.enum(['none', 'auto', 'required']) }),
    z.looseObject({ type: z.literal('function'), name: text }),
    z.looseObject({
      type: z.literal('allowed_tools'),
      mode: z.enum(['auto', 'required']),
      tools: z.array(z.looseObject({ type: z.literal('function'), name: text })).min(1),
    }),
  ],
  { error: 'must be "none", "auto", "required", {"type": "function", "name": ...} or {"type": "allowed_tools", ...}' },
);

const TextFormatSchema = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('text') }),
    z.looseObject({ type: z.literal('json_object') }),
    z.looseObject({
      type: z.literal('json_schema'),
      name: z.string().min(1, 'cannot be empty'),
      schema: z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }),
      description: z.string().nullish(),
      strict: z.boolean().nullish(),
    }),
  ],
  { error: 'must be {"type": "text" | "json_object" | "json_schema", ...}' },
);

/**
 * An OpenAI `/v1/responses` body as stock Dynamo 1.6.1 reads it: the fields it maps onto a chat
 * completion; others (`store`, `truncation`, `include`, ...) are accepted and echoed or ignored.
 */
export const ResponsesRequestSchema = z.looseObject({
  model: z.string().min(1, 'cannot be empty'),
  input: z.union([text, z.array(InputItemSchema)], { error: 'must be a string or an array of input items' }),
  instructions: z.string().nullish(),
  max_output_tokens: z.number().int().min(1, 'must be greater than 0').max(0xffff_ffff).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: ToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.looseObject({ format: TextFormatSchema.nullish(), verbosity: z.string().nullish() }).nullish(),
  reasoning: z.looseObject({ effort: z.enum(REASONING_EFFORTS).nullish(), summary: z.string().nullish() }).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  chat_template_args: z.record(z.string(), z.unknown()).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  nvext: z.record(z.string(), z.unknown()).nullish(),
});
export type ResponsesRequest = z.output<typeof ResponsesRequestSchema>;

/** Fields stock 1.6.1 answers 501 for: a stateless frontend cannot honour them. */
const NOT_IMPLEMENTED: Array<[string, (v: unknown) => boolean]> = [
  ['previous_response_id', (v) => v != null],
  ['background', (v) => v === true],
  ['prompt', (v) => v != null],
  ['max_tool_calls', (v) => v != null],
];

/** Checks a Responses body: 501 for what a stateless frontend cannot do, 400 naming a bad field. */
export function parseResponsesRequest(body: Record<string, unknown>): ResponsesRequest {
  for (const [field, refused] of NOT_IMPLEMENTED) {
    if (refused(body[field])) throw new HttpError(501, `Validation: \`${field}${field === 'background' ? ': true' : ''}\` is not supported.`, { param: field });
  }
  // `max_tokens` is stock's alias of `max_output_tokens`.
  const fields = body.max_output_tokens === undefined && body.max_tokens !== undefined ? { ...body, max_output_tokens: body.max_tokens } : body;
  return parseOrThrow(ResponsesRequestSchema, fields, 'request');
}

type ChatMessage = Record<string, unknown> & { role: string };

/** The request's tools as the model sees them, named with its history's function calls in mind. */
export function responseTools(r: ResponsesRequest): ResponseTools {
  const history =
    typeof r.input === 'string'
      ? []
      : r.input.flatMap((item) =>
          item.type === 'function_call'
            ? [{ namespace: item.namespace ?? undefined, name: item.name }]
            : item.type === 'custom_tool_call'
              ? [{ name: item.name }]
              : [],
        );
  return new ResponseTools(r.tools ?? [], history);
}

type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail: string } };

function chatParts(parts: Array<z.output<typeof inputPart> | z.output<typeof outputPart>>, where: string): string | ChatPart[] {
  const out: ChatPart[] = parts.map((part, i) => {
    if (part.type === 'input_text') return { type: 'text', text: part.text };
    if (part.type === 'input_image') {
      if (!part.image_url) throw new HttpError(400, `${where}.${i}: input_image needs an image_url (file_id is not supported)`, { param: `${where}.${i}` });
      return { type: 'image_url', image_url: { url: part.image_url, detail: part.detail ?? 'auto' } };
    }
    if (part.type === 'output_text') return { type: 'text', text: part.text };
    if (part.type === 'refusal') return { type: 'text', text: part.refusal };
    throw new HttpError(400, `${where}.${i}: input_file parts are not supported`, { param: `${where}.${i}` });
  });
  return out.length === 1 && out[0]!.type === 'text' ? out[0]!.text : out;
}

const joinedText = (parts: Array<{ text?: string; refusal?: string }>) => parts.map((p) => p.text ?? p.refusal ?? '').join('');

/**
 * The chat-completions body a Responses request becomes, as stock maps it: `instructions` and
 * leading system / developer messages as one system message; user messages as they are;
 * consecutive assistant-side items (text, `function_call`, reasoning) as one assistant message
 * with `tool_calls` (a `custom_tool_call` as a call with `{"input": ...}`); `function_call_output`
 * and `custom_tool_call_output` as `tool` messages; function and namespace tools as chat functions ({@link ResponseTools}), hosted tools left out; `text.format` as `response_format`;
 * `reasoning.effort` as `reasoning_effort`; `max_output_tokens` as `max_completion_tokens`.
 */
export function toChatRequest(r: ResponsesRequest, names: ResponseTools): Record<string, unknown> {
  const messages: ChatMessage[] = [];
  if (r.instructions != null) messages.push({ role: 'system', content: r.instructions });
  let pending: { text: string[]; calls: unknown[]; reasoning: string[] } | undefined;
  const flush = () => {
    if (!pending) return;
    // Stock sends null for a turn of only calls, which chat templates that read the content as a
    // string (Qwen3's, SmolLM2's) cannot render; "" says the same to every template.
    const content = pending.text.join('');
    messages.push({
      role: 'assistant',
      content,
      ...(pending.calls.length > 0 && { tool_calls: pending.calls }),
      ...(pending.reasoning.length > 0 && { reasoning_content: pending.reasoning.join('') }),
    });
    pending = undefined;
  };
  const assistant = () => (pending ??= { text: [], calls: [], reasoning: [] });
  const items: InputItem[] = typeof r.input === 'string' ? [{ role: 'user', content: r.input }] : r.input;
  items.forEach((item, i) => {
    const where = `request.input.${i}`;
    if (item.type === 'item_reference') return;
    if (item.type === 'function_call') {
      assistant().calls.push({
        id: item.call_id,
        type: 'function',
        function: { name: names.chatName({ namespace: item.namespace ?? undefined, name: item.name }), arguments: item.arguments },
      });
    } else if (item.type === 'reasoning') {
      const parts = item.content?.length ? item.content : (item.summary ?? []);
      assistant().reasoning.push(joinedText(parts));
    } else if (item.type === 'custom_tool_call') {
      assistant().calls.push({
        id: item.call_id,
        type: 'function',
        function: { name: names.chatName({ name: item.name }), arguments: JSON.stringify({ input: item.input }) },
      });
    } else if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      flush();
      const output = typeof item.output === 'string' ? item.output : chatParts(item.output, `${where}.output`);
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: output });
    } else if (item.role === 'assistant') {
      assistant().text.push(typeof item.content === 'string' ? item.content : joinedText(item.content as Array<{ text?: string; refusal?: string }>));
    } else {
      flush();
      if (item.role === 'user')
        messages.push({ role: 'user', content: typeof item.content === 'string' ? item.content : chatParts(item.content, `${where}.content`) });
      else messages.push({ role: 'system', content: typeof item.content === 'string' ? item.content : joinedText(item.content as Array<{ text?: string }>) });
    }
  });
  flush();
  // A run of system messages at the start becomes one, as stock joins them.
  let lead = 0;
  while (messages[lead]?.role === 'system') lead++;
  if (lead > 1)
    messages.splice(0, lead, {
      role: 'system',
      content: messages
        .slice(0, lead)
        .map((m) => m.content)
        .join('\n\n'),
    });

  const format = r.text?.format;
  const choice = r.tool_choice;
  let tools = names.chatTools;
  let toolChoice: unknown;
  if (choice != null) {
    if (typeof choice === 'string') toolChoice = choice;
    else if (choice.type === 'function') toolChoice = { type: 'function', function: { name: names.chatName({ name: (choice as { name: string }).name }) } };
    else if (choice.type === 'allowed_tools') {
      const allowed = new Set((choice as { tools: Array<{ name: string }> }).tools.map((t) => names.chatName({ name: t.name })));
      const unknown = [...allowed].find((name) => !tools.some((t) => t.function.name === name));
      if (unknown !== undefined)
        throw new HttpError(400, `request.tool_choice: allowed_tools references unknown function '${unknown}'`, { param: 'tool_choice' });
      tools = tools.filter((t) => allowed.has(t.function.name));
      toolChoice = (choice as { mode: string }).mode;
    } else toolChoice = choice.type;
  }
  return {
    model: r.model,
    messages,
    ...(r.temperature != null && { temperature: r.temperature }),
    ...(r.top_p != null && { top_p: r.top_p }),
    ...(r.max_output_tokens != null && { max_completion_tokens: r.max_output_tokens }),
    ...(tools.length > 0 && { tools }),
    ...(toolChoice !== undefined && { tool_choice: toolChoice }),
    ...(r.parallel_tool_calls != null && { parallel_tool_calls: r.parallel_tool_calls }),
    ...(format &&
      format.type !== 'text' && {
        response_format:
          format.type === 'json_object'
            ? { type: 'json_object' }
            : {
                type: 'json_schema',
                json_schema: {
                  name: format.name,
                  schema: format.schema,
                  ...(format.description != null && { description: format.description }),
                  ...(format.strict != null && { strict: format.strict }),
                },
              },
      }),
    ...(r.reasoning?.effort != null && { reasoning_effort: r.reasoning.effort }),
    ...(r.chat_template_args && { chat_template_args: r.chat_template_args }),
    ...(r.chat_template_kwargs && { chat_template_kwargs: r.chat_template_kwargs }),
    ...(r.nvext && { nvext: r.nvext }),
    ...(r.metadata && { metadata: r.metadata }),
    stream: true,
    stream_options: { include_usage: true },
  };
}
