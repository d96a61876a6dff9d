// The routing policies on their own: how stock 1.6.1's modes pick among workers by requests in
// flight, how a request's session is read from its headers, how a session binding lives and
// expires, and how busy thresholds take and refuse changes.
import { type Client, parseFlags } from '@dynamo/runtime';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { frontendConfig, frontendFlags } from '../src/settings.js';
import { agentSession } from '../src/routing/agent-session.js';
import { LeastLoadedRouter, PowerOfTwoRouter, RoundRobinRouter } from '../src/routing/basic-routers.js';
import { BusyThresholds } from '../src/routing/busy-thresholds.js';
import { queueClassFor, RouterPolicyConfig } from '../src/routing/policy-config.js';
import { QueueFull, RequestQueue } from '../src/routing/request-queue.js';
import type { Candidate } from '../src/routing/router.js';
import { SessionAffinity } from '../src/routing/session-affinity.js';

const candidates = (...ids: number[]): Candidate[] => ids.map((id) => ({ instanceId: BigInt(id), client: {} as Client }));
const request = (requestId: string) => ({ model: 'm', requestId, failed: new Set<bigint>() });

afterEach(() => {
  vi.useRealTimers();
});

describe('power-of-two and least-loaded', () => {
  it('with two workers, always take the one with fewer requests in flight', () => {
    for (const router of [new PowerOfTwoRouter(), new LeastLoadedRouter()]) {
      const pool = candidates(7, 9);
      router.book(pool[0]!, request('held-1'));
      router.book(pool[0]!, request('held-2'));
      for (let i = 0; i < 20; i++) {
        // Each placed request stays in flight, so the two alternate once level.
        const chosen = router.select(pool, request(`r${i}`)).instanceId;
        if (i < 2) expect(chosen).toBe(9n);
      }
      router.finished('held-1');
      router.finished('held-2');
      for (let i = 0; i < 20; i++) router.finished(`r${i}`);
      // All released: the loads are level again, and a migrated request moves its count.
      router.select(pool, request('m'));
      const first = router.select(pool, request('m')).instanceId;
      expect(router.select(pool, request('n')).instanceId).not.toBe(first);
    }
  });

  it('least-loaded breaks ties at random among the least loaded', () => {
    const router = new LeastLoadedRouter();
    const seen = new Set<bigint>();
    for (let i = 0; i < 200; i++) {
      seen.add(router.select(candidates(1, 2, 3), request(`r${i}`)).instanceId);
      router.finished(`r${i}`);
    }
    expect(seen).toEqual(new Set([1n, 2n, 3n]));
  });

  it('round-robin cycles by ascending instance id, as stock does', () => {
    const router = new RoundRobinRouter();
    const picks = Array.from({ length: 4 }, (_, i) => router.select(candidates(30, 10, 20), request(`r${i}`)).instanceId);
    expect(picks).toEqual([10n, 20n, 30n, 10n]);
  });
});

