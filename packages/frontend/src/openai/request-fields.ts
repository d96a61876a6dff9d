import type { GenerationSurface } from '../models/served-model.js';
import { HttpError } from '../http/errors.js';

/** Fields of OpenAI's request bodies, and Dynamo's and vLLM's extensions, that the frontend accepts. */
const COMMON = [
  'model',
  'stream',
  'stream_options',
  'max_tokens',
  'temperature',
  'top_p',
  'n',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'user',
  'seed',
  'best_of',
  'service_tier',
  'metadata',
  'store',
  'prompt_cache_key',
  'safety_identifier',
  // Dynamo / vLLM extensions
  'nvext',
  'top_k',
  'min_p',
  'repetition_penalty',
  'length_penalty',
  'use_beam_search',
  'min_tokens',
  'ignore_eos',
  'stop_token_ids',
  'include_stop_str_in_output',
  'skip_special_tokens',
  'detokenize',
  'allowed_token_ids',
  'bad_words_token_ids',
  'cache_salt',
  'guided_json',
  'guided_regex',
  'guided_grammar',
  'guided_choice',
  'guided_decoding_backend',
  'guided_whitespace_pattern',
  'response_format',
  'mm_processor_kwargs',
];
const ALLOWED: Record<GenerationSurface, ReadonlySet<string>> = {
  chat: new Set([
    ...COMMON,
    'messages',
    'max_completion_tokens',
    'top_logprobs',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'modalities',
    'audio',
    'prediction',
    'reasoning_effort',
    'thinking',
    'web_search_options',
    'verbosity',
    'chat_template',
    'chat_template_args',
    'chat_template_kwargs',
    'documents',
    'add_generation_prompt',
    'continue_final_message',
  ]),
  completions: new Set([...COMMON, 'prompt', 'suffix', 'echo', 'prompt_embeds']),
};

/** The most unknown fields an error names. */
const MAX_NAMED = 20;

/**
 * Refuses what the frontend cannot honour, as stock Dynamo does: unknown top-level fields (400,
 * unless `ignoreUnknown`) and the deprecated `functions` / `function_call` (501).
 */
export function checkRequestFields(surface: GenerationSurface, body: Record<string, unknown>, ignoreUnknown: boolean): void {
  if (surface === 'chat' && ('functions' in body || 'function_call' in body)) {
    throw new HttpError(501, '`functions` and `function_call` are deprecated and not supported; use `tools` and `tool_choice`', {
      param: 'functions' in body ? 'functions' : 'function_call',
    });
  }
  if (!ignoreUnknown) {
    const unknown = Object.keys(body)
      .filter((key) => !ALLOWED[surface].has(key))
      .sort();
    if (unknown.length > 0) {
      // A body of thousands of unknown keys gets a readable message, not all of them back.
      const named = unknown
        .slice(0, MAX_NAMED)
        .map((k) => `\`${k}\``)
        .join(', ');
      const more = unknown.length > MAX_NAMED ? ` and ${unknown.length - MAX_NAMED} more` : '';
      throw new HttpError(400, `Validation: Unsupported parameter(s): ${named}${more}`, { param: unknown[0]! });
    }
  }
}

/**
 * The instance a request pins itself to: the `x-dynamo-worker-instance-id` header (or its short
 * alias `x-worker-instance-id`), else `nvext.backend_instance_id`. Ids are decimal (or `0x` hex).
 */
export function pinnedInstance(headers: Record<string, string | string[] | undefined>, body: Record<string, unknown>): bigint | undefined {
  const header = headers['x-dynamo-worker-instance-id'] ?? headers['x-worker-instance-id'];
  if (header !== undefined) return parseInstanceId(Array.isArray(header) ? header[0]! : header, 'x-dynamo-worker-instance-id');
  const nvext = body.nvext;
  if (typeof nvext !== 'object' || nvext === null) return undefined;
  const id = (nvext as Record<string, unknown>).backend_instance_id;
  if (id === undefined || id === null) return undefined;
  if (typeof id === 'bigint' && id >= 0n && id < 2n ** 64n) return id;
  if (typeof id === 'number' && Number.isSafeInteger(id) && id >= 0) return BigInt(id);
  if (typeof id === 'string') return parseInstanceId(id, 'nvext.backend_instance_id');
  throw new HttpError(400, 'nvext.backend_instance_id: expected an unsigned 64-bit instance id');
}

function parseInstanceId(text: string, what: string): bigint {
  const trimmed = text.trim();
  if (/^\d{1,20}$/.test(trimmed) || /^0x[0-9a-f]{1,16}$/i.test(trimmed)) {
    const id = BigInt(trimmed);
    if (id < 2n ** 64n) return id;
  }
  throw new HttpError(400, `${what}: expected an unsigned 64-bit instance id (decimal or 0x hex), got '${text}'`);
}
