import { InvalidArgument } from '@dynamo/runtime';
import { z } from 'zod';

const jsonObject = z.record(z.string(), z.unknown(), { error: 'must be a JSON object' });

/** OpenAI `response_format`: plain text, any JSON object, or JSON matching a named schema. */
export const ResponseFormatSchema = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('text') }),
    z.looseObject({ type: z.literal('json_object') }),
    z.looseObject({
      type: z.literal('json_schema'),
      json_schema: z.looseObject({
        name: z.string(),
        description: z.string().nullish(),
        schema: jsonObject.nullish(),
        strict: z.boolean().nullish(),
      }),
    }),
  ],
  { error: 'must be {"type": "text" | "json_object" | "json_schema", ...}' },
);

/** The vLLM-style guided-decoding fields stock Dynamo accepts, and the `response_format` one. */
export const guidedFields = {
  response_format: ResponseFormatSchema.nullish(),
  guided_json: jsonObject.nullish(),
  guided_regex: z.string().nullish(),
  guided_choice: z.array(z.string()).nullish(),
  guided_grammar: z.string().nullish(),
  guided_decoding_backend: z.string().nullish(),
  guided_whitespace_pattern: z.string().nullish(),
};

/** OpenAI `tool_choice`. */
export const ToolChoiceSchema = z.union(
  [z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) })],
  {
    error: 'must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
  },
);

type GuidedRequest = { [K in keyof typeof guidedFields]?: z.output<(typeof guidedFields)[K]> };
type Tool = { function: { name: string; [key: string]: unknown } };
type ToolRequest = { tools?: Tool[] | null | undefined; tool_choice?: z.output<typeof ToolChoiceSchema> | undefined; parallel_tool_calls?: unknown };

/** The card's structural-tag policy (`runtime_config.structural_tag_*`) and its tool-call parser. */
export interface StructuralTagPolicy {
  toolCallParser?: string | null | undefined;
  mode?: string | undefined;
  scope?: string | undefined;
  schema?: unknown;
}

/** How each tool call of a parser's format is written: the text around its arguments. */
const TAG_FORMATS: Record<string, { trigger: string; begin: (name: string) => string; end: string; style: string }> = {
  hermes: { trigger: '<tool_call>', begin: (name) => `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": `, end: '}\n</tool_call>', style: 'json' },
  qwen3_coder: {
    trigger: '<tool_call>\n<function=',
    begin: (name) => `<tool_call>\n<function=${name}>\n`,
    end: '\n</function>\n</tool_call>',
    style: 'qwen_xml',
  },
};

/**
 * `sampling_options.guided_decoding` as stock Dynamo fills it: the one constraint (`json`,
 * `regex`, `choice` or `grammar`) from `response_format`, the `guided_*` fields or a forced
 * tool choice, with `backend` and `whitespace_pattern` when given; null when there is none.
 * Throws `InvalidArgument` when more than one constraint is set or the chosen tool is missing.
 */
export function guidedDecoding(request: GuidedRequest, tools: ToolRequest = {}, policy: StructuralTagPolicy = {}): Record<string, unknown> | null {
  const constraints: Array<[string, unknown]> = [];
  const format = request.response_format;
  if (format?.type === 'json_object') constraints.push(['json', { type: 'object' }]);
  if (format?.type === 'json_schema' && format.json_schema.schema != null) constraints.push(['json', format.json_schema.schema]);
  if (request.guided_json != null) constraints.push(['json', request.guided_json]);
  if (request.guided_regex != null) constraints.push(['regex', request.guided_regex]);
  if (request.guided_choice != null) constraints.push(['choice', request.guided_choice]);
  if (request.guided_grammar != null) constraints.push(['grammar', request.guided_grammar]);
  const tag = structuralTag(tools, policy);
  const forced = tag ? undefined : toolChoiceSchema(tools);
  if (tag) constraints.push(['structural_tag', tag]);
  if (forced) constraints.push(['json', forced]);
  if (constraints.length > 1) throw new InvalidArgument(`Only one guided-decoding constraint can be set; received: ${constraints.map(([k]) => k).join(', ')}`);
  if (constraints.length === 0) return null;
  const [[kind, value]] = constraints as [[string, unknown]];
  return {
    [kind]: value,
    ...(request.guided_decoding_backend != null && { backend: request.guided_decoding_backend }),
    ...(request.guided_whitespace_pattern != null && { whitespace_pattern: request.guided_whitespace_pattern }),
  };
}

