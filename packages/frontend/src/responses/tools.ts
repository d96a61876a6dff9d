import { z } from 'zod';

const text = z.string();

/** A function tool in the Responses shape (flat: `{type, name, description, parameters, strict}`). */
export const FunctionToolSchema = z.looseObject({
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
export const ToolSchema = z.discriminatedUnion('type', [FunctionToolSchema, NamespaceToolSchema, HostedToolSchema], {
  error: `must be a function or namespace tool, or one of the hosted tools (${HOSTED_TOOL_TYPES.join(', ')}), which are left out`,
});
type Tool = z.output<typeof ToolSchema>;

/** A function call's name as the Responses API names it: its namespace, if any, and its own name. */
export interface ToolName {
  namespace?: string | undefined;
  name: string;
}

/** A chat tool: `{type: "function", function: {name, description, parameters, strict}}`. */
type ChatTool = { type: 'function'; function: Record<string, unknown> & { name: string } };

const key = (n: ToolName) => `${n.namespace ?? ''}\u0000${n.name}`;
/** Chat tool names may hold only these (stock's rule); an alias is cut to 48 of them. */
const alias = (n: ToolName) => `${n.namespace ?? 'function'}__${n.name}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 48);

/**
 * The tools of a Responses request as a chat model sees them, as stock 1.6.1 maps them: function
 * tools as they are, a namespace's function tools flattened into top-level functions. A function
 * keeps its own name unless another function of the request or of its history (`function_call`
 * items) has it too; then it is `<namespace>__<name>` (`function__<name>` outside a namespace),
 * with `_2`, `_3`, ... until unique. Hosted tools are dropped ({@link HOSTED_TOOL_TYPES}).
 */
export class ResponseTools {
  /** The chat tools, in the request's order. */
  readonly chatTools: ChatTool[] = [];
  /** The hosted tool types left out, each once, in the request's order. */
  readonly dropped: string[] = [];
  readonly #chatNames = new Map<string, string>();
  readonly #names = new Map<string, ToolName>();

  constructor(tools: readonly Tool[], history: readonly ToolName[] = []) {
    const functions: Array<[ToolName, FunctionTool]> = [];
    for (const tool of tools) {
      if (tool.type === 'function') functions.push([{ name: tool.name }, tool]);
      else if (tool.type === 'namespace') for (const member of tool.tools) functions.push([{ namespace: tool.name, name: member.name }, member]);
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
    for (const [n, t] of functions) {
      this.chatTools.push({
        type: 'function',
        function: { name: this.chatName(n), ...(t.description != null && { description: t.description }), parameters: t.parameters ?? {}, ...(t.strict != null && { strict: t.strict }) },
      });
    }
  }

  /** The chat name of a function (its own name unless aliased). */
  chatName(n: ToolName): string {
    return this.#chatNames.get(key(n)) ?? n.name;
  }

  /** The Responses name of a chat tool call's name: `{name}` or `{namespace, name}`. */
  responseName(chatName: string): ToolName {
    return this.#names.get(chatName) ?? { name: chatName };
  }
}
