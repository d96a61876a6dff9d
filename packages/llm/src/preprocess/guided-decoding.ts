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
export const ToolChoiceSchema = z.union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) })], {
  error: 'must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
});

type GuidedRequest = { [K in keyof typeof guidedFields]?: z.output<(typeof guidedFields)[K]> };
type Tool = { function: { name: string; [key: string]: unknown } };
type ToolRequest = { tools?: Tool[] | null | undefined; tool_choice?: z.output<typeof ToolChoiceSchema> | undefined };

/**
 * `sampling_options.guided_decoding` as stock Dynamo fills it: the one constraint (`json`,
 * `regex`, `choice` or `grammar`) from `response_format`, the `guided_*` fields or a forced
 * tool choice, with `backend` and `whitespace_pattern` when given; null when there is none.
 * Throws `InvalidArgument` when more than one constraint is set or the chosen tool is missing.
 */
export function guidedDecoding(request: GuidedRequest, tools: ToolRequest = {}): Record<string, unknown> | null {
  const constraints: Array<[string, unknown]> = [];
  const format = request.response_format;
  if (format?.type === 'json_object') constraints.push(['json', { type: 'object' }]);
  if (format?.type === 'json_schema' && format.json_schema.schema != null) constraints.push(['json', format.json_schema.schema]);
  if (request.guided_json != null) constraints.push(['json', request.guided_json]);
  if (request.guided_regex != null) constraints.push(['regex', request.guided_regex]);
  if (request.guided_choice != null) constraints.push(['choice', request.guided_choice]);
  if (request.guided_grammar != null) constraints.push(['grammar', request.guided_grammar]);
  const forced = toolChoiceSchema(tools);
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

/** The JSON schema a forced tool choice constrains the output to: any tool (`required`) or one. */
function toolChoiceSchema({ tools, tool_choice: choice }: ToolRequest): unknown {
  if (!tools?.length || choice === undefined || choice === 'none' || choice === 'auto') return undefined;
  if (choice === 'required') {
    const anyOf = tools.map((t) => ({ properties: { name: { type: 'string', enum: [t.function.name] }, parameters: t.function.parameters ?? {} }, required: ['name', 'parameters'] }));
    return { type: 'array', minItems: 1, items: { type: 'object', anyOf } };
  }
  const tool = tools.find((t) => t.function.name === choice.function.name);
  if (!tool) throw new InvalidArgument(`request.tool_choice.function.name: no tool named ${JSON.stringify(choice.function.name)} in request.tools`);
  return tool.function.parameters ?? {};
}