describe('agentSession', () => {
  it("reads stock's headers in stock's order", () => {
    expect(agentSession({})).toBeUndefined();
    expect(agentSession({ 'x-dynamo-session-id': '  s1 ', 'x-session-id': 'other' })).toEqual({ sessionId: 's1' });
    expect(agentSession({ 'x-dynamo-session-id': '   ', 'thread-id': 't1' })).toEqual({ sessionId: 't1' });
    expect(agentSession({ 'x-dynamo-session-id': 's1', 'x-dynamo-parent-session-id': 'p' })).toEqual({ sessionId: 's1', parentSessionId: 'p' });
    expect(agentSession({ 'x-dynamo-session-id': 's1', 'x-dynamo-parent-session-id': 's1' })).toEqual({ sessionId: 's1' });
    // Claude Code: the root session, or a subagent of it.
    expect(agentSession({ 'x-claude-code-session-id': 'root' })).toEqual({ sessionId: 'root' });
    expect(agentSession({ 'x-claude-code-session-id': 'root', 'x-claude-code-agent-id': 'a1' })).toEqual({ sessionId: 'a1', parentSessionId: 'root' });
    expect(agentSession({ 'x-claude-code-session-id': 'root', 'x-claude-code-agent-id': 'a2', 'x-claude-code-parent-agent-id': 'a1' })).toEqual({
      sessionId: 'a2',
      parentSessionId: 'a1',
    });
    expect(agentSession({ 'x-claude-code-session-id': 'root', 'x-claude-code-parent-agent-id': 'a1' })).toEqual({ sessionId: 'root' });
    expect(agentSession({ 'thread-id': 't', 'x-codex-parent-thread-id': 'pt' })).toEqual({ sessionId: 't', parentSessionId: 'pt' });
    expect(agentSession({ 'x-session-id': 'o', 'x-parent-session-id': 'po' })).toEqual({ sessionId: 'o', parentSessionId: 'po' });
  });

  it("falls back to the body's prompt_cache_key when no header names a session", () => {
    expect(agentSession({}, ' k1 ')).toEqual({ sessionId: 'k1' });
    expect(agentSession({ 'thread-id': 't' }, 'k1')).toEqual({ sessionId: 't' });
    expect(agentSession({}, '  ')).toBeUndefined();
    expect(agentSession({}, 42)).toBeUndefined();
  });
});

describe('SessionAffinity', () => {
  it('keeps a binding while its requests run and for the TTL after the last one ends', () => {
    vi.useFakeTimers();
    const affinity = new SessionAffinity(2, 'hard');
    affinity.commit('s', 5n, true);
    vi.advanceTimersByTime(10_000);
    expect(affinity.bound('s')).toBe(5n);
    affinity.release('s');
    vi.advanceTimersByTime(1_999);
    expect(affinity.bound('s')).toBe(5n);
    vi.advanceTimersByTime(1);
    expect(affinity.bound('s')).toBeUndefined();
    expect(affinity.size).toBe(0);
    affinity.close();
  });

  it("shares each write with a new version, takes a peer's newer one, and keeps its own newer one", () => {
    const shared: Array<{ key: string; instanceId: bigint; sequence: bigint }> = [];
    const affinity = new SessionAffinity(60, 'hard', 7n, (key, b) => shared.push({ key, instanceId: b.instanceId, sequence: b.version.sequence }));
    affinity.commit('s', 1n, true, 'ns/c/generate');
    affinity.release('s');
    expect(shared.map((e) => [e.key, e.instanceId])).toEqual([
      ['s', 1n],
      ['s', 1n],
    ]);
    expect(shared[1]!.sequence).toBeGreaterThan(shared[0]!.sequence);
    const mine = shared[1]!.sequence;
    // An older write from a peer loses; a newer one wins.
    expect(affinity.applyShared('s', 2n, { sequence: mine - 1n, writer: 9n })).toBe(false);
    expect(affinity.bound('s')).toBe(1n);
    expect(affinity.applyShared('s', 2n, { sequence: mine + 5n, writer: 9n })).toBe(true);
    expect(affinity.bound('s')).toBe(2n);
    // A session this frontend never saw is taken as it is; the next local write is newer than anything seen.
    expect(affinity.applyShared('t', 3n, { sequence: mine + 100n, writer: 9n })).toBe(true);
    expect(affinity.bound('t')).toBe(3n);
    affinity.commit('s', 2n, true, 'ns/c/generate');
    expect(shared.at(-1)!.sequence).toBeGreaterThan(mine + 100n);
    affinity.close();
  });

  it('keys subagents by their parent, so siblings share a worker; an explicit worker binds the session itself', () => {
    const a = SessionAffinity.key({ sessionId: 'a1', parentSessionId: 'root' }, false);
    expect(a).toBe(SessionAffinity.key({ sessionId: 'a2', parentSessionId: 'root' }, false));
    expect(a.startsWith('\u0001sg:')).toBe(true);
    expect(SessionAffinity.key({ sessionId: 'a1', parentSessionId: 'root' }, true)).toBe('a1');
    expect(() => SessionAffinity.key({ sessionId: 'x'.repeat(257) }, false)).toThrow('session affinity ID must not exceed 256 bytes');
  });
});