/**
 * The JSON schema a forced tool choice constrains the output to: any tool (`required`; one call
 * only with `parallel_tool_calls: false`) or the named one.
 */
function toolChoiceSchema({ tools, tool_choice: choice, parallel_tool_calls: parallel }: ToolRequest): unknown {
  if (!tools?.length || choice === undefined || choice === 'none' || choice === 'auto') return undefined;
  if (choice === 'required') {
    const anyOf = tools.map((t) => ({
      properties: { name: { type: 'string', enum: [t.function.name] }, parameters: t.function.parameters ?? {} },
      required: ['name', 'parameters'],
    }));
    return { type: 'array', minItems: 1, items: { type: 'object', anyOf }, ...(parallel === false && { maxItems: 1 }) };
  }
  const tool = tools.find((t) => t.function.name === choice.function.name);
  if (!tool) throw new InvalidArgument(`request.tool_choice.function.name: no tool named ${JSON.stringify(choice.function.name)} in request.tools`);
  return tool.function.parameters ?? {};
}

const strictOf = (tool: Tool): unknown => tool.function.strict;

/**
 * The xgrammar structural tag stock Dynamo asks for when the card turns structural tags on and
 * the parser's format has one (hermes, qwen3_coder): one tag per allowed tool, its arguments held
 * to the tool's schema (any JSON for a tool with `strict: false` unless the schema policy is
 * `strict`). Used for a forced tool choice, and for `auto` with scope `always`, a tool marked
 * `strict: true`, or `parallel_tool_calls: false`. Undefined otherwise.
 */
function structuralTag({ tools, tool_choice: choice, parallel_tool_calls: parallel }: ToolRequest, policy: StructuralTagPolicy): unknown {
  if (policy.mode !== 'on' || !tools?.length || choice === 'none') return undefined;
  for (const tool of tools) if (strictOf(tool) === true) checkStrictSchema(tool.function.name, tool.function.parameters);
  const format = TAG_FORMATS[policy.toolCallParser ?? ''];
  if (!format) return undefined;
  const kind = choice === undefined ? 'auto' : typeof choice === 'string' ? choice : 'named';
  const explicitStrict = tools.some((t) => strictOf(t) === true);
  if (kind === 'auto' && !(policy.scope === 'always' || explicitStrict || parallel === false)) return undefined;
  const allowed = kind === 'named' ? tools.filter((t) => t.function.name === (choice as { function: { name: string } }).function.name) : tools;
  if (allowed.length === 0)
    throw new InvalidArgument(
      `request.tool_choice.function.name: no tool named ${JSON.stringify((choice as { function: { name: string } }).function.name)} in request.tools`,
    );
  const enforced = (tool: Tool) => policy.schema === 'strict' || strictOf(tool) !== false;
  const tags = allowed.map((tool) => ({
    type: 'tag',
    begin: format.begin(tool.function.name),
    content: {
      type: 'json_schema',
      json_schema: enforced(tool) ? (tool.function.parameters ?? { type: 'object', properties: {} }) : true,
      style: format.style,
    },
    end: format.end,
  }));
  const forcedCall = kind === 'required' || kind === 'named';
  return {
    type: 'structural_tag',
    format: { type: 'triggered_tags', triggers: [format.trigger], tags, at_least_one: forcedCall, stop_after_first: !forcedCall && parallel === false },
  };
}

/**
 * OpenAI's rules for `strict: true` tools, with stock's messages: every object schema closes
 * itself with `additionalProperties: false` and lists all its properties as `required`.
 */
function checkStrictSchema(name: string, schema: unknown, context = '#'): void {
  if (typeof schema !== 'object' || schema === null) return;
  const node = schema as { type?: unknown; properties?: Record<string, unknown>; additionalProperties?: unknown; items?: unknown; required?: unknown };
  const fail = (where: string, message: string): never => {
    throw new InvalidArgument(`Validation: Invalid schema for function '${name}': In context=${where}, ${message}`);
  };
  if (node.type === 'object' || node.properties !== undefined) {
    if (node.additionalProperties !== false) fail(context, 'object schemas require additionalProperties: false');
    const required = Array.isArray(node.required) ? node.required : [];
    for (const key of Object.keys(node.properties ?? {})) if (!required.includes(key)) fail(`${context}/required`, `must include property '${key}'`);
  }
  for (const [key, value] of Object.entries(node.properties ?? {})) checkStrictSchema(name, value, `${context}/properties/${key}`);
  if (node.items !== undefined) checkStrictSchema(name, node.items, `${context}/items`);
}
