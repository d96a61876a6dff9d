// Migration as stock Dynamo 1.6.1 does it, with replaying workers that fail on demand (each fails a
// request it serves from the start, and finishes one resumed from another worker): a worker killed
// with its last token inside a multi-byte character, a worker that goes silent (the response
// timeout, DYN_HTTP_BACKEND_STREAM_TIMEOUT_SECS), a worker with no room (WorkerOverloaded), and
// the max sequence length past which a request is not migrated any more.
import { type Tokenizer, LocalModel } from '@dynamo/llm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { REPLAY_CASES } from '@dynamo/testing/replay-cases';
import { Deployment, modelDir, post, SETUPS, sseEvents, waitForModel } from '@dynamo/testing/frontend-stack';

const CASE = REPLAY_CASES.findIndex((c) => c.name === 'multi-byte text');
const TEXT = REPLAY_CASES[CASE]!.text;
const messages = [{ role: 'user', content: 'Say something.' }];

type Chunk = { choices?: Array<{ delta?: { content?: string }; finish_reason?: string | null }>; error?: { message: string; type: string; code: number } };
const textOf = (events: Array<Chunk | '[DONE]'>) => events.map((e) => (e === '[DONE]' ? '' : (e.choices?.[0]?.delta?.content ?? ''))).join('');
const counter = async (url: string, name: string, model: string) =>
  Number((await (await fetch(`${url}/metrics`)).text()).match(new RegExp(`^dynamo_frontend_${name}\\{model="${model}"\\} (\\d+)`, 'm'))?.[1] ?? 0);

describe('migration as stock 1.6.1 does it (file + tcp)', () => {
  let deployment: Deployment;
  let tokenizer: Tokenizer;
  /** The token after which the seam falls inside a character. */
  let seam = 0;
  const fe = { migrate: '', none: '', short: '' };
  const replay = (model: string, args: string[]) => deployment.replayWorker(model, ['--resume', '--delay-ms', '10', ...args]);

  beforeAll(async () => {
    tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
    const ids = Array.from(tokenizer.encodeSync(TEXT, false));
    // The first point where the text so far ends inside a character (its bytes split over tokens).
    seam = ids.findIndex((_, i) => tokenizer.decode(Uint32Array.from(ids.slice(0, i + 1)), false).endsWith('\ufffd')) + 1;
    deployment = await Deployment.start(SETUPS[0]!, { DYN_FILE_KV_TTL_SECS: '2' });
    for (let i = 0; i < 2; i++) replay('seam', ['--crash-at', String(seam)]);
    for (let i = 0; i < 2; i++) replay('silent', ['--stall-at', '3']);
    replay('busy', ['--overloaded']);
    replay('busy', []);
    const timeout = { DYN_HTTP_BACKEND_STREAM_TIMEOUT_SECS: '1' };
    [fe.migrate, fe.none, fe.short] = (
      await Promise.all([
        deployment.frontend(['--migration-limit', '1'], timeout),
        deployment.frontend(['--migration-limit', '0'], timeout),
        deployment.frontend(['--migration-limit', '1', '--migration-max-seq-len', '5'], timeout),
      ])
    ).map((f) => f.url) as [string, string, string];
    for (const url of Object.values(fe)) for (const model of ['seam', 'silent', 'busy']) await waitForModel(url, model, model, 2, 60_000);
  }, 120_000);
  afterAll(() => deployment.stop());

  it('a stream whose worker dies with its last token inside a multi-byte character comes out byte-identical to an unbroken one', async () => {
    expect(tokenizer.decode(Uint32Array.from(Array.from(tokenizer.encodeSync(TEXT, false)).slice(0, seam)), false).endsWith('\ufffd')).toBe(true);
    const events = (await sseEvents(await post(fe.migrate, '/v1/chat/completions', { model: 'seam', messages, seed: CASE, stream: true }))) as Array<
      Chunk | '[DONE]'
    >;
    expect(textOf(events)).toBe(TEXT);
    expect(Buffer.from(textOf(events))).toEqual(Buffer.from(TEXT));
    expect(events.at(-1)).toBe('[DONE]');
    expect(await counter(fe.migrate, 'model_migration_total', 'seam')).toBe(1);
  });

  it('a worker that goes silent past the response timeout is given up, and the stream goes on from another', async () => {
    const started = Date.now();
    const events = (await sseEvents(await post(fe.migrate, '/v1/chat/completions', { model: 'silent', messages, seed: CASE, stream: true }))) as Array<
      Chunk | '[DONE]'
    >;
    expect(textOf(events)).toBe(TEXT);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    // Without a migration budget the client is told: 504, in stock's stream frame or as the status.
    const stalled = (await sseEvents(await post(fe.none, '/v1/chat/completions', { model: 'silent', messages, seed: CASE, stream: true }))) as Array<
      Chunk | '[DONE]'
    >;
    expect((stalled.at(-2) as Chunk).error).toMatchObject({ type: 'timeout_error', code: 504 });
    expect(stalled.at(-1)).toBe('[DONE]');
    const whole = await post(fe.none, '/v1/chat/completions', { model: 'silent', messages, seed: CASE });
    expect(whole.status).toBe(504);
    expect(((await whole.json()) as { message: string }).message).toMatch(/sent nothing for 1 s/);
  });

  it('a worker with no room sends the request to another, from the migration budget; without one the client gets 529', async () => {
    const asks = Array.from({ length: 4 }, () => post(fe.migrate, '/v1/chat/completions', { model: 'busy', messages, seed: CASE }));
    for (const res of await Promise.all(asks)) {
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe(TEXT);
    }
    expect(await counter(fe.migrate, 'model_migration_total', 'busy')).toBeGreaterThanOrEqual(1);
    const statuses = await Promise.all(
      Array.from({ length: 4 }, async () => (await post(fe.none, '/v1/chat/completions', { model: 'busy', messages, seed: CASE })).status),
    );
    expect(statuses).toContain(529);
    expect(statuses).toContain(200);
  });

  it('a request past --migration-max-seq-len is not migrated any more, and is counted', async () => {
    const events = (await sseEvents(await post(fe.short, '/v1/chat/completions', { model: 'silent', messages, seed: CASE, stream: true }))) as Array<
      Chunk | '[DONE]'
    >;
    expect((events.at(-2) as Chunk).error).toMatchObject({ code: 504 });
    expect(await counter(fe.short, 'model_migration_max_seq_len_exceeded_total', 'silent')).toBe(1);
    expect(await counter(fe.short, 'model_migration_total', 'silent')).toBe(0);
  });
});
