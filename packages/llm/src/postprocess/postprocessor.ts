import { Detokenizer, type DetokenizerOptions, type DetokenizerStep, StreamProcessor, type Tokenizer } from '@dynamo/core';
import { InvalidArgument } from '@dynamo/runtime';
import { z } from 'zod';

import type { PreprocessedRequest } from '../preprocess/preprocessed-request.js';

/** Dynamo's finish reasons as engines send them (`abort` is an alias of `cancelled`). */
const FinishReasonSchema = z.union([z.enum(['eos', 'length', 'stop', 'cancelled', 'abort', 'content_filter']), z.looseObject({ error: z.string() })]);

/** One of the most likely tokens at a position, as an engine lists it in `top_logprobs`. */
const TopLogprobSchema = z.looseObject({
  rank: z.number().int().nullish(),
  token_id: z.number().int().nonnegative(),
  token: z.string().nullish(),
  logprob: z.number(),
  bytes: z.array(z.number().int().min(0).max(255)).nullish(),
});

/** One chunk an engine streams back (`LLMEngineOutput`): new token ids, maybe text, maybe the end. */
export const EngineOutputSchema = z.looseObject({
  token_ids: z.array(z.number().int().nonnegative()).default([]),
  /** Which of the request's `n` choices the chunk belongs to (0 when missing). */
  index: z.number().int().nonnegative().nullish(),
  text: z.string().nullish(),
  /** The log probability of each of `token_ids`. */
  log_probs: z.array(z.number()).nullish(),
  /** Per token of `token_ids`, the most likely tokens at its position. */
  top_logprobs: z.array(z.array(TopLogprobSchema)).nullish(),
  finish_reason: FinishReasonSchema.nullish(),
  completion_usage: z
    .looseObject({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int().optional() })
    .nullish(),
});
export type EngineOutput = z.input<typeof EngineOutputSchema>;

/** An alternative token at a position, with its log probability. */
export interface TopLogprob {
  tokenId: number;
  /** The token alone, decoded (lossy, with U+FFFD, when it is part of a character). */
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes (the engine's when it sent them); null for an empty token. */
  bytes: number[] | null;
}

/** A generated token's log probability and the alternatives the engine reported at its position. */
export interface TokenLogprob extends TopLogprob {
  top: TopLogprob[];
}

/** A postprocessed chunk: the text it adds, and on the last one why generation finished. */
export interface TextDelta {
  text: string;
  /** The chunk's token ids, as the engine sent them. */
  tokenIds: number[];
  /** Per token, when the request asked for log probabilities and the engine sent them. */
  logprobs?: TokenLogprob[];
  /** Set on the last delta: Dynamo's reason. */
  finishReason?: 'eos' | 'length' | 'stop' | 'cancelled' | 'content_filter' | 'error';
  /** The OpenAI finish reason (`stop`, `length`, `content_filter`). */
  openaiFinishReason?: 'stop' | 'length' | 'content_filter';
  /** The stop string or stop token id that ended the output. */
  stopReason?: string | number;
  /** The engine's error message when it finished with an error. */
  error?: string;
  /** Generated tokens so far. */
  completionTokens: number;
  /** The engine's usage, when it reported one. */
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens?: number | undefined };
}

type EngineChunk = z.output<typeof EngineOutputSchema>;

/**
 * The common chunk (token ids, maybe text, no finish reason or usage) checked by hand: zod per
 * token cost about as much as detokenizing it. Anything else, including every malformed chunk,
 * goes through {@link EngineOutputSchema}, which names what is wrong.
 */
function plainChunk(raw: unknown): EngineChunk | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const chunk = raw as Record<string, unknown>;
  const ids = chunk.token_ids;
  if (!Array.isArray(ids) || chunk.finish_reason != null || chunk.completion_usage != null || chunk.log_probs != null || chunk.top_logprobs != null)
    return undefined;
  if (chunk.text != null && typeof chunk.text !== 'string') return undefined;
  for (const id of ids) if (!Number.isSafeInteger(id) || (id as number) < 0) return undefined;
  return chunk as EngineChunk;
}

