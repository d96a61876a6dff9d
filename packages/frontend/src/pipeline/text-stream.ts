import type { TextDelta } from '@dynamo/llm';

import type { Surface } from '../models/served-model.js';

type OpenAiChunk = {
  choices?: Array<{ delta?: { content?: unknown }; text?: unknown; finish_reason?: unknown }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
};

const FINISH = new Set(['stop', 'length', 'content_filter']);

/**
 * A Text-input worker's OpenAI chunks as text deltas: its first choice's content, its finish
 * reason, and its usage when it reports one (else one token per non-empty chunk).
 */
export async function* textDeltas(surface: Surface, chunks: AsyncIterable<unknown>): AsyncGenerator<TextDelta> {
  let count = 0;
  for await (const raw of chunks) {
    const chunk = (raw ?? {}) as OpenAiChunk;
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    const content = surface === 'chat' ? choice?.delta?.content : choice?.text;
    const text = typeof content === 'string' ? content : '';
    const usage = chunk.usage;
    const reported = typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : undefined;
    count = reported ?? count + (text === '' ? 0 : 1);
    const reason = choice?.finish_reason;
    const delta: TextDelta = { text, tokenIds: [], completionTokens: count };
    if (typeof usage?.prompt_tokens === 'number' && reported !== undefined) delta.usage = { prompt_tokens: usage.prompt_tokens, completion_tokens: reported };
    if (typeof reason === 'string' && reason !== '') {
      const openai = FINISH.has(reason) ? (reason as 'stop' | 'length' | 'content_filter') : 'stop';
      delta.finishReason = openai;
      delta.openaiFinishReason = openai;
    }
    yield delta;
  }
}
