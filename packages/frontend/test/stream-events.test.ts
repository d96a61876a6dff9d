// The Rust path of a streamed answer (`StreamProcessor` reading the worker's bytes, `streamEvents`
// writing them) against the JavaScript path (frames decoded and postprocessed in JS,
// `streamAnswer` writing the chunks): the same worker bytes, read in the same pieces, give the
// client byte-identical responses.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  STREAM_ACCOUNT,
  STREAM_CLOSED,
  STREAM_END,
  STREAM_ENGINE_ERROR,
  STREAM_FINISHED,
  STREAM_OUTPUT,
  STREAM_REFUSED,
  STREAM_SENTINEL,
  STREAM_STARTED,
  STREAM_STRAY_CONTROL,
  STREAM_TOKENS_SHIFT,
  STREAM_UNSENT,
  STREAM_VIOLATION,
  STREAM_WORKER_ERROR,
} from '@dynamo/core';
import type { PreprocessedRequest } from '@dynamo/llm';
import { postprocessChoices, streamProcessor } from '@dynamo/llm/internal';
import { ReadFlag } from '@dynamo/runtime';
import { parseDataFrame, TwoPartDecoder, unwrapAnnotated, encodeTwoPartText, silentLog } from '@dynamo/runtime/internal';
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';

import { EventOutput } from '../src/openai/event-output.js';
import { type Answer, type EventsAnswer, streamAnswer, streamEvents } from '../src/openai/respond.js';
import { FrontendMetrics } from '../src/metrics.js';
import { seededRandom } from './support/seeded-random.js';
import { answerSettings, type Surface, useQwen3Tokenizer } from './support/stream-answer.js';

const IM_END = 151645;
const tokenizerOf = useQwen3Tokenizer();
const metrics = new FrontendMetrics('stream_events_test');

/** Serves one response with `write`, fetches it, returns its body. */
async function served(write: (reply: FastifyReply) => Promise<boolean>): Promise<string> {
  const server: Server = createServer((_req, res) => void write({ raw: res } as FastifyReply));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    return await res.text();
  } finally {
    server.close();
  }
}

function settings(surface: Surface, request: PreprocessedRequest, includeUsage: boolean) {
  return answerSettings(metrics, surface, request.token_ids.length, includeUsage);
}

/** The JavaScript path: each read's frames decoded, their items one batch, postprocessed, written by `streamAnswer`. */
async function jsPath(surface: Surface, request: PreprocessedRequest, reads: Buffer[], includeUsage: boolean): Promise<string> {
  async function* batches(): AsyncGenerator<unknown[]> {
    const decoder = new TwoPartDecoder();
    for (const read of reads) {
      const batch: unknown[] = [];
      let failure: Error | undefined;
      decoder.push(read, (frame) => {
        if (frame.header.length > 0 || failure) return;
        const parsed = parseDataFrame(frame.body);
        if (parsed.end) return;
        const item = unwrapAnnotated(parsed.data);
        if (item.kind === 'error') failure = item.error;
        else if (item.kind === 'data') batch.push(item.data);
      });
      if (batch.length > 0) yield batch;
      if (failure) throw failure;
    }
  }
  const answer: Answer = { ...settings(surface, request, includeUsage), deltas: postprocessChoices(tokenizerOf(), request, batches())[Symbol.asyncIterator]() };
  return served(async (reply) => streamAnswer(answer, reply, await answer.deltas.next(), silentLog));
}

/**
 * The Rust path: each read into the processor, its events written by `streamEvents`. As in the
 * runtime, a batch holds the events of every read so far; `readAhead` says how many more reads
 * arrive after a batch was formed and before its consumer handles it (a worker whose last frames
 * come right after its first).
 */
async function rustPath(surface: Surface, request: PreprocessedRequest, reads: Buffer[], includeUsage: boolean, readAhead: () => number): Promise<string> {
  const base = settings(surface, request, includeUsage);
  const output = new EventOutput(streamProcessor(tokenizerOf(), request, { surface, ...base.ids }), base.tracker, base.promptTokens);
  output.connect();
  async function* events(): AsyncGenerator<string[]> {
    const pending: string[] = [];
    let next = 0;
    let failure: Error | undefined;
    const readOne = () => {
      const flags = output.read(reads[next++]!);
      if (flags & ReadFlag.OUTPUT) pending.push(output.take());
      if (flags & ReadFlag.WORKER_ERROR) failure = new Error(output.problem);
    };
    for (;;) {
      while (pending.length === 0 && failure === undefined && next < reads.length) readOne();
      if (pending.length === 0) break;
      const batch = pending.splice(0);
      for (let n = readAhead(); n > 0 && failure === undefined && next < reads.length; n--) readOne();
      yield batch;
    }
    if (failure) throw failure;
  }
  const answer: EventsAnswer = { ...base, output, events: events()[Symbol.asyncIterator]() };
  return served(async (reply) => streamEvents(answer, reply, await answer.events.next(), silentLog));
}

const TEXTS = [
  'Hello! 你好，世界 🌍🚀 naïve café.',
  'Line one\nline "two"\twith \\ and \u0001 and </script> STOP after.',
  '🙂🙃😉😊😇🥰 END trailing',
  'def f(x):\n    return x * 2  # 注释',
];