function toOpenai(reason: NonNullable<TextDelta['finishReason']>): NonNullable<TextDelta['openaiFinishReason']> {
  return reason === 'length' ? 'length' : reason === 'content_filter' ? 'content_filter' : 'stop';
}

/** A delta being built from one batch of chunks. */
interface Draft {
  text: string;
  tokenIds: number[];
  logprobs?: TokenLogprob[];
  usage?: TextDelta['usage'];
}

/** How a request's output stops, for the detokenizer (the frontend stops even when the engine does not). */
export function stopOptions(request: PreprocessedRequest): DetokenizerOptions {
  const stopConditions = request.stop_conditions ?? {};
  return {
    stop: stopConditions.stop ?? [],
    includeStopStrInOutput: request.sampling_options?.include_stop_str_in_output ?? false,
    // Client stop_token_ids end the output like EOS does; visible ones are rendered first.
    stopTokenIdsHidden: [...(stopConditions.stop_token_ids_hidden ?? request.eos_token_ids ?? []), ...(stopConditions.stop_token_ids ?? [])],
    stopTokenIdsVisible: stopConditions.stop_token_ids_visible ?? [],
    eosTokenIds: request.eos_token_ids ?? [],
    minTokens: stopConditions.min_tokens ?? 0,
    skipSpecialTokens: request.output_options?.skip_special_tokens ?? false,
  };
}

/** What the events of a streamed choice name: the API, and the response's id, creation time and model. */
export interface EventIds {
  surface: 'chat' | 'completions';
  id: string;
  created: number;
  model: string;
}

/**
 * The Rust path of one streamed choice of `request` (see `@dynamo/core`'s `StreamProcessor`):
 * the worker's call-home bytes in, the OpenAI events out, with the same stops, finish reasons
 * and text as {@link OutputPostprocessor}.
 */
export function streamProcessor(tokenizer: Tokenizer, request: PreprocessedRequest, ids: EventIds): StreamProcessor {
  return new StreamProcessor(tokenizer, { stop: stopOptions(request), ...ids });
}

const utf8 = new TextEncoder();
const bytesOf = (token: string): number[] | null => (token === '' ? null : Array.from(utf8.encode(token)));

/**
 * One request's output, postprocessed synchronously: incremental detokenization (one call into
 * Rust per chunk), stop strings and stop token ids (the frontend stops even when the
 * engine does not), and finish reasons. {@link postprocess} and {@link postprocessBatches} drive
 * it over a stream.
 */
export class OutputPostprocessor {
  readonly #detokenizer: Detokenizer;
  readonly #tokenizer: Tokenizer;
  /** Whether chunks' log probabilities are kept (`output_options.logprobs` is set). */
  readonly #logprobs: boolean;
  readonly #skipSpecialTokens: boolean;
  #completionTokens = 0;
  #index = 0;
  #finished = false;

  constructor(tokenizer: Tokenizer, request: PreprocessedRequest) {
    this.#tokenizer = tokenizer;
    this.#logprobs = request.output_options?.logprobs != null;
    // Log-probability tokens are decoded as stock does: special tokens skipped unless asked.
    this.#skipSpecialTokens = request.output_options?.skip_special_tokens ?? true;
    this.#detokenizer = new Detokenizer(tokenizer, stopOptions(request));
  }

  /** True once a delta carried the finish reason: nothing more is taken. */
  get finished(): boolean {
    return this.#finished;
  }

