import { Detokenizer, type DetokenizerStep, type Tokenizer } from '@dynamo/core';
import { InvalidArgument } from '@dynamo/runtime';
import { z } from 'zod';

import type { PreprocessedRequest } from '../preprocess/preprocessed-request.js';

/** Dynamo's finish reasons as engines send them (`abort` is an alias of `cancelled`). */
const FinishReasonSchema = z.union([z.enum(['eos', 'length', 'stop', 'cancelled', 'abort', 'content_filter']), z.looseObject({ error: z.string() })]);

/** One chunk an engine streams back (`LLMEngineOutput`): new token ids, maybe text, maybe the end. */
export const EngineOutputSchema = z.looseObject({
  token_ids: z.array(z.number().int().nonnegative()).default([]),
  text: z.string().nullish(),
  finish_reason: FinishReasonSchema.nullish(),
  completion_usage: z
    .looseObject({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int().optional() })
    .nullish(),
});
export type EngineOutput = z.input<typeof EngineOutputSchema>;

/** A postprocessed chunk: the text it adds, and on the last one why generation finished. */
export interface TextDelta {
  text: string;
  /** The chunk's token ids, as the engine sent them. */
  tokenIds: number[];
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
  if (!Array.isArray(ids) || chunk.finish_reason != null || chunk.completion_usage != null) return undefined;
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
  usage?: TextDelta['usage'];
}

/**
 * One request's output, postprocessed synchronously: incremental detokenization (one call into
 * Rust per batch of chunks), stop strings and stop token ids (the frontend stops even when the
 * engine does not), and finish reasons. {@link postprocess} and {@link postprocessBatches} drive
 * it over a stream.
 */
export class OutputPostprocessor {
  readonly #detokenizer: Detokenizer;
  #completionTokens = 0;
  #index = 0;
  #finished = false;

  constructor(tokenizer: Tokenizer, request: PreprocessedRequest) {
    const stopConditions = request.stop_conditions ?? {};
    this.#detokenizer = new Detokenizer(tokenizer, {
      stop: stopConditions.stop ?? [],
      includeStopStrInOutput: request.sampling_options?.include_stop_str_in_output ?? false,
      // Client stop_token_ids end the output like EOS does; visible ones are rendered first.
      stopTokenIdsHidden: [...(stopConditions.stop_token_ids_hidden ?? request.eos_token_ids ?? []), ...(stopConditions.stop_token_ids ?? [])],
      stopTokenIdsVisible: stopConditions.stop_token_ids_visible ?? [],
      eosTokenIds: request.eos_token_ids ?? [],
      minTokens: stopConditions.min_tokens ?? 0,
      skipSpecialTokens: request.output_options?.skip_special_tokens ?? false,
    });
  }

  /** True once a delta carried the finish reason: nothing more is taken. */
  get finished(): boolean {
    return this.#finished;
  }

  /**
   * Takes chunks that arrived together and returns the one delta they add (their text joined),
   * or undefined when they add nothing. Consecutive chunks of only token ids are detokenized in
   * one call. Throws `InvalidArgument` naming a malformed chunk.
   */
  push(chunks: readonly unknown[]): TextDelta | undefined {
    if (this.#finished) return undefined;
    const draft: Draft = { text: '', tokenIds: [] };
    let run: number[] | undefined;
    for (const raw of chunks) {
      const chunk = this.#validate(raw);
      if (chunk.text == null && chunk.finish_reason == null && chunk.completion_usage == null) {
        if (run) for (const id of chunk.token_ids) run.push(id);
        else run = chunk.token_ids.slice();
        continue;
      }
      if (run) {
        const end = this.#feed(draft, run, undefined, undefined);
        if (end) return end;
        run = undefined;
      }
      const end = this.#feed(draft, chunk.token_ids, chunk.text ?? undefined, chunk.finish_reason, chunk.completion_usage ?? undefined);
      if (end) return end;
    }
    if (run) {
      const end = this.#feed(draft, run, undefined, undefined);
      if (end) return end;
    }
    if (draft.text === '' && draft.tokenIds.length === 0) return undefined;
    return this.#delta(draft);
  }

  #delta(draft: Draft): TextDelta {
    return { text: draft.text, tokenIds: draft.tokenIds, completionTokens: this.#completionTokens, ...(draft.usage ? { usage: draft.usage } : {}) };
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
      return { ...this.#delta(draft), finishReason: step.stop === 'eos' ? 'eos' : 'stop', openaiFinishReason: 'stop', ...(step.stop === 'eos' ? {} : { stopReason: step.stopReason! }) };
    }
    if (reason == null) return undefined;
    this.#finished = true;
    const tail = this.#detokenizer.finish();
    draft.text += tail.text;
    if (typeof reason === 'object') return { ...this.#delta(draft), finishReason: 'error', openaiFinishReason: 'stop', error: reason.error };
    const finishReason = tail.stop ? 'stop' : reason === 'abort' ? 'cancelled' : reason;
    return { ...this.#delta(draft), finishReason, openaiFinishReason: toOpenai(finishReason), ...(tail.stop && tail.stop !== 'eos' ? { stopReason: tail.stopReason! } : {}) };
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

async function* deltas<T>(output: OutputPostprocessor, source: AsyncIterable<T>, chunksOf: (item: T) => readonly unknown[]): AsyncGenerator<TextDelta> {
  for await (const item of source) {
    const delta = output.push(chunksOf(item));
    if (delta) yield delta;
    if (output.finished) return;
  }
  const tail = output.end();
  if (tail) yield tail;
}
