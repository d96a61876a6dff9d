import { InvalidArgument } from '@dynamo/runtime';

import type { ChatCompletionRequest, CompletionRequest } from './openai.js';

/** Stop strings or stop token ids a request may give. */
const MAX_STOPS = 32;
/** Choices one completions request may ask for (prompts × n). */
const MAX_CHOICES = 128;

/** The prompts of a completions request: one string or id list, or a batch of either. */
export function promptBatch(prompt: CompletionRequest['prompt']): Array<string | number[]> {
  return typeof prompt === 'string' || typeof prompt[0] === 'number' ? [prompt as string | number[]] : (prompt as Array<string | number[]>);
}

/**
 * Stock Dynamo 1.6.1's checks of the sampling fields, with its messages (observed from the
 * release; test/interop/WIRE-NOTES.md §6). Only what it refuses is refused: it accepts
 * `min_tokens > max_tokens`, any number of stop strings, and prompts longer than the context.
 */
export function validateSampling(request: ChatCompletionRequest | CompletionRequest, kind: 'chat' | 'completions'): void {
  const fail = (message: string): never => {
    throw new InvalidArgument(`Validation: ${message}`);
  };
  const range = (value: number | null | undefined, label: string, min: number, max: number, minOpen = false) => {
    if (value == null) return;
    if (value > max || value < min || (minOpen && value === min)) fail(`${label} must be between ${min} and ${max}, got ${value}`);
  };
  range(request.temperature, 'Temperature', 0, 2);
  range(request.top_p, 'Top_p', 0, 1, true);
  range(request.frequency_penalty, 'Frequency penalty', -2, 2);
  range(request.presence_penalty, 'Presence penalty', -2, 2);
  range(request.repetition_penalty, 'Repetition penalty', 0, 2, true);
  range(request.min_p, 'Min_p', 0, 1);
  range(request.n, 'n', 1, 128);
  if (request.top_k != null && request.top_k < -1) fail('Top_k must be null or greater than or equal to -1');
  if (request.max_tokens != null && request.max_tokens < 1) fail(`Max tokens must be greater than 0, got ${request.max_tokens}`);
  if (request.best_of != null && request.best_of < (request.n ?? 1))
    fail(`Best_of must be greater than or equal to n, got best_of=${request.best_of} and n=${request.n ?? 1}`);
  const stop = request.stop;
  if (Array.isArray(stop) && stop.length === 0) fail('Stop sequences array cannot be empty');
  if (Array.isArray(stop) && typeof stop[0] === 'number') {
    if (stop.length > MAX_STOPS) throw new InvalidArgument(`Maximum of ${MAX_STOPS} stop token IDs allowed, got ${stop.length}`);
  } else {
    const stops = (stop == null ? [] : typeof stop === 'string' ? [stop] : stop) as string[];
    if (stops.length > MAX_STOPS) throw new InvalidArgument(`Maximum of ${MAX_STOPS} stop sequences allowed, got ${stops.length}`);
    for (const [i, s] of stops.entries()) if (s === '') fail(`Stop sequence at index ${i} cannot be empty`);
  }
  if ((request.stop_token_ids?.length ?? 0) > MAX_STOPS)
    throw new InvalidArgument(`Maximum of ${MAX_STOPS} stop token IDs allowed, got ${request.stop_token_ids!.length}`);
  const n = request.n ?? 1;
  if (n > 1 && request.temperature === 0) {
    fail(`When n > 1, temperature must be greater than 0 to ensure diverse outputs. Got n=${n}, temperature=${request.temperature}`);
  }
  if (kind === 'chat') {
    const chat = request as ChatCompletionRequest;
    if (chat.max_completion_tokens != null && chat.max_completion_tokens < 1)
      fail(`Max completion tokens must be greater than 0, got ${chat.max_completion_tokens}`);
    range(chat.top_logprobs, 'Top_logprobs', 0, 20);
    if (chat.messages.length === 0) fail("The 'messages' field cannot be empty. At least one message is required.");
  } else {
    const completion = request as CompletionRequest;
    range(completion.logprobs, 'Logprobs', 0, 5);
    const prompt = completion.prompt;
    if (prompt === '') fail('Prompt string cannot be empty');
    if (Array.isArray(prompt) && prompt.length === 0) fail('Prompt string array cannot be empty');
    if (completion.suffix != null && Buffer.byteLength(completion.suffix) > 10_000) fail('Suffix is too long, maximum 10000 characters');
    const batch = promptBatch(prompt);
    for (const [i, p] of batch.entries())
      if (p.length === 0) fail(`Prompt ${typeof p === 'string' ? 'string' : 'integer array'} at index ${i} cannot be empty`);
    if (batch.length * n > MAX_CHOICES) fail(`Total choices (batch_size × n = ${batch.length} × ${n} = ${batch.length * n}) exceeds maximum of ${MAX_CHOICES}`);
  }
}
