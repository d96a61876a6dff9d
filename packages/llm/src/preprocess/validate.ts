import { InvalidArgument } from '@dynamo/runtime';

import type { ChatCompletionRequest, CompletionRequest } from './openai.js';

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
  if (request.best_of != null && request.best_of < (request.n ?? 1)) fail(`Best_of must be greater than or equal to n, got best_of=${request.best_of} and n=${request.n ?? 1}`);
  const stops = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop;
  stops.forEach((stop, i) => stop === '' && fail(`Stop sequence at index ${i} cannot be empty`));
  if (kind === 'chat') {
    const chat = request as ChatCompletionRequest;
    if (chat.max_completion_tokens != null && chat.max_completion_tokens < 1) fail(`Max completion tokens must be greater than 0, got ${chat.max_completion_tokens}`);
    range(chat.top_logprobs, 'Top_logprobs', 0, 20);
    if (chat.messages.length === 0) fail("The 'messages' field cannot be empty. At least one message is required.");
  } else {
    const completion = request as CompletionRequest;
    range(completion.logprobs, 'Logprobs', 0, 5);
    const prompt = completion.prompt;
    if (prompt === '') fail('Prompt string cannot be empty');
    if (Array.isArray(prompt) && prompt.length === 0) fail('Prompt string array cannot be empty');
  }
}
