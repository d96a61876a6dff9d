import { z } from 'zod';

/** OpenAI's `reasoning_effort` values, with the ones stock Dynamo adds. */
export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] as const;

/** A chat request's root `thinking`: on or off, or `{type: "enabled" | "disabled" | "adaptive"}`. */
export const ThinkingSchema = z.union([z.boolean(), z.looseObject({ type: z.enum(['enabled', 'disabled', 'adaptive']) })]);

/** The chat fields that steer reasoning. */
export interface ReasoningFields {
  reasoning_effort?: string | null | undefined;
  thinking?: z.output<typeof ThinkingSchema> | null | undefined;
  chat_template_args?: Record<string, unknown> | null | undefined;
  chat_template_kwargs?: Record<string, unknown> | null | undefined;
}

const toggles = (on: boolean) => ({ thinking: on, enable_thinking: on, thinking_mode: on ? 'enabled' : 'disabled' });

/**
 * The chat template arguments of a request, with its reasoning controls folded in as stock
 * Dynamo 1.6.1 folds them: `chat_template_kwargs` (vLLM's name) and `chat_template_args`
 * (Dynamo's) merged; a root `thinking` applied; then, when anything decides whether the model
 * thinks (a boolean `thinking` / `enable_thinking`, a `thinking_mode`, or a `reasoning_effort`,
 * where `"none"` means off and any other effort on), the switch written in the three spellings
 * templates use (`thinking`, `enable_thinking`, `thinking_mode`), and the effort itself as
 * `reasoning_effort`. Undefined when the request has no arguments at all.
 */
export function templateArgs(request: ReasoningFields): Record<string, unknown> | undefined {
  const given = request.chat_template_kwargs || request.chat_template_args ? { ...request.chat_template_kwargs, ...request.chat_template_args } : undefined;
  const effort = request.reasoning_effort ?? (typeof given?.reasoning_effort === 'string' ? given.reasoning_effort : undefined);
  const thinking = request.thinking;
  if (effort == null && thinking == null && !given) return undefined;
  const args: Record<string, unknown> = { ...given };
  if (thinking != null) {
    const type = typeof thinking === 'boolean' ? (thinking ? 'enabled' : 'disabled') : thinking.type;
    if (type === 'adaptive') {
      delete args.thinking;
      delete args.enable_thinking;
      args.thinking_mode = 'adaptive';
    } else Object.assign(args, toggles(type === 'enabled'));
  }
  const decided =
    [args.thinking, args.enable_thinking].find((v): v is boolean => typeof v === 'boolean') ??
    (args.thinking_mode === 'enabled'
      ? true
      : args.thinking_mode === 'disabled'
        ? false
        : args.thinking_mode === 'adaptive'
          ? undefined
          : effort != null
            ? effort !== 'none'
            : undefined);
  if (decided !== undefined) Object.assign(args, toggles(decided));
  if (effort != null) args.reasoning_effort = effort;
  return args;
}

/** Whether a request turns thinking off (its folded template arguments say `enable_thinking: false`). */
export function thinkingDisabled(request: ReasoningFields): boolean {
  return templateArgs(request)?.enable_thinking === false;
}
