// Stock 1.6.1's router modes and routing controls on real processes: power-of-two and
// least-loaded against round-robin with one slow worker, session affinity (x-dynamo-session-id),
// and the busy thresholds changed at run time through /busy_threshold. Each response names its
// worker (nvext.extra_fields: ["worker_id"]); /health maps instance ids to components.
import { waitFor } from '@dynamo/testing/free-port';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MODEL = 'qwen3-routes';
const BLOCK = 16;
let deployment: Deployment;
/** Frontend URLs by router mode. */
const fronts: Record<string, string> = {};
/** Instance id (decimal) → component: fast, slow. */
const roleOf = new Map<string, string>();

/** One completion; returns the component of the worker that served it. */
async function served(url: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<string> {
  const res = await post(
    url,
    '/v1/completions',
    { model: MODEL, prompt: 'route me', max_tokens: 6, ...body, nvext: { extra_fields: ['worker_id'] } },
    { headers },
  );
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
  // The id is a u64: read it as text, not as a (rounded) number.
  const id = /"decode_worker_id":(\d+)/.exec(text)?.[1];
  if (!id) throw new Error(`no worker id in ${text}`);
  return roleOf.get(id) ?? `unknown ${id}`;
}

/** `clients` closed loops sending `total` requests in all; returns how many each worker served. */
async function spread(url: string, total: number, clients: number): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  let left = total;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (left > 0) {
        left -= 1;
        const role = await served(url);
        counts[role] = (counts[role] ?? 0) + 1;
      }
    }),
  );
  return counts;
}

async function instanceOf(component: string): Promise<string> {
  const health = (await (await fetch(`${fronts['round-robin']}/health`)).text()).replace(/"instance_id":(\d+)/g, '"instance_id":"$1"');
  const instances = (JSON.parse(health) as { instances: Array<{ component: string; instance_id: string }> }).instances;
  return instances.find((i) => i.component === component)!.instance_id;
}

const workerArgs = (component: string, delayMs: number) => [
  '--model-name',
  MODEL,
  '--component',
  component,
  '--delay-ms',
  String(delayMs),
  '--simulate-kv-cache',
  '--kv-block-size',
  String(BLOCK),
  '--total-kv-blocks',
  '64',
  '--context-length',
  '40960',
];

/** Starts a request on `component`'s worker that runs until stopped (its prompt holds `blocks` KV blocks meanwhile). */
async function hold(url: string, component: string, blocks = 1): Promise<() => Promise<void>> {
  const abort = new AbortController();
  const body = { model: MODEL, prompt: Array.from({ length: blocks * BLOCK }, (_, i) => 500 + i), max_tokens: 30_000, stream: true };
  const res = post(url, '/v1/completions', body, { headers: { 'x-dynamo-worker-instance-id': await instanceOf(component) }, signal: abort.signal });
  const running = res.then((r) => r.text()).catch(() => undefined);
  return async () => {
    abort.abort();
    await running;
  };
}

beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!, { DYN_EVENT_PLANE: 'zmq' });
  deployment.sampleWorker(workerArgs('fast', 1));
  deployment.sampleWorker(workerArgs('slow', 25));
  const modes = ['round-robin', 'power-of-two', 'least-loaded'];
  const started = await Promise.all([
    ...modes.map((mode) => deployment.frontend(['--router-mode', mode])),
    deployment.frontend(['--router-mode', 'least-loaded', '--router-session-affinity-ttl-secs', '2', '--migration-limit', '3']),
    deployment.frontend(['--router-mode', 'least-loaded', '--router-session-affinity-ttl-secs', '60']),
    deployment.frontend([
      '--router-mode',
      'round-robin',
      '--router-session-affinity-ttl-secs',
      '60',
      '--router-session-affinity-mode',
      'soft',
      '--active-decode-blocks-threshold',
      '0.5',
    ]),
  ]);
  for (const [i, mode] of modes.entries()) fronts[mode] = started[i]!.url;
  fronts.affinity = started[3]!.url;
  fronts.affinityPeer = started[4]!.url;
  fronts.soft = started[5]!.url;
  for (const url of Object.values(fronts)) {
    await waitForModel(url, MODEL, 'fast', 1);
    await waitForModel(url, MODEL, 'slow', 1);
  }
  for (const component of ['fast', 'slow']) roleOf.set(await instanceOf(component), component);
}, 90_000);
afterAll(async () => {
  await deployment?.stop();
});