  /**
   * Takes chunks that arrived together and returns the one delta they add (their text joined),
   * or undefined when they add nothing. Throws `InvalidArgument` naming a malformed chunk.
   */
  push(chunks: readonly unknown[]): TextDelta | undefined {
    if (this.#finished) return undefined;
    const draft: Draft = { text: '', tokenIds: [] };
    for (const raw of chunks) {
      const chunk = this.#validate(raw);
      if (this.#logprobs && chunk.log_probs) this.#addLogprobs(draft, chunk);
      // One step per chunk, not per run of chunks: where a stop string ends the output, the
      // token count then does not depend on how the chunks were batched.
      const end = this.#feed(draft, chunk.token_ids, chunk.text ?? undefined, chunk.finish_reason, chunk.completion_usage ?? undefined);
      if (end) return end;
    }
    if (draft.text === '' && draft.tokenIds.length === 0) return undefined;
    return this.#delta(draft);
  }

  #delta(draft: Draft): TextDelta {
    return {
      text: draft.text,
      tokenIds: draft.tokenIds,
      completionTokens: this.#completionTokens,
      ...(draft.logprobs ? { logprobs: draft.logprobs } : {}),
      ...(draft.usage ? { usage: draft.usage } : {}),
    };
  }

  /**
   * A chunk's log probabilities, one entry per token that has one, with every token string
   * (the chosen ones and alternatives the engine did not name) decoded in one call.
   */
  #addLogprobs(draft: Draft, chunk: EngineChunk): void {
    const logProbs = chunk.log_probs ?? [];
    const count = Math.min(logProbs.length, chunk.token_ids.length);
    const tops = chunk.top_logprobs ?? [];
    const ids: number[] = chunk.token_ids.slice(0, count);
    for (let i = 0; i < count; i++) for (const alt of tops[i] ?? []) if (alt.token == null) ids.push(alt.token_id);
    const names = this.#tokenizer.decodeEach(Uint32Array.from(ids), this.#skipSpecialTokens);
    let next = count;
    const entries = (draft.logprobs ??= []);
    for (let i = 0; i < count; i++) {
      const token = names[i] ?? '';
      const top = (tops[i] ?? []).map((alt) => {
        const name = alt.token ?? names[next++] ?? '';
        return { tokenId: alt.token_id, token: name, logprob: alt.logprob, bytes: alt.bytes ?? bytesOf(name) };
      });
      entries.push({ tokenId: chunk.token_ids[i]!, token, logprob: logProbs[i]!, bytes: bytesOf(token), top });
    }
  }

