import type { ChoiceDelta } from '@dynamo/llm';

import type { GenerationSurface } from '../models/served-model.js';

type OpenAiChoice = { index?: unknown; delta?: { content?: unknown }; text?: unknown; finish_reason?: unknown };
type OpenAiChunk = {
  choices?: OpenAiChoice[];
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
};

const FINISH = new Set(['stop', 'length', 'content_filter']);

/**
 * A Text-input worker's OpenAI chunks as text deltas, one per choice in each chunk: its content,
 * its finish reason, and the worker's usage when it reports one (else one token per non-empty
 * piece of text).
 */
export async function* textDeltas(surface: GenerationSurface, chunks: AsyncIterable<unknown>): AsyncGenerator<ChoiceDelta> {
  const counts = new Map<number, number>();
  for await (const raw of chunks) {
    const chunk = (raw ?? {}) as OpenAiChunk;
    const out: ChoiceDelta[] = [];
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      const index = typeof choice.index === 'number' && Number.isInteger(choice.index) && choice.index >= 0 ? choice.index : 0;
      const content = surface === 'chat' ? choice.delta?.content : choice.text;
      const text = typeof content === 'string' ? content : '';
      const count = (counts.get(index) ?? 0) + (text === '' ? 0 : 1);
      counts.set(index, count);
      const delta: ChoiceDelta = { index, text, tokenIds: [], completionTokens: count };
      const reason = choice.finish_reason;
      if (typeof reason === 'string' && reason !== '') {
        const openai = FINISH.has(reason) ? (reason as 'stop' | 'length' | 'content_filter') : 'stop';
        delta.finishReason = openai;
        delta.openaiFinishReason = openai;
      }
      out.push(delta);
    }
    // The worker's own counts (over every choice) ride on its last delta, or on one of their own.
    const usage = chunk.usage;
    if (typeof usage?.completion_tokens === 'number' && typeof usage.prompt_tokens === 'number') {
      if (out.length === 0) out.push({ index: 0, text: '', tokenIds: [], completionTokens: counts.get(0) ?? 0 });
      out[out.length - 1]!.usage = { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens };
    }
    yield* out;
  }
}
