import { blake3HexDigest } from '@dynamo/core';
import { InvalidArgument, WorkerOverloaded } from '@dynamo/runtime';

import type { AgentSession } from './agent-session.js';

/** Stock's limits: sessions held at once, and the longest session id. */
export const MAX_SESSIONS = 65_536;
export const MAX_SESSION_ID_BYTES = 256;

/**
 * `hard`: a bound session's requests go to its worker, busy or not; `soft`: they go there while
 * it is free, else elsewhere, and the session follows them.
 */
export type AffinityMode = 'hard' | 'soft';

/** A binding's version: `(sequence, writer)` in that order decides which of two writes wins. */
export interface BindingVersion {
  sequence: bigint;
  /** The discovery instance id of the frontend that wrote it. */
  writer: bigint;
}

/** What a replica shares of a binding. */
export interface SharedBinding {
  instanceId: bigint;
  version: BindingVersion;
  /** The worker's endpoint (`ns/component/endpoint`), where the binding is shared. */
  endpoint: string | undefined;
}

interface Binding extends SharedBinding {
  /** Requests of the session in flight: a binding in use never expires. */
  leases: number;
  /** When an idle binding expires (ms since the epoch). */
  idleUntil: number;
}

const newer = (a: BindingVersion, b: BindingVersion) => a.sequence > b.sequence || (a.sequence === b.sequence && a.writer > b.writer);

/**
 * Session affinity for one model (stock 1.6.1's `--router-session-affinity-ttl-secs`): the
 * requests of a session (see `agentSession`) go to the worker its first request went to. A
 * binding lives while its requests are in flight and `ttlMs` after the last one ends; a
 * subagent's requests share a binding with their siblings, keyed by their parent session.
 *
 * Each write of a binding gets a new version and goes to `share` (the model's other frontends);
 * theirs arrive through {@link applyShared}, and the newer version wins, as in stock.
 */
export class SessionAffinity {
  readonly mode: AffinityMode;
  readonly #ttlMs: number;
  readonly #bindings = new Map<string, Binding>();
  readonly #reaper: NodeJS.Timeout;
  readonly #writer: bigint;
  readonly #share: (key: string, binding: SharedBinding) => void;
  /** Versions count up from the start time in ns, so a restarted frontend's writes are newer. */
  #sequence = BigInt(Date.now()) * 1_000_000n;

  constructor(ttlSecs: number, mode: AffinityMode, writer = 0n, share: (key: string, binding: SharedBinding) => void = () => {}) {
    this.mode = mode;
    this.#ttlMs = ttlSecs * 1000;
    this.#writer = writer;
    this.#share = share;
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
   * Binds `key` to `instanceId` on `endpoint` (a new request of the session, `lease`: counted
   * until {@link release}). Throws `WorkerOverloaded` when the table is full.
   */
  commit(key: string, instanceId: bigint, lease: boolean, endpoint?: string): void {
    let binding = this.#bindings.get(key);
    if (!binding) {
      if (this.#bindings.size >= MAX_SESSIONS) this.#reap();
      if (this.#bindings.size >= MAX_SESSIONS) throw new WorkerOverloaded('session affinity entry limit reached');
      binding = { instanceId, leases: 0, idleUntil: 0, version: this.#version(), endpoint };
      this.#bindings.set(key, binding);
    }
    binding.instanceId = instanceId;
    if (endpoint !== undefined) binding.endpoint = endpoint;
    if (lease) binding.leases += 1;
    this.#touch(key, binding);
  }

  /** A request of the session ended: the binding's idle time starts when the last one does. */
  release(key: string): void {
    const binding = this.#bindings.get(key);
    if (!binding) return;
    binding.leases = Math.max(0, binding.leases - 1);
    this.#touch(key, binding);
  }

  /** A new version of the binding, its idle time restarted, shared with the other frontends. */
  #touch(key: string, binding: Binding): void {
    binding.version = this.#version();
    binding.idleUntil = Date.now() + this.#ttlMs;
    this.#share(key, { instanceId: binding.instanceId, version: binding.version, endpoint: binding.endpoint });
  }

  #version(): BindingVersion {
    this.#sequence += 1n;
    return { sequence: this.#sequence, writer: this.#writer };
  }

  /**
   * Another frontend's write of a binding: taken when this frontend has none (or an expired one)
   * or when it is newer; the same binding at an equal version only restarts the idle time.
   * Returns whether it changed anything.
   */
  applyShared(key: string, instanceId: bigint, version: BindingVersion): boolean {
    // Later local writes must win over what was seen, whatever the clocks say.
    if (version.sequence > this.#sequence) this.#sequence = version.sequence;
    if (Buffer.byteLength(key) > MAX_SESSION_ID_BYTES) return false;
    const binding = this.#bindings.get(key);
    const now = Date.now();
    if (!binding || (binding.leases === 0 && binding.idleUntil <= now)) {
      if (!binding && this.#bindings.size >= MAX_SESSIONS) return false;
      this.#bindings.set(key, { instanceId, leases: 0, idleUntil: now + this.#ttlMs, version, endpoint: undefined });
      return true;
    }
    const same = binding.instanceId === instanceId;
    if (!newer(version, binding.version) && !(same && version.sequence === binding.version.sequence && version.writer === binding.version.writer)) return false;
    // Moved elsewhere by a peer: where it is shared is that worker's endpoint, learnt at its next local use.
    if (!same) binding.endpoint = undefined;
    binding.instanceId = instanceId;
    binding.version = version;
    binding.idleUntil = now + this.#ttlMs;
    return true;
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
