/** The session a request belongs to, from its headers, as stock 1.6.1 reads them. */
export interface AgentSession {
  sessionId: string;
  /** The session that spawned this one (a coding agent's subagent), when the headers name one. */
  parentSessionId?: string;
}

/** Each coding agent's headers: its root session, its subagent's own id, its parent's id. */
const AGENTS = [
  { root: 'x-claude-code-session-id', child: 'x-claude-code-agent-id', parent: 'x-claude-code-parent-agent-id', rootIsParentOfChild: true },
  { root: 'thread-id', child: undefined, parent: 'x-codex-parent-thread-id', rootIsParentOfChild: false },
  { root: 'x-session-id', child: undefined, parent: 'x-parent-session-id', rootIsParentOfChild: false },
] as const;

type Headers = Record<string, string | string[] | undefined>;

/** A header's trimmed value; absent when missing or blank. */
function value(headers: Headers, name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const raw = headers[name];
  const text = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  return text ? text : undefined;
}

/**
 * The request's session: `x-dynamo-session-id` (its parent in `x-dynamo-parent-session-id`),
 * else the first coding agent whose session header is present (Claude Code, whose
 * `x-claude-code-agent-id` names a subagent of the root session; Codex's `thread-id`; OpenCode's
 * `x-session-id`), else the body's `prompt_cache_key` (OpenAI's field for "these requests share a
 * prefix", which Codex sets to its thread), which stock does not read.
 */
export function agentSession(headers: Headers, promptCacheKey?: unknown): AgentSession | undefined {
  const withParent = (sessionId: string, parent: string | undefined): AgentSession =>
    parent !== undefined && parent !== sessionId ? { sessionId, parentSessionId: parent } : { sessionId };
  const dynamo = value(headers, 'x-dynamo-session-id');
  if (dynamo !== undefined) return withParent(dynamo, value(headers, 'x-dynamo-parent-session-id'));
  for (const agent of AGENTS) {
    const root = value(headers, agent.root);
    if (root === undefined) continue;
    const sessionId = value(headers, agent.child) ?? root;
    const named = value(headers, agent.parent);
    const parent = named !== sessionId ? named : undefined;
    if (!agent.rootIsParentOfChild) return withParent(sessionId, parent);
    // Claude Code's root session is the parent of its subagents; a root session has no parent.
    return sessionId === root ? { sessionId } : { sessionId, parentSessionId: parent ?? root };
  }
  return typeof promptCacheKey === 'string' && promptCacheKey.trim() !== '' ? { sessionId: promptCacheKey.trim() } : undefined;
}