describe('power-of-two and least-loaded', () => {
  it('send the slow worker fewer requests than round-robin does', async () => {
    const counts: Record<string, Record<string, number>> = {};
    for (const mode of ['round-robin', 'power-of-two', 'least-loaded']) counts[mode] = await spread(fronts[mode]!, 48, 6);
    console.log(`requests per worker, 48 from 6 closed-loop clients: ${JSON.stringify(counts)}`);
    // Round-robin alternates whatever the load.
    expect(counts['round-robin']).toEqual({ fast: 24, slow: 24 });
    // The slow worker keeps its requests longer, so it has more in flight and is chosen less.
    for (const mode of ['power-of-two', 'least-loaded']) expect(counts[mode]!.slow ?? 0).toBeLessThan(16);
  }, 120_000);
});

describe('session affinity (--router-session-affinity-ttl-secs 2, least-loaded)', () => {
  it('keeps a session on its worker for 20 requests, busy or not, and lets it move once idle past the TTL', async () => {
    const url = fronts.affinity!;
    const session = { 'x-dynamo-session-id': 'chat-1' };
    const first = await served(url, {}, session);
    for (let i = 0; i < 19; i++) expect(await served(url, {}, session)).toBe(first);
    // Load the session's worker: least-loaded would now choose the other one.
    const stop = await hold(url, first);
    await new Promise((r) => setTimeout(r, 300));
    expect(await served(url, {}, session)).toBe(first);
    // Another session is not bound: it goes to the idle worker.
    const other = first === 'fast' ? 'slow' : 'fast';
    expect(await served(url, {}, { 'x-dynamo-session-id': 'chat-2' })).toBe(other);
    // Idle for longer than the TTL, the binding is gone: the next request goes to the idle worker.
    await new Promise((r) => setTimeout(r, 2_300));
    expect(await served(url, {}, session)).toBe(other);
    expect(await served(url, {}, session)).toBe(other);
    await stop();
  }, 90_000);

  it('refuses a request that names another worker than its session is bound to, and a session id past 256 bytes', async () => {
    const url = fronts.affinity!;
    const session = { 'x-dynamo-session-id': 'chat-3' };
    const bound = await served(url, {}, session);
    const elsewhere = await instanceOf(bound === 'fast' ? 'slow' : 'fast');
    const res = await post(
      url,
      '/v1/completions',
      { model: MODEL, prompt: 'x', max_tokens: 2 },
      { headers: { ...session, 'x-dynamo-worker-instance-id': elsewhere } },
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toBe(`session chat-3 is bound to worker ${await instanceOf(bound)}, not ${elsewhere}`);
    const long = await post(url, '/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 2 }, { headers: { 'x-dynamo-session-id': 's'.repeat(257) } });
    expect(long.status).toBe(400);
    expect(((await long.json()) as { message: string }).message).toBe('session affinity ID must not exceed 256 bytes');
  });
});

describe('session bindings shared between frontends (session_affinity_events)', () => {
  it("a session bound on one frontend goes to the same worker through another, even where that one's own choice differs", async () => {
    const [a, b] = [fronts.affinity!, fronts.affinityPeer!];
    const session = { 'x-dynamo-session-id': 'shared-1' };
    const bound = await served(a, {}, session);
    // Through B, least-loaded alone would now pick the other worker.
    const stop = await hold(b, bound);
    // Half a second for A's binding to reach B (it went out when A placed the request, and again when it ended).
    await new Promise((r) => setTimeout(r, 500));
    expect(await served(b)).toBe(bound === 'fast' ? 'slow' : 'fast');
    for (let i = 0; i < 5; i++) expect(await served(b, {}, session)).toBe(bound);
    await stop();
  }, 60_000);
});

describe('soft session affinity (--router-session-affinity-mode soft)', () => {
  it('leaves a busy worker, and the session follows where it went', async () => {
    const url = fronts.soft!;
    const session = { 'x-dynamo-session-id': 'soft-1' };
    const bound = await served(url, {}, session);
    const other = bound === 'fast' ? 'slow' : 'fast';
    // 40 of the bound worker's 64 blocks in use: past the 0.5 threshold.
    const stop = await hold(url, bound, 40);
    await waitFor('the session to leave its busy worker', async () => (await served(url, {}, session)) === other, 10_000);
    await stop();
    await waitFor('the worker to report its blocks free', async () => new Set(await Promise.all([served(url), served(url)])).size === 2, 10_000);
    for (let i = 0; i < 3; i++) expect(await served(url, {}, session)).toBe(other);
  }, 60_000);
});

describe('/busy_threshold', () => {
  const metric = async (url: string) => {
    const line = (await (await fetch(`${url}/metrics`)).text())
      .split('\n')
      .find((l) => l.startsWith(`dynamo_frontend_model_rejection_total{model="${MODEL}",endpoint="completions"}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  it('reads and sets the thresholds per model; a change applies to the next request', async () => {
    const url = fronts['round-robin']!;
    const get = async () => (await (await fetch(`${url}/busy_threshold`)).json()) as { thresholds: unknown[] };
    const unset = { model: MODEL, active_decode_blocks_threshold: null, active_prefill_tokens_threshold: null, active_prefill_tokens_threshold_frac: null };
    expect(await get()).toEqual({ thresholds: [unset] });
    expect(await (await post(url, '/busy_threshold', { model: MODEL })).json()).toEqual(unset);

    // 40 of the slow worker's 64 KV blocks in use.
    const stopSlow = await hold(url, 'slow', 40);
    // The slow worker reports 40 of 64 blocks in use; with no threshold it still gets every other request.
    await new Promise((r) => setTimeout(r, 500));
    expect(new Set(await Promise.all([served(url), served(url)]))).toEqual(new Set(['fast', 'slow']));

    const set = await post(url, '/busy_threshold', { model: MODEL, active_decode_blocks_threshold: 0.5 });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ ...unset, active_decode_blocks_threshold: 0.5 });
    for (let i = 0; i < 4; i++) expect(await served(url)).toBe('fast');

    // Both past it: 529, counted.
    const before = await metric(url);
    const stopFast = await hold(url, 'fast', 40);
    await waitFor(
      'the fast worker to report its blocks',
      async () => (await post(url, '/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 1 })).status === 529,
      10_000,
    );
    expect(await metric(url)).toBeGreaterThan(before);

    // Raised past use, both serve again (the value it does not give is kept).
    const raised = await post(url, '/busy_threshold', { model: MODEL, active_decode_blocks_threshold: 1, active_prefill_tokens_threshold: 100000 });
    expect(await raised.json()).toEqual({ ...unset, active_decode_blocks_threshold: 1, active_prefill_tokens_threshold: 100000 });
    expect(new Set(await Promise.all([served(url), served(url)]))).toEqual(new Set(['fast', 'slow']));
    await Promise.all([stopSlow(), stopFast()]);
  }, 60_000);

  it("answers stock's errors for a bad change", async () => {
    const url = fronts['round-robin']!;
    const call = async (body: unknown) => {
      const res = await post(url, '/busy_threshold', body);
      return { status: res.status, body: await res.json() };
    };
    expect(await call({ model: 'nope', active_decode_blocks_threshold: 0.5 })).toEqual({
      status: 404,
      body: { error: "Model 'nope' not found. Thresholds can only be set for discovered models." },
    });
    expect(await call({ model: 'nope' })).toMatchObject({ status: 200, body: { model: 'nope', active_decode_blocks_threshold: null } });
    expect(await call({ model: MODEL, active_decode_blocks_threshold: 1.5 })).toEqual({
      status: 400,
      body: { error: 'active_decode_blocks_threshold must be between 0.0 and 1.0, got 1.5' },
    });
    expect(await call({ model: MODEL, active_prefill_tokens_threshold_frac: -1 })).toEqual({
      status: 400,
      body: { error: 'active_prefill_tokens_threshold_frac must be a finite value greater than or equal to 0.0, got -1' },
    });
    expect(await call({ model: MODEL, active_prefill_tokens_threshold: -5 })).toMatchObject({
      status: 422,
      body: { error: expect.stringContaining('active_prefill_tokens_threshold') },
    });
    expect(await call({ active_decode_blocks_threshold: 0.5 })).toMatchObject({
      status: 422,
      body: { error: expect.stringContaining('missing field `model`') },
    });
  });

  it('is not served with DYN_DISABLE_FRONTEND_ADMIN_API', async () => {
    const { url } = await deployment.frontend([], { DYN_DISABLE_FRONTEND_ADMIN_API: '1' });
    expect((await fetch(`${url}/busy_threshold`)).status).toBe(404);
  });
});

describe('a session whose worker is killed', () => {
  it('moves to the worker left and stays there', async () => {
    const url = fronts.affinity!;
    const session = { 'x-dynamo-session-id': 'chat-kill' };
    deployment.sampleWorker(workerArgs('doomed', 1));
    await waitForModel(url, MODEL, 'doomed', 1);
    const doomed = await instanceOf('doomed');
    roleOf.set(doomed, 'doomed');
    const res = await post(
      url,
      '/v1/completions',
      { model: MODEL, prompt: 'x', max_tokens: 2 },
      { headers: { ...session, 'x-dynamo-worker-instance-id': doomed } },
    );
    expect(res.status).toBe(200);
    expect(await served(url, {}, session)).toBe('doomed');
    deployment.children.at(-1)!.child.kill('SIGKILL');
    // At once, before discovery notices: the request fails over (migration) and the session follows it.
    const moved = await served(url, {}, session);
    expect(['fast', 'slow']).toContain(moved);
    for (let i = 0; i < 5; i++) expect(await served(url, {}, session)).toBe(moved);
  }, 90_000);
});