  /** The stream ended without a finish reason: what was held back, if anything. */
  end(): TextDelta | undefined {
    if (this.#finished) return undefined;
    this.#finished = true;
    const tail = this.#detokenizer.finish();
    return tail.text === '' ? undefined : { text: tail.text, tokenIds: [], completionTokens: this.#completionTokens };
  }

  #validate(raw: unknown): EngineChunk {
    const index = this.#index++;
    const plain = plainChunk(raw);
    if (plain) return plain;
    const parsed = EngineOutputSchema.safeParse(raw);
    if (!parsed.success) {
      throw new InvalidArgument(`engine output chunk ${index}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'chunk'}: ${i.message}`).join('; ')}`);
    }
    return parsed.data;
  }

  /** Feeds ids (and the engine's text) into the draft; returns the final delta if the output ended. */
  #feed(draft: Draft, ids: number[], engineText: string | undefined, reason: EngineChunk['finish_reason'], usage?: TextDelta['usage']): TextDelta | undefined {
    const pushed = this.#detokenizer.push(Uint32Array.from(ids), engineText);
    const step: DetokenizerStep = typeof pushed === 'string' ? { text: pushed } : pushed;
    this.#completionTokens += ids.length;
    draft.text += step.text;
    for (const id of ids) draft.tokenIds.push(id);
    if (usage) draft.usage = usage;
    if (step.stop) {
      this.#finished = true;
      return {
        ...this.#delta(draft),
        finishReason: step.stop === 'eos' ? 'eos' : 'stop',
        openaiFinishReason: 'stop',
        ...(step.stop === 'eos' ? {} : { stopReason: step.stopReason! }),
      };
    }
    if (reason == null) return undefined;
    this.#finished = true;
    const tail = this.#detokenizer.finish();
    draft.text += tail.text;
    if (typeof reason === 'object') return { ...this.#delta(draft), finishReason: 'error', openaiFinishReason: 'stop', error: reason.error };
    const finishReason = tail.stop ? 'stop' : reason === 'abort' ? 'cancelled' : reason;
    return {
      ...this.#delta(draft),
      finishReason,
      openaiFinishReason: toOpenai(finishReason),
      ...(tail.stop && tail.stop !== 'eos' ? { stopReason: tail.stopReason! } : {}),
    };
  }
}

/**
 * Turns an engine's output stream into text deltas for one request, one delta per chunk that
 * adds something (see {@link OutputPostprocessor}). When the output stops early, the source
 * iterator is closed so the engine is told to stop.
 */
export function postprocess(tokenizer: Tokenizer, request: PreprocessedRequest, outputs: AsyncIterable<unknown>): AsyncGenerator<TextDelta> {
  return deltas(new OutputPostprocessor(tokenizer, request), outputs, (raw) => [raw]);
}

/**
 * {@link postprocess} over batches of chunks (as `Client.directBatches` reads them): one delta
 * per batch, so a consumer that falls behind a fast engine catches up with one delta, one
 * detokenizer call and one write instead of one per chunk.
 */
export function postprocessBatches(tokenizer: Tokenizer, request: PreprocessedRequest, batches: AsyncIterable<readonly unknown[]>): AsyncGenerator<TextDelta> {
  return deltas(new OutputPostprocessor(tokenizer, request), batches, (batch) => batch);
}

/** The deltas of `source`'s chunks; each is tagged with choice `index` when one is given. */
async function* deltas<T>(
  output: OutputPostprocessor,
  source: AsyncIterable<T>,
  chunksOf: (item: T) => readonly unknown[],
  index?: number,
): AsyncGenerator<TextDelta> {
  for await (const item of source) {
    const delta = output.push(chunksOf(item));
    if (delta) {
      if (index !== undefined) (delta as ChoiceDelta).index = index;
      yield delta;
    }
    if (output.finished) return;
  }
  const tail = output.end();
  if (tail && index !== undefined) (tail as ChoiceDelta).index = index;
  if (tail) yield tail;
}

/** A delta of one of a request's `n` choices. */
export interface ChoiceDelta extends TextDelta {
  /** The choice it belongs to (the engine's `index`). */
  index: number;
}

/** The choice a raw engine chunk belongs to; throws naming a chunk outside the request's `n`. */
function choiceOf(raw: unknown, n: number): number {
  const index = (raw as { index?: unknown } | null)?.index ?? 0;
  if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= n) {
    throw new InvalidArgument(`engine output: a chunk for choice ${JSON.stringify(index)}, but the request asked for n = ${n} choices (index 0 to ${n - 1})`);
  }
  return index;
}

/**
 * {@link postprocessBatches} for a request whose engine generates its `sampling_options.n`
 * choices itself, as stock Dynamo's engines do: chunks of the choices interleave, each tagged
 * with its `index`. Every choice is detokenized and stopped on its own, and its deltas come out
 * tagged with its index. Ends once every choice finished (the engine is told to stop) or the
 * engine's stream ends. A chunk whose index is not below `n` fails with `InvalidArgument`.
 */
export function postprocessChoices(
  tokenizer: Tokenizer,
  request: PreprocessedRequest,
  batches: AsyncIterable<readonly unknown[]>,
): AsyncGenerator<ChoiceDelta> {
  const n = Math.max(1, request.sampling_options?.n ?? 1);
  // One choice: one generator, not one wrapped in another (a promise hop per token each).
  if (n === 1) return deltas(new OutputPostprocessor(tokenizer, request), batches, (batch) => batch, 0) as AsyncGenerator<ChoiceDelta>;
  return interleavedChoices(tokenizer, request, batches, n);
}

async function* interleavedChoices(
  tokenizer: Tokenizer,
  request: PreprocessedRequest,
  batches: AsyncIterable<readonly unknown[]>,
  n: number,
): AsyncGenerator<ChoiceDelta> {
  const outputs = Array.from({ length: n }, () => new OutputPostprocessor(tokenizer, request));
  let finished = 0;
  for await (const batch of batches) {
    const groups = new Map<number, unknown[]>();
    for (const raw of batch) {
      const index = choiceOf(raw, n);
      const group = groups.get(index);
      if (group) group.push(raw);
      else groups.set(index, [raw]);
    }
    for (const [index, chunks] of groups) {
      const output = outputs[index]!;
      if (output.finished) continue;
      const delta = output.push(chunks);
      if (delta) yield { ...delta, index };
      if (output.finished && ++finished === n) return;
    }
  }
  for (const [index, output] of outputs.entries()) {
    const tail = output.end();
    if (tail) yield { ...tail, index };
  }
}