describe('BusyThresholds', () => {
  it('sets only the values given, refuses out-of-range ones whole, and folds the prefill fraction in', () => {
    const t = new BusyThresholds();
    expect(t.enabled).toBe(false);
    let changes = 0;
    t.onChange(() => (changes += 1));
    t.update({ active_decode_blocks_threshold: 0.8 });
    t.update({ active_prefill_tokens_threshold: 5000, active_decode_blocks_threshold: null });
    expect(t.values).toEqual({ active_decode_blocks_threshold: 0.8, active_prefill_tokens_threshold: 5000, active_prefill_tokens_threshold_frac: null });
    expect(() => t.update({ active_prefill_tokens_threshold: 1, active_decode_blocks_threshold: 2 })).toThrow(
      'active_decode_blocks_threshold must be between 0.0 and 1.0, got 2',
    );
    expect(t.values.active_prefill_tokens_threshold).toBe(5000);
    expect(changes).toBe(2);
    t.update({ active_prefill_tokens_threshold_frac: 0.25 });
    expect(t.effective(8192)).toEqual({ activeDecodeBlocksThreshold: 0.8, activePrefillTokensThreshold: 2048 });
    expect(t.effective(null)).toEqual({ activeDecodeBlocksThreshold: 0.8, activePrefillTokensThreshold: 5000 });
  });
});

describe('routing flags', () => {
  const parse = (argv: string[], env: Record<string, string> = {}) => {
    const parsed = parseFlags(frontendFlags, argv, env);
    if (parsed.help) throw new Error('help');
    return frontendConfig(parsed.values);
  };

  it("take stock's names and variables; None or empty leaves a threshold unset", () => {
    expect(parse(['--router-mode', 'least-loaded', '--router-session-affinity-ttl-secs', '30', '--router-session-affinity-mode', 'soft'])).toMatchObject({
      routing: { mode: 'least-loaded', sessionAffinityTtlSecs: 30, sessionAffinityMode: 'soft' },
      http: { adminApi: true },
    });
    expect(
      parse([], { DYN_ROUTER_MODE: 'power-of-two', DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC: '0.5', DYN_DISABLE_FRONTEND_ADMIN_API: 'true' }),
    ).toMatchObject({
      routing: { mode: 'power-of-two' },
      busyThresholds: { active_prefill_tokens_threshold_frac: 0.5 },
      http: { adminApi: false },
    });
    expect(parse(['--active-decode-blocks-threshold', 'None', '--active-prefill-tokens-threshold', '']).busyThresholds).toEqual({
      active_decode_blocks_threshold: undefined,
      active_prefill_tokens_threshold: undefined,
      active_prefill_tokens_threshold_frac: undefined,
    });
    expect(
      parse(['--router-replica-sync', '--router-queue-threshold', '0', '--router-queue-policy', 'wspt', '--router-policy-config', 'p.yaml']),
    ).toMatchObject({
      kvRouter: { replicaSync: true, queueThreshold: 0, queuePolicy: 'wspt' },
      routing: { policyConfig: 'p.yaml' },
    });
    expect(parse([]).routing.sessionAffinityTtlSecs).toBeUndefined();
  });

  it('name a bad value', () => {
    expect(() => parse(['--router-session-affinity-ttl-secs', '0'])).toThrow(/--router-session-affinity-ttl-secs: must be between 1 and 31536000/);
    expect(() => parse(['--router-mode', 'fastest'])).toThrow(/--router-mode/);
    expect(() => parse(['--router-queue-policy', 'lcfs'])).toThrow(/--router-queue-policy/);
    expect(() => parse(['--active-prefill-tokens-threshold-frac=-1'])).toThrow(/--active-prefill-tokens-threshold-frac: must not be negative/);
  });
});

