/** A Hugging Face model named by its repo id, optionally at a revision. */
export interface RepoRef {
  /** `Org/Name`. */
  repoId: string;
  /** From `Org/Name@revision`; undefined when not given. */
  revision?: string;
  /** True when written as `hf://Org/Name`: never a local path. */
  explicit: boolean;
}

// huggingface_hub's rule: word characters, '-' and '.', not starting or ending with '-' or '.',
// no '--' or '..', at most 96 characters in all. We require the `Org/` part.
const part = /^(?![-.])[\w.-]+(?<![-.])$/;

/** True for a 40-hex-digit commit hash, which the cache keys snapshots by. */
export function isCommitHash(revision: string): boolean {
  return /^[0-9a-f]{40}$/.test(revision);
}

/**
 * Parses `hf://Org/Name`, `Org/Name` or either with `@revision` into a {@link RepoRef}; returns
 * undefined for anything that is not a valid Hugging Face repo id.
 */
export function parseRepoRef(input: string): RepoRef | undefined {
  const explicit = input.startsWith('hf://');
  const rest = explicit ? input.slice('hf://'.length) : input;
  const at = rest.indexOf('@');
  const repoId = at < 0 ? rest : rest.slice(0, at);
  const revision = at < 0 ? undefined : rest.slice(at + 1);
  if (revision !== undefined && (revision === '' || /\s/.test(revision))) return undefined;
  const parts = repoId.split('/');
  if (parts.length !== 2 || repoId.length > 96) return undefined;
  if (!parts.every((p) => part.test(p) && !p.includes('--') && !p.includes('..'))) return undefined;
  if (repoId.endsWith('.git')) return undefined;
  return { repoId, revision, explicit };
}
