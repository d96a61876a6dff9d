import { rmSync } from 'node:fs';
import { InvalidArgument } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type ChoiceDelta, LocalModel, postprocess, type PreprocessedRequest, type TextDelta, type Tokenizer } from '../src/index.js';
import { postprocessBatches, postprocessChoices } from '../src/internal.js';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

let dir: string;
let tokenizer: Tokenizer;
const IM_END = 151645;

beforeAll(async () => {
  dir = qwen3ModelDir();
  tokenizer = await (await LocalModel.load(dir)).tokenizer();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function request(overrides: Partial<PreprocessedRequest> = {}): PreprocessedRequest {
  return { model: 'qwen3', token_ids: [1, 2, 3], eos_token_ids: [IM_END], stop_conditions: { stop_token_ids_hidden: [IM_END] }, ...overrides };
}

async function* chunks(items: unknown[], seen?: { closed: boolean }): AsyncGenerator<unknown> {
  try {
    for (const item of items) yield item;
  } finally {
    if (seen) seen.closed = true;
  }
}

async function collect(req: PreprocessedRequest, items: unknown[], seen?: { closed: boolean }): Promise<TextDelta[]> {
  const out: TextDelta[] = [];
  for await (const delta of postprocess(tokenizer, req, chunks(items, seen))) out.push(delta);
  return out;
}

const ids = (text: string) => Array.from(tokenizer.encodeSync(text, false));

describe('postprocess', () => {
  it('turns token chunks into text deltas and passes the engine finish reason through', async () => {
    const [a, b, c] = [ids('Hello'), ids(' wonderful'), ids(' world')];
    const out = await collect(request(), [
      { token_ids: a },
      { token_ids: b },
      { token_ids: c, finish_reason: 'length', completion_usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } },
    ]);
    expect(out.map((d) => d.text).join('')).toBe('Hello wonderful world');
    expect(out.at(-1)).toMatchObject({
      finishReason: 'length',
      openaiFinishReason: 'length',
      completionTokens: a.length + b.length + c.length,
      usage: { total_tokens: 6 },
    });
  });

  it('ends at EOS without rendering it and closes the engine stream', async () => {
    const seen = { closed: false };
    const out = await collect(request(), [{ token_ids: [...ids('Done.'), IM_END, ...ids(' extra')] }, { token_ids: ids(' never') }], seen);
    expect(out.map((d) => d.text).join('')).toBe('Done.');
    expect(out.at(-1)).toMatchObject({ finishReason: 'eos', openaiFinishReason: 'stop' });
    expect(seen.closed).toBe(true);
  });

  it('stops at a stop string across chunks, hidden by default and included on request', async () => {
    const items = ids('The answer is 42. END here').map((id) => ({ token_ids: [id] }));
    const hidden = await collect(request({ stop_conditions: { stop: ['. END'], stop_token_ids_hidden: [IM_END] } }), items);
    expect(hidden.map((d) => d.text).join('')).toBe('The answer is 42');
    expect(hidden.at(-1)).toMatchObject({ finishReason: 'stop', stopReason: '. END' });
    const included = await collect(request({ stop_conditions: { stop: ['. END'] }, sampling_options: { include_stop_str_in_output: true } }), items);
    expect(included.map((d) => d.text).join('')).toBe('The answer is 42. END');
  });

  it('maps abort to cancelled and error objects to an error finish', async () => {
    const cancelled = await collect(request(), [{ token_ids: ids('Hi') }, { token_ids: [], finish_reason: 'abort' }]);
    expect(cancelled.at(-1)).toMatchObject({ finishReason: 'cancelled', openaiFinishReason: 'stop' });
    const failed = await collect(request(), [{ token_ids: ids('Hi'), finish_reason: { error: 'GPU fell over' } }]);
    expect(failed.at(-1)).toMatchObject({ finishReason: 'error', error: 'GPU fell over', text: 'Hi' });
  });

  it('uses text the engine already decoded', async () => {
    const out = await collect(request(), [
      { token_ids: [9], text: 'pre-' },
      { token_ids: [10], text: 'decoded', finish_reason: 'stop' },
    ]);
    expect(out.map((d) => d.text).join('')).toBe('pre-decoded');
  });

  it('names a malformed engine chunk', async () => {
    const err = await collect(request(), [{ token_ids: ids('ok') }, { token_ids: [-1] }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/^engine output chunk 1: token_ids\.0: /);
    const bad = await collect(request(), [{ token_ids: [1], finish_reason: 'exploded' }]).catch((e: unknown) => e);
    expect((bad as Error).message).toContain('engine output chunk 0: finish_reason');
  });
});

describe('postprocessBatches', () => {
  async function collectBatches(req: PreprocessedRequest, batches: unknown[][], seen?: { closed: boolean }): Promise<TextDelta[]> {
    const out: TextDelta[] = [];
    for await (const delta of postprocessBatches(tokenizer, req, chunks(batches, seen) as AsyncIterable<unknown[]>)) out.push(delta);
    return out;
  }

  it('gives one delta per batch with the text and token ids of all its chunks', async () => {
    const text = 'Streaming ünïcödé 数据 in batches';
    const perToken = ids(text).map((id) => ({ token_ids: [id] }));
    const batches = [perToken.slice(0, 3), perToken.slice(3, 9), [...perToken.slice(9), { token_ids: [], finish_reason: 'length' }]];
    const out = await collectBatches(request(), batches);
    expect(out).toHaveLength(3);
    expect(out.map((d) => d.text).join('')).toBe(text);
    expect(out.flatMap((d) => d.tokenIds)).toEqual(ids(text));
    expect(out.at(-1)).toMatchObject({ finishReason: 'length', completionTokens: ids(text).length });
    // The same stream read chunk by chunk gives the same text.
    expect((await collect(request(), perToken)).map((d) => d.text).join('')).toBe(text);
  });

  it('stops inside a batch at a stop string or EOS, dropping the rest and closing the source', async () => {
    const items = ids('The answer is 42. END here').map((id) => ({ token_ids: [id] }));
    const seen = { closed: false };
    const out = await collectBatches(request({ stop_conditions: { stop: ['. END'] } }), [items, [{ token_ids: ids(' later') }]], seen);
    expect(out).toEqual([expect.objectContaining({ text: 'The answer is 42', finishReason: 'stop', stopReason: '. END' })]);
    expect(seen.closed).toBe(true);
    const eos = await collectBatches(request(), [[{ token_ids: ids('Done.') }, { token_ids: [IM_END] }, { token_ids: ids(' extra') }]]);
    expect(eos).toEqual([expect.objectContaining({ text: 'Done.', finishReason: 'eos' })]);
  });

  it('keeps engine text, usage and an error finish that arrive inside a batch', async () => {
    const out = await collectBatches(request(), [
      [
        { token_ids: ids('Hi') },
        { token_ids: [9], text: ' pre' },
        { token_ids: ids('!'), finish_reason: { error: 'GPU fell over' }, completion_usage: { prompt_tokens: 3, completion_tokens: 4 } },
      ],
    ]);
    expect(out).toEqual([
      expect.objectContaining({ text: 'Hi pre!', finishReason: 'error', error: 'GPU fell over', usage: { prompt_tokens: 3, completion_tokens: 4 } }),
    ]);
  });

  it('names a malformed chunk by its index in the whole stream', async () => {
    const err = await collectBatches(request(), [
      [{ token_ids: [1] }, { token_ids: [2] }],
      [{ token_ids: [3] }, { token_ids: 'x' }],
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/^engine output chunk 3: token_ids: /);
  });
});

describe('postprocessChoices', () => {
  async function* batches(items: unknown[][], seen?: { closed: boolean }): AsyncGenerator<unknown[]> {
    try {
      for (const item of items) yield item;
    } finally {
      if (seen) seen.closed = true;
    }
  }
  const run = async (req: PreprocessedRequest, items: unknown[][], seen?: { closed: boolean }) => {
    const out: ChoiceDelta[] = [];
    for await (const delta of postprocessChoices(tokenizer, req, batches(items, seen))) out.push(delta);
    return out;
  };
  const textOf = (deltas: ChoiceDelta[], index: number) =>
    deltas
      .filter((d) => d.index === index)
      .map((d) => d.text)
      .join('');

  it('detokenizes and stops interleaved choices each on its own, tagged with their index', async () => {
    const [crab, hello] = [ids('Hi 🦀!'), ids('Hello world')];
    const req = request({ sampling_options: { n: 2 }, stop_conditions: { stop: ['world'] } });
    // The crab's bytes arrive in pieces, between the other choice's tokens.
    const items = [
      [
        { token_ids: crab.slice(0, 2), index: 0 },
        { token_ids: hello.slice(0, 1), index: 1 },
      ],
      [{ token_ids: crab.slice(2), index: 0, finish_reason: 'eos' }],
      [{ token_ids: hello.slice(1), index: 1 }],
    ];
    const seen = { closed: false };
    const deltas = await run(req, items, seen);
    expect(textOf(deltas, 0)).toBe('Hi 🦀!');
    expect(textOf(deltas, 1)).toBe('Hello ');
    expect(deltas.filter((d) => d.finishReason).map((d) => [d.index, d.finishReason])).toEqual([
      [0, 'eos'],
      [1, 'stop'],
    ]);
    // Both finished: the engine is told to stop.
    expect(seen.closed).toBe(true);
  });

  it('fails naming a chunk whose index is not below n', async () => {
    const req = request({ sampling_options: { n: 2 } });
    await expect(run(req, [[{ token_ids: [1], index: 2 }]])).rejects.toThrow(/a chunk for choice 2, but the request asked for n = 2 choices/);
  });

  it("ends each unfinished choice when the engine's stream ends, releasing what it held", async () => {
    const crab = ids(' 🦀');
    expect(crab.length).toBeGreaterThan(1);
    const deltas = await run(request({ sampling_options: { n: 2 } }), [[{ token_ids: crab.slice(0, 1), index: 1 }]]);
    expect(new Set(deltas.map((d) => d.index))).toEqual(new Set([1]));
    expect(textOf(deltas, 1)).toBe(' \ufffd');
  });
});

describe('log probabilities', () => {
  it("keeps each token's log probability and alternatives, with their decoded text and bytes, when the request asked", async () => {
    const crab = ids(' 🦀');
    const req = request({ output_options: { logprobs: 2 } });
    const chunk = {
      token_ids: crab,
      log_probs: crab.map((_, i) => -0.5 - i),
      top_logprobs: crab.map((id, i) => [
        { rank: 1, token_id: id, logprob: -0.5 - i },
        { rank: 2, token_id: 785, token: 'The', bytes: [84, 104, 101], logprob: -2 },
      ]),
    };
    const [delta] = await collect(req, [chunk, { token_ids: [], finish_reason: 'length' }]);
    const entries = delta!.logprobs!;
    expect(entries.map((e) => e.tokenId)).toEqual(crab);
    expect(entries.map((e) => e.logprob)).toEqual(crab.map((_, i) => -0.5 - i));
    // Alone, each byte token of the crab decodes lossily, as stock names them.
    for (const entry of entries) {
      expect(entry.token).toContain('\ufffd');
      expect(entry.bytes).toEqual(Array.from(Buffer.from(entry.token)));
      expect(entry.top[0]).toMatchObject({ tokenId: entry.tokenId, token: entry.token, logprob: entry.logprob });
      expect(entry.top[1]).toEqual({ tokenId: 785, token: 'The', logprob: -2, bytes: [84, 104, 101] });
    }
    // Not asked for: not kept.
    const [plain] = await collect(request(), [chunk, { token_ids: [], finish_reason: 'length' }]);
    expect(plain!.logprobs).toBeUndefined();
  });

  it('names a skipped special token "" with no bytes', async () => {
    const [delta] = await collect(request({ output_options: { logprobs: 0 }, stop_conditions: {} }), [
      { token_ids: [IM_END], log_probs: [-0.1], finish_reason: 'length' },
    ]);
    expect(delta!.logprobs).toEqual([{ tokenId: IM_END, token: '', logprob: -0.1, bytes: null, top: [] }]);
  });
});
