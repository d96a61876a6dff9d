import { blake3HexDigest } from '@dynamo/core';
import { InvalidArgument, WorkerOverloaded } from '@dynamo/runtime';

import type { AgentSession } from '../http/agent-session.js';

/** Stock's limits: sessions held at once, and the longest session id. */
export const MAX_SESSIONS = 65_536;
export const MAX_SESSION_ID_BYTES = 256;

/**
 * `hard`: a bound session's requests go to its worker, busy or not; `soft`: they go there while
 * it is free, else elsewhere, and the session follows them.
 */
export type AffinityMode = 'hard' | 'soft';

interface Binding {
  instanceId: bigint;
  /** Requests of the session in flight: a binding in use never expires. */
  leases: number;
  /** When an idle binding expires (ms since the epoch). */
  idleUntil: number;
}

/**
 * Session affinity for one model (stock 1.6.1's `--router-session-affinity-ttl-secs`): the
 * requests of a session (see `agentSession`) go to the worker its first request went to. A
 * binding lives while its requests are in flight and `ttlMs` after the last one ends; a
 * subagent's requests share a binding with their siblings, keyed by their parent session.
 */
export class SessionAffinity {
  readonly mode: AffinityMode;
  readonly #ttlMs: number;
  readonly #bindings = new Map<string, Binding>();
  readonly #reaper: NodeJS.Timeout;

  constructor(ttlSecs: number, mode: AffinityMode) {
    this.mode = mode;
    this.#ttlMs = ttlSecs * 1000;
    this.#reaper = setInterval(() => this.#reap(), Math.min(this.#ttlMs, 30_000)).unref();
  }

  /**
   * The binding key of a session; `explicit` (a request naming its worker) binds the session
   * itself, not its parent's group. Throws `InvalidArgument` for an id past stock's limit.
   */
  static key(session: AgentSession, explicit: boolean): string {
    if (Buffer.byteLength(session.sessionId) > MAX_SESSION_ID_BYTES) {
      throw new InvalidArgument(`session affinity ID must not exceed ${MAX_SESSION_ID_BYTES} bytes`);
    }
    if (session.parentSessionId === undefined || explicit) return session.sessionId;
    return `\u0001sg:${blake3HexDigest(Buffer.from(session.parentSessionId))}`;
  }

  /** The worker `key` is bound to, unless it expired (then it is forgotten). */
  bound(key: string, now = Date.now()): bigint | undefined {
    const binding = this.#bindings.get(key);
    if (!binding) return undefined;
    if (binding.leases === 0 && binding.idleUntil <= now) {
      this.#bindings.delete(key);
      return undefined;
    }
    return binding.instanceId;
  }

  /** Forgets `key`'s binding (its worker is gone). */
  invalidate(key: string): void {
    this.#bindings.delete(key);
  }

  /**
   * Binds `key` to `instanceId` (a new request of the session, `lease`: counted until
   * {@link release}). Throws `WorkerOverloaded` when the table is full.
   */
  commit(key: string, instanceId: bigint, lease: boolean): void {
    let binding = this.#bindings.get(key);
    if (!binding) {
      if (this.#bindings.size >= MAX_SESSIONS) this.#reap();
      if (this.#bindings.size >= MAX_SESSIONS) throw new WorkerOverloaded('session affinity entry limit reached');
      binding = { instanceId, leases: 0, idleUntil: 0 };
      this.#bindings.set(key, binding);
    }
    binding.instanceId = instanceId;
    if (lease) binding.leases += 1;
    binding.idleUntil = Date.now() + this.#ttlMs;
  }

  /** A request of the session ended: the binding's idle time starts when the last one does. */
  release(key: string): void {
    const binding = this.#bindings.get(key);
    if (!binding) return;
    binding.leases = Math.max(0, binding.leases - 1);
    binding.idleUntil = Date.now() + this.#ttlMs;
  }

  /** Sessions bound now (expired ones not yet reaped included). */
  get size(): number {
    return this.#bindings.size;
  }

  #reap(): void {
    const now = Date.now();
    for (const [key, binding] of this.#bindings) if (binding.leases === 0 && binding.idleUntil <= now) this.#bindings.delete(key);
  }

  close(): void {
    clearInterval(this.#reaper);
  }
}
