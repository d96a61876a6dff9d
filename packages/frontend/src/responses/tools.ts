import { z } from 'zod';

const text = z.string();

/** A function tool in the Responses shape (flat: `{type, name, description, parameters, strict}`). */
const FunctionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: text,
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
type FunctionTool = z.output<typeof FunctionToolSchema>;

/** A group of function tools under one name (Codex's `multi_agent_v1`). */
const NamespaceToolSchema = z.looseObject({
  type: z.literal('namespace'),
  name: text.min(1, 'cannot be empty'),
  description: z.string().nullish(),
  tools: z.array(FunctionToolSchema, { error: 'must be an array of function tools' }),
});

/**
 * A freeform tool: its input is text, not JSON arguments (Codex's `apply_patch` for the models it
 * knows take it, with a Lark grammar as its format).
 */
const CustomToolSchema = z.looseObject({
  type: z.literal('custom'),
  name: text,
  description: z.string().nullish(),
  format: z.looseObject({ type: z.string(), syntax: z.string().nullish(), definition: z.string().nullish() }).nullish(),
});
type CustomTool = z.output<typeof CustomToolSchema>;

/**
 * Tools the model cannot call through a chat template: OpenAI runs them (web and file search,
 * code interpreter, image generation, MCP, computer use), or their calls are item types of their
 * own (`local_shell`, `shell`, `apply_patch`). They are left out of the prompt, not refused, so an
 * agent that always offers one (Codex offers `web_search`) still works.
 */
export const HOSTED_TOOL_TYPES = [
  'web_search',
  'web_search_2025_08_26',
  'web_search_preview',
  'web_search_preview_2025_03_11',
  'file_search',
  'code_interpreter',
  'computer',
  'computer_use_preview',
  'image_generation',
  'mcp',
  'local_shell',
  'shell',
  'apply_patch',
  'tool_search',
  'programmatic_tool_calling',
] as const;
const HostedToolSchema = z.looseObject({ type: z.enum(HOSTED_TOOL_TYPES) });

/** One entry of a Responses request's `tools`. */
export const ToolSchema = z.discriminatedUnion('type', [FunctionToolSchema, NamespaceToolSchema, CustomToolSchema, HostedToolSchema], {
  error: `must be a function, namespace or custom tool, or one of the hosted tools (${HOSTED_TOOL_TYPES.join(', ')}), which are left out`,
});
type Tool = z.output<typeof ToolSchema>;

/** A function call's name as the Responses API names it: its namespace, if any, and its own name. */
export interface ToolName {
  namespace?: string | undefined;
  name: string;
}

/** A chat tool: `{type: "function", function: {name, description, parameters, strict}}`. */
type ChatTool = { type: 'function'; function: Record<string, unknown> & { name: string } };

/**
 * A freeform tool as a chat function: one string argument, `input`, holding the text; its format
 * (a grammar) goes into the description, which is all a chat model reads of it.
 */
function customFunction(tool: CustomTool): FunctionTool {
  const format =
    tool.format?.type === 'grammar' && tool.format.definition
      ? `\n\nThe input follows this ${tool.format.syntax ?? ''} grammar:\n${tool.format.definition}`
      : '';
  const description = `${tool.description ?? ''}${format}`;
  return {
    type: 'function',
    name: tool.name,
    ...(description !== '' && { description }),
    parameters: {
      type: 'object',
      properties: { input: { type: 'string', description: "The tool's input, as free text" } },
      required: ['input'],
      additionalProperties: false,
    },
  };
}

const key = (n: ToolName) => `${n.namespace ?? ''}\u0000${n.name}`;
/** Chat tool names may hold only these (stock's rule); an alias is cut to 48 of them. */
const alias = (n: ToolName) => `${n.namespace ?? 'function'}__${n.name}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 48);

/**
 * The tools of a Responses request as a chat model sees them, as stock 1.6.1 maps them: function
 * tools as they are, a namespace's function tools flattened into top-level functions. A function
 * keeps its own name unless another function of the request or of its history (`function_call`
 * items) has it too; then it is `<namespace>__<name>` (`function__<name>` outside a namespace),
 * with `_2`, `_3`, ... until unique. A custom (freeform) tool is a function of one string
 * argument, `input`, and its calls go back as `custom_tool_call` items, as the client expects them.
 * Hosted tools are dropped ({@link HOSTED_TOOL_TYPES}).
 */
export class ResponseTools {
  /** The chat tools, in the request's order. */
  readonly chatTools: ChatTool[] = [];
  /** The hosted tool types left out, each once, in the request's order. */
  readonly dropped: string[] = [];
  readonly #chatNames = new Map<string, string>();
  readonly #names = new Map<string, ToolName>();
  /** Chat names of the custom tools. */
  readonly #custom = new Set<string>();

  constructor(tools: readonly Tool[], history: readonly ToolName[] = []) {
    const functions: Array<[ToolName, FunctionTool]> = [];
    for (const tool of tools) {
      if (tool.type === 'function') functions.push([{ name: tool.name }, tool]);
      else if (tool.type === 'namespace') for (const member of tool.tools) functions.push([{ namespace: tool.name, name: member.name }, member]);
      else if (tool.type === 'custom') functions.push([{ name: tool.name }, customFunction(tool)]);
      else if (!this.dropped.includes(tool.type)) this.dropped.push(tool.type);
    }
    const all = [...functions.map(([n]) => n), ...history];
    const holders = new Map<string, Set<string>>();
    for (const n of all) holders.set(n.name, (holders.get(n.name) ?? new Set()).add(key(n)));
    const taken = new Set([...holders.keys()].filter((name) => holders.get(name)!.size === 1));
    for (const n of all) {
      if (this.#chatNames.has(key(n))) continue;
      let chatName = n.name;
      if (holders.get(n.name)!.size > 1) {
        const base = alias(n);
        chatName = base;
        for (let i = 2; taken.has(chatName); i++) chatName = `${base}_${i}`;
        taken.add(chatName);
      }
      this.#chatNames.set(key(n), chatName);
      this.#names.set(chatName, n);
    }
    for (const tool of tools) if (tool.type === 'custom') this.#custom.add(this.chatName({ name: tool.name }));
    for (const [n, t] of functions) {
      this.chatTools.push({
        type: 'function',
        function: {
          name: this.chatName(n),
          ...(t.description != null && { description: t.description }),
          parameters: t.parameters ?? {},
          ...(t.strict != null && { strict: t.strict }),
        },
      });
    }
  }

  /** The chat name of a function (its own name unless aliased). */
  chatName(n: ToolName): string {
    return this.#chatNames.get(key(n)) ?? n.name;
  }

  /** Whether a chat tool call's name is a custom tool's: its call is a `custom_tool_call`. */
  isCustom(chatName: string): boolean {
    return this.#custom.has(chatName);
  }

  /** The Responses name of a chat tool call's name: `{name}` or `{namespace, name}`. */
  responseName(chatName: string): ToolName {
    return this.#names.get(chatName) ?? { name: chatName };
  }
}