/** A stock worker's bytes after its handshake: prologue, one data frame per chunk, maybe the end marker and sentinel. */
function workerBytes(chunks: unknown[], complete: boolean): Buffer {
  const frames = [encodeTwoPartText('{"error":null}', '')];
  for (const chunk of chunks) frames.push(encodeTwoPartText('', JSON.stringify({ data: { data: chunk }, complete_final: false })));
  if (complete) frames.push(encodeTwoPartText('', '{"complete_final":true}'), encodeTwoPartText('"sentinel"', ''));
  return Buffer.concat(frames);
}

describe('the Rust path of a streamed answer', () => {
  it("reads the Rust reader's flags as the runtime defines them", () => {
    const core = {
      STARTED: STREAM_STARTED,
      OUTPUT: STREAM_OUTPUT,
      END: STREAM_END,
      SENTINEL: STREAM_SENTINEL,
      VIOLATION: STREAM_VIOLATION,
      REFUSED: STREAM_REFUSED,
      WORKER_ERROR: STREAM_WORKER_ERROR,
      FINISHED: STREAM_FINISHED,
      ENGINE_ERROR: STREAM_ENGINE_ERROR,
      STRAY_CONTROL: STREAM_STRAY_CONTROL,
      UNSENT: STREAM_UNSENT,
      CLOSED: STREAM_CLOSED,
      ACCOUNT: STREAM_ACCOUNT,
    };
    expect(core).toEqual(ReadFlag);
    // The token count above the flags leaves them room.
    expect(2 ** STREAM_TOKENS_SHIFT).toBeGreaterThan(Math.max(...Object.values(ReadFlag)));
  });

  it("writes a worker's last events that arrive before its first were written (the finish right behind the first token)", async () => {
    const ids = Array.from(tokenizerOf().encodeSync('Hello there my friend', false));
    const first = workerBytes([{ token_ids: ids.slice(0, 1) }], false);
    const all = workerBytes(
      [
        { token_ids: ids.slice(0, 1) },
        {
          token_ids: ids.slice(1),
          finish_reason: 'length',
          completion_usage: { prompt_tokens: 3, completion_tokens: ids.length, total_tokens: ids.length + 3 },
        },
      ],
      true,
    );
    const reads = [all.subarray(0, first.length), all.subarray(first.length)];
    const request: PreprocessedRequest = {
      model: 'qwen3',
      token_ids: [1, 2, 3],
      eos_token_ids: [IM_END],
      stop_conditions: { stop_token_ids_hidden: [IM_END] },
      sampling_options: {},
    };
    const rust = await rustPath('chat', request, reads, true, () => 1);
    expect(rust).toContain('"delta":{"content":" there my friend"},"finish_reason":"length"');
    expect(rust).toBe(await jsPath('chat', request, reads, true));
  });

  it('writes what the JavaScript path writes, byte for byte, for the same worker bytes read in the same pieces, whenever they arrive', async () => {
    for (let seed = 1; seed <= 60; seed++) {
      const random = seededRandom(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
      const text = pick(TEXTS);
      const ids = Array.from(tokenizerOf().encodeSync(text, false));
      const chunks: Record<string, unknown>[] = [];
      for (let at = 0; at < ids.length; ) {
        const n = 1 + Math.floor(random() * 3);
        const run = ids.slice(at, at + n);
        at += n;
        chunks.push(random() < 0.2 ? { token_ids: run, text: tokenizerOf().decode(Uint32Array.from(run), false) } : { token_ids: run });
      }
      const ending = pick(['eos-token', 'eos', 'length', 'stop', 'cancelled', 'content_filter', 'error', 'none', 'cut']);
      if (ending === 'eos-token') chunks.push({ token_ids: [IM_END, 42] });
      else if (ending === 'error') chunks.push({ token_ids: [], finish_reason: { error: 'CUDA out of memory' } });
      else if (ending !== 'none' && ending !== 'cut')
        chunks.push({
          token_ids: [],
          finish_reason: ending,
          completion_usage: { prompt_tokens: 3, completion_tokens: ids.length, total_tokens: ids.length + 3, prompt_tokens_details: { cached_tokens: 2 } },
        });
      const bytes = workerBytes(chunks, ending !== 'cut');
      const reads: Buffer[] = [];
      // Sometimes a few large reads, as from a worker that sends many tokens at once.
      const large = random() < 0.25;
      for (let at = 0; at < bytes.length; ) {
        const n = large ? 1 + Math.floor(random() * (bytes.length / 2)) : random() < 0.5 ? 1 + Math.floor(random() * 40) : 1 + Math.floor(random() * 400);
        reads.push(bytes.subarray(at, at + n));
        at += n;
      }
      const surface: Surface = random() < 0.5 ? 'chat' : 'completions';
      const request: PreprocessedRequest = {
        model: 'qwen3',
        token_ids: [1, 2, 3],
        eos_token_ids: [IM_END],
        stop_conditions: { stop: random() < 0.5 ? ['STOP', 'END'] : [], stop_token_ids_hidden: [IM_END], min_tokens: random() < 0.2 ? 4 : null },
        sampling_options: { include_stop_str_in_output: random() < 0.3 },
      };
      const includeUsage = random() < 0.5;
      const js = await jsPath(surface, request, reads, includeUsage);
      const readAhead = random() < 0.5 ? () => 0 : () => (random() < 0.3 ? 1 + Math.floor(random() * 3) : 0);
      const rust = await rustPath(surface, request, reads, includeUsage, readAhead);
      expect(rust, `seed ${seed} (${surface}, ${ending}, ${reads.length} reads)`).toBe(js);
    }
  });
});