describe('RequestQueue', () => {
  it('lets requests go in policy order while there is room, refuses past its limit, and drops a request whose client left', async () => {
    const queue = new RequestQueue<number>('wspt', 'c', { requestsPerWorker: 2 }, () => {});
    const a = queue.push(90, 2, undefined, () => 90);
    const abort = new AbortController();
    const b = queue.push(10, 2, abort.signal, () => 10);
    const c = queue.push(50, 2, undefined, () => 50);
    const d = queue.push(30, 2, undefined, () => 30);
    expect(() => queue.push(5, 2, undefined, () => 5)).toThrow(QueueFull);
    abort.abort();
    await expect(b).rejects.toThrow('client closed the request while it waited for a worker');
    const order: number[] = [];
    for (const p of [a, c, d]) void p.then((n) => order.push(n));
    let room = 2;
    queue.drain(() => room-- > 0);
    await new Promise((r) => setTimeout(r, 0));
    expect(order).toEqual([30, 50]);
    expect(queue.size).toBe(1);
  });
});

describe('RouterPolicyConfig', () => {
  const dir = mkdtempSync(join(tmpdir(), 'policy-'));
  const load = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return () => RouterPolicyConfig.load(path);
  };
  const cls =
    '{name: batch, policy_family: std, cache_bucket: all, quantum: 1, queue_policy: wspt, prefill_busy_threshold: 100, request_queue_limit_per_worker: 4}';

  it('takes a root profile and per-model ones of one policy class each', () => {
    const config = load(
      'ok.yaml',
      `default_policy_family: std\nuncached_isl_buckets: [{min_tokens: 0, bucket: all}]\npolicy_classes: [${cls}]\nmodels:\n  m2:\n    default_policy_family: std\n    uncached_isl_buckets: [{min_tokens: 0, bucket: all}]\n    policy_classes: [{name: solo, policy_family: std, cache_bucket: all, quantum: 1, prefill_busy_threshold_frac: 0.5}]\n`,
    )();
    expect(queueClassFor('m1', config, undefined, 'fcfs')).toEqual({
      name: 'batch',
      policy: 'wspt',
      prefillBusyThreshold: 100,
      limits: { requestsPerWorker: 4 },
    });
    expect(queueClassFor('m2', config, undefined, 'fcfs')).toMatchObject({ name: 'solo', policy: 'fcfs', prefillBusyThresholdFrac: 0.5, limits: {} });
    expect(queueClassFor('m', undefined, 0.25, 'wspt')).toEqual({ name: 'default', policy: 'wspt', prefillBusyThresholdFrac: 0.25, limits: {} });
    expect(queueClassFor('m', undefined, undefined, 'fcfs')).toBeUndefined();
  });

  it('names the file and what is wrong', () => {
    expect(load('empty.yaml', '')).toThrow(/must define a root profile or at least one model profile/);
    expect(() => RouterPolicyConfig.load(join(dir, 'absent.yaml'))).toThrow(/failed to read router policy config .*absent\.yaml/);
    expect(load('bad.yaml', 'policy_classes: [')).toThrow(/failed to parse router policy config .*bad\.yaml/);
    expect(load('partial.yaml', `policy_classes: [${cls}]`)).toThrow(
      /root profile must specify default_policy_family, uncached_isl_buckets, and policy_classes/,
    );
    expect(
      load(
        'unknown.yaml',
        `default_policy_family: std\nuncached_isl_buckets: [{min_tokens: 0, bucket: all}]\npolicy_classes: [${cls.replace('quantum: 1', 'quantum: 1, speed: 2')}]`,
      ),
    ).toThrow(/policy_classes\.0: Unrecognized key/);
    expect(
      load(
        'two.yaml',
        `default_policy_family: std\nuncached_isl_buckets: [{min_tokens: 0, bucket: all}]\npolicy_classes: [${cls}, ${cls.replace('batch', 'other')}]`,
      ),
    ).toThrow(/one policy class per profile/);
    expect(load('router.yaml', 'router: {router_temperature: 0.5}')).toThrow(/the router section is not supported by this frontend/);
  });
});
