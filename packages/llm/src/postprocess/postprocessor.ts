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

function toOpenai(reason: NonNullable<TextDelta['finishReason']>): NonNullable<TextDelta['openaiFinishReason']> {
  return reason === 'length' ? 'length' : reason === 'content_filter' ? 'content_filter' : 'stop';
}

/**
 * Turns an engine's output stream into text deltas for one request: incremental
 * detokenization (one call into Rust per chunk), stop strings and stop token ids (the frontend
 * stops even when the engine does not), and finish reasons. When the output stops early, the
 * source iterator is closed so the engine is told to stop.
 */
export async function* postprocess(tokenizer: Tokenizer, request: PreprocessedRequest, outputs: AsyncIterable<unknown>): AsyncGenerator<TextDelta> {
  const stopConditions = request.stop_conditions ?? {};
  const detokenizer = new Detokenizer(tokenizer, {
    stop: stopConditions.stop ?? [],
    includeStopStrInOutput: request.sampling_options?.include_stop_str_in_output ?? false,
    // Client stop_token_ids end the output like EOS does; visible ones are rendered first.
    stopTokenIdsHidden: [...(stopConditions.stop_token_ids_hidden ?? request.eos_token_ids ?? []), ...(stopConditions.stop_token_ids ?? [])],
    stopTokenIdsVisible: stopConditions.stop_token_ids_visible ?? [],
    eosTokenIds: request.eos_token_ids ?? [],
    minTokens: stopConditions.min_tokens ?? 0,
    skipSpecialTokens: request.output_options?.skip_special_tokens ?? false,
  });
  let completionTokens = 0;
  let index = 0;
  for await (const raw of outputs) {
    const parsed = EngineOutputSchema.safeParse(raw);
    if (!parsed.success) {
      throw new InvalidArgument(`engine output chunk ${index}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'chunk'}: ${i.message}`).join('; ')}`);
    }
    index += 1;
    const chunk = parsed.data;
    const ids = Uint32Array.from(chunk.token_ids);
    // A plain string unless this chunk ended the output.
    const pushed = detokenizer.push(ids, chunk.text ?? undefined);
    const step: DetokenizerStep = typeof pushed === 'string' ? { text: pushed } : pushed;
    completionTokens += chunk.token_ids.length;
    const usage = chunk.completion_usage ?? undefined;
    if (step.stop) {
      const finishReason = step.stop === 'eos' ? 'eos' : 'stop';
      yield { text: step.text, tokenIds: chunk.token_ids, finishReason, openaiFinishReason: 'stop', ...(step.stop === 'eos' ? {} : { stopReason: step.stopReason! }), completionTokens, ...(usage ? { usage } : {}) };
      return;
    }
    const reason = chunk.finish_reason;
    if (reason != null) {
      const tail = detokenizer.finish();
      const text = step.text + tail.text;
      if (typeof reason === 'object') {
        yield { text, tokenIds: chunk.token_ids, finishReason: 'error', openaiFinishReason: 'stop', error: reason.error, completionTokens, ...(usage ? { usage } : {}) };
        return;
      }
      const finishReason = tail.stop ? 'stop' : reason === 'abort' ? 'cancelled' : reason;
      yield {
        text,
        tokenIds: chunk.token_ids,
        finishReason,
        openaiFinishReason: toOpenai(finishReason),
        ...(tail.stop && tail.stop !== 'eos' ? { stopReason: tail.stopReason! } : {}),
        completionTokens,
        ...(usage ? { usage } : {}),
      };
      return;
    }
    if (step.text !== '' || chunk.token_ids.length > 0) yield { text: step.text, tokenIds: chunk.token_ids, completionTokens, ...(usage ? { usage } : {}) };
  }
  // The stream ended without a finish reason: release what was held back.
  const tail = detokenizer.finish();
  if (tail.text !== '') yield { text: tail.text, tokenIds: [], completionTokens };
}
