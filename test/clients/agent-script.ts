// What the scripted agent engine (agent-engine.ts) answers to a prompt rendered by Qwen3's chat
// template (hermes tool calls): a coding agent's tool session made deterministic, so a test can
// tell a real agent CLI ran the tool and read its result back.
//
// - The last turn holds a tool result: `done: <what the tool printed>`.
// - Else, when the last user turn asks to run `echo hello-from-tool` and the prompt offers a shell
//   tool: a `<tool_call>` of it that runs the command, its arguments named from the tool's own
//   schema (agents name and shape them differently).
// - Else: a plain answer.

/** The command the scripted tool call runs. */
export const TOOL_COMMAND = 'echo hello-from-tool';
/** The answer to a prompt with no tool to call. */
export const PLAIN_ANSWER = 'hello from the scripted engine';

type Schema = { type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; enum?: unknown[]; items?: Schema };
type Tool = { name: string; parameters?: Schema };

/** Tool names of the shell tools of Claude Code (Bash), Codex (shell, exec_command) and OpenCode (bash). */
const SHELL_TOOL = /^(bash|shell|shell_command|exec_command|local_shell|run_shell_command)$/i;
/** Argument names that hold the command line. */
const COMMAND_ARG = /^(command|cmd)$/;

/** The tools the prompt offers: Qwen3's template lists one JSON object a line inside `<tools>`. */
export function offeredTools(prompt: string): Tool[] {
  const start = prompt.indexOf('<tools>\n');
  const end = prompt.indexOf('\n</tools>', start);
  if (start < 0 || end < 0) return [];
  return prompt
    .slice(start + '<tools>\n'.length, end)
    .split('\n')
    .flatMap((line) => {
      try {
        const tool = JSON.parse(line) as { function?: Tool } & Tool;
        return [tool.function ?? tool];
      } catch {
        return [];
      }
    });
}

/** A value of `schema`'s type for an argument other than the command. */
function filler(name: string, schema: Schema): unknown {
  if (schema.enum?.length) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'array') return [];
  if (type === 'number' || type === 'integer') return 10_000;
  if (type === 'boolean') return false;
  if (type === 'object') return {};
  return name === 'description' ? 'Print a greeting' : '.';
}

/** The arguments of a call of `tool` that runs {@link TOOL_COMMAND}; undefined when it takes no command. */
export function shellArguments(tool: Tool): Record<string, unknown> | undefined {
  const properties = tool.parameters?.properties ?? {};
  const command = Object.keys(properties).find((name) => COMMAND_ARG.test(name));
  if (command === undefined) return undefined;
  const args: Record<string, unknown> = {};
  for (const name of tool.parameters?.required ?? []) if (name !== command) args[name] = filler(name, properties[name] ?? {});
  const type = properties[command]!.type;
  args[command] = type === 'array' || (Array.isArray(type) && type[0] === 'array') ? ['bash', '-lc', TOOL_COMMAND] : TOOL_COMMAND;
  return args;
}

/** The prompt's last user turn (Qwen3 puts tool results in user turns too). */
const lastUserTurn = (prompt: string) => prompt.slice(prompt.lastIndexOf('<|im_start|>user\n'));

/** The last turn's tool result text, when the last turn is one. */
export function lastToolResult(prompt: string): string | undefined {
  const turn = lastUserTurn(prompt);
  const start = turn.lastIndexOf('<tool_response>\n');
  const end = turn.lastIndexOf('\n</tool_response>');
  return start >= 0 && end > start ? turn.slice(start + '<tool_response>\n'.length, end) : undefined;
}

/**
 * What a tool printed, from the result an agent sends back: the text after an `Output:` line
 * (Codex's wrapper), else the `output` of a JSON result, else the whole result; trimmed.
 */
export function toolOutput(result: string): string {
  const marker = result.match(/(?:^|\n)Output:\n/);
  if (marker?.index !== undefined) return result.slice(marker.index + marker[0].length).trim();
  try {
    const json = JSON.parse(result) as { output?: unknown };
    if (typeof json.output === 'string') return json.output.trim();
  } catch {
    // Not JSON: the result is the output.
  }
  return result.trim();
}

/** The scripted reply to `prompt` (see the file's header). */
export function scriptedReply(prompt: string): string {
  const result = lastToolResult(prompt);
  if (result !== undefined) return `done: ${toolOutput(result)}`;
  if (!lastUserTurn(prompt).includes(TOOL_COMMAND)) return PLAIN_ANSWER;
  for (const tool of offeredTools(prompt)) {
    if (!SHELL_TOOL.test(tool.name)) continue;
    const args = shellArguments(tool);
    if (args) return `<tool_call>\n${JSON.stringify({ name: tool.name, arguments: args })}\n</tool_call>`;
  }
  return PLAIN_ANSWER;
}
