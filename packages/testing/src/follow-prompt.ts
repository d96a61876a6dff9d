// Answers that can be checked token for token across a migration: workers that continue their
// prompt (the sample engine's --follow-prompt, test/interop/python/llm_worker.py --follow-prompt)
// answer prompt [first] with first+1, first+2, ..., so a stream resent to another worker mid-way
// must still read exactly as an unbroken one.

/** The vocabulary follow-prompt workers count in. */
export const FOLLOW_VOCAB = 32_000;

/** The ids a follow-prompt worker answers prompt [first] with, `n` of them. */
export function followIds(first: number, n: number): Uint32Array {
  return Uint32Array.from({ length: n }, (_, i) => (first + i + 1) % FOLLOW_VOCAB);
}

/** A prompt id with room for `maxTokens` answer ids before the vocabulary wraps. */
export function randomFirst(maxTokens: number): number {
  return 1 + Math.floor(Math.random() * (FOLLOW_VOCAB - maxTokens - 2));
}

/** What one streamed completion gave. */
export interface StreamedCompletion {
  text: string;
  /** It ended with a finish reason and `[DONE]`. */
  complete: boolean;
  /** The HTTP status, or the error event's message. */
  error?: string;
  /** From the request to the first text, and to the end, in ms. */
  firstTextMs?: number;
  totalMs: number;
  /** SSE events with text so far (grows while the stream runs). */
  events: number;
}

/**
 * Streams `/v1/completions` of prompt `[first]` from the frontend at `url`, reading events as they
 * come; `progress` sees the result so far after each event. Never throws: a failure is `error`.
 */
export async function streamCompletion(
  url: string,
  model: string,
  first: number,
  maxTokens: number,
  progress?: (so: StreamedCompletion) => void,
): Promise<StreamedCompletion> {
  const t0 = performance.now();
  const out: StreamedCompletion = { text: '', complete: false, totalMs: 0, events: 0 };
  const finish = () => {
    out.totalMs = performance.now() - t0;
    return out;
  };
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: [first], max_tokens: maxTokens, stream: true }),
    });
    if (res.status !== 200) {
      out.error = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
      return finish();
    }
    let buffer = '';
    let finished = false;
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (block === 'data: [DONE]') out.complete = finished && out.error === undefined;
        if (!block.startsWith('data: {')) continue;
        const data = JSON.parse(block.slice(6)) as { choices?: Array<{ text?: string; finish_reason?: string | null }>; error?: { message: string } };
        if (data.error) out.error = data.error.message;
        const choice = data.choices?.[0];
        if (choice?.text) {
          out.firstTextMs ??= performance.now() - t0;
          out.text += choice.text;
          out.events += 1;
          progress?.(out);
        }
        if (choice?.finish_reason) finished = true;
      }
    }
  } catch (err) {
    out.error = (err as Error).message;
  }
  return finish();
}
