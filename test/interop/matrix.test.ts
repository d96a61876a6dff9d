// The interop matrix: our frontend, workers and runtime paired with the real stock Dynamo 1.6.1
// release (its frontend, unified-backend sample engine, mocker, and workers on its Python bindings),
// each pairing on file + tcp, etcd + tcp and etcd + NATS (real servers). One deployment per setup
// runs every process at once; each test names its pairing. Skipped, never passed, without PyPI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '../../packages/runtime/test/harness/child.js';
import { waitFor } from '../../packages/runtime/test/harness/free-port.js';
import { stockPython } from '../../packages/runtime/test/harness/stock-dynamo.js';
import { modelDir, post, sseEvents } from '../../packages/frontend/test/support/stack.js';
import { type Frontend, InteropStack, listedModels, MATRIX_SETUPS } from './stack.js';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** INTEROP MATRIX SKIPPED: ${stock.skip} ***\n`);

/** Both sample engines stream token i+1 at position i: these characters, in order. */
const SAMPLE_TEXT = `"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_\`abcdefghijklmnopqrstuvwxyz{|}~`;
const USER = 'one two three four five';

/** The workers each frontend is paired with, by the model name they serve. */
interface Worker {
  name: string;
  model: () => string;
  /** The exact text of `n` tokens, when the engine's output is known. */
  text?: (n: number) => string;
}
const WORKERS: Worker[] = [
  { name: 'our dynamo-sample-engine', model: () => 'ts-sample', text: (n) => SAMPLE_TEXT.slice(0, n) },
  { name: 'examples/custom-engine', model: () => 'ts-echo' },
  { name: 'the stock sample engine', model: () => modelDir, text: (n) => SAMPLE_TEXT.slice(0, n) },
  { name: 'the stock mocker', model: () => 'stock-mocker' },
];

type Chunk = { choices: Array<{ delta?: { content?: string }; text?: string; finish_reason: string | null }>; usage?: { prompt_tokens: number; completion_tokens: number } };

describe.skipIf('skip' in stock).each(MATRIX_SETUPS)('interop matrix, $name', (setup) => {
  let stack: InteropStack;
  const frontends: Record<'stock' | 'our', Frontend> = {} as never;
  const workers = new Map<string, Child>();

  beforeAll(async () => {
    stack = await InteropStack.start(setup, (stock as { python: string }).python);
    workers.set('ts-sample', stack.ourSample('ts-sample', 'ts-sample', ['--delay-ms', '5'], { DYN_LOG: 'warn,engine=debug' }));
    workers.set('ts-echo', stack.customEngine('ts-echo', 'echo', ['--pause-ms', '5', '--tokens-per-chunk', '1']));
    workers.set('stock-sample', stack.stockSample(modelDir, 'sample', ['--delay', '0.005']));
    workers.set('stock-mocker', stack.stockMocker('stock-mocker'));
    [frontends.stock, frontends.our] = await Promise.all([stack.stockFrontend(['--migration-limit', '3']), stack.ourFrontend(['--migration-limit', '3'])]);
    const wanted = WORKERS.map((w) => w.model());
    for (const fe of Object.values(frontends)) {
      await waitFor(`the ${fe.name} frontend to list ${wanted.join(', ')}`, async () => ((listed) => wanted.every((m) => listed.includes(m)))(await listedModels(fe.url)), 180_000);
    }
  }, 400_000);
  afterAll(() => stack?.stop());

  const pairings = (['stock', 'our'] as const).flatMap((frontend) => WORKERS.map((worker) => ({ frontend, worker, label: `${frontend} frontend → ${worker.name}` })));

  for (const { frontend, worker, label } of pairings) describe(label, () => {
    it('chat, whole and streamed with usage', async () => {
      const url = frontends[frontend].url;
      const body = { model: worker.model(), messages: [{ role: 'user', content: USER }], max_tokens: 8 };
      const res = await post(url, '/v1/chat/completions', body);
      expect(res.status, await res.clone().text()).toBe(200);
      const whole = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { prompt_tokens: number; completion_tokens: number } };
      expect(whole.choices[0]!.finish_reason).toBe('length');
      expect(whole.choices[0]!.message.content.length).toBeGreaterThan(0);
      if (worker.text) expect(whole.choices[0]!.message.content).toBe(worker.text(8));
      expect(whole.usage.completion_tokens).toBe(8);
      // The Qwen3 chat template around the five-word message.
      expect(whole.usage.prompt_tokens).toBe(13);

      const events = await sseEvents(await post(url, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } }));
      expect(events.at(-1)).toBe('[DONE]');
      const chunks = events.slice(0, -1) as Chunk[];
      const text = chunks.flatMap((c) => c.choices).map((c) => c.delta?.content ?? '').join('');
      expect(text.length).toBeGreaterThan(0);
      if (worker.text) expect(text).toBe(worker.text(8));
      expect(chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean)).toEqual(['length']);
      expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 13, completion_tokens: 8 });
    });

    it('completions, whole and streamed, text and token prompts', async () => {
      const url = frontends[frontend].url;
      const res = await post(url, '/v1/completions', { model: worker.model(), prompt: USER, max_tokens: 5 });
      expect(res.status, await res.clone().text()).toBe(200);
      const whole = (await res.json()) as { choices: Array<{ text: string; finish_reason: string }>; usage: { prompt_tokens: number; completion_tokens: number } };
      expect(whole.choices[0]!.finish_reason).toBe('length');
      if (worker.text) expect(whole.choices[0]!.text).toBe(worker.text(5));
      else expect(whole.choices[0]!.text.length).toBeGreaterThan(0);
      expect(whole.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 5 });

      const events = await sseEvents(await post(url, '/v1/completions', { model: worker.model(), prompt: [9707, 1879, 374, 2244], max_tokens: 3, stream: true }));
      expect(events.at(-1)).toBe('[DONE]');
      const chunks = events.slice(0, -1) as Chunk[];
      const text = chunks.flatMap((c) => c.choices).map((c) => c.text ?? '').join('');
      if (worker.text) expect(text).toBe(worker.text(3));
      else expect(text.length).toBeGreaterThan(0);
      expect(chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean)).toEqual(['length']);
    });

    // Only an engine with known output has a stop string that is sure to come.
    if (worker.text) it('a stop string ends the output early with finish_reason stop', async () => {
      const url = frontends[frontend].url;
      const events = await sseEvents(await post(url, '/v1/chat/completions', { model: worker.model(), messages: [{ role: 'user', content: USER }], max_tokens: 20, stop: ['&'], stream: true }));
      const chunks = events.slice(0, -1) as Chunk[];
      expect(chunks.flatMap((c) => c.choices).map((c) => c.delta?.content ?? '').join('')).toBe('"#$%');
      expect(chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean)).toEqual(['stop']);
    });
  });
});
