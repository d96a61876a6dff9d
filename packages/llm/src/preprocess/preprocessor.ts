import type { PromptFormatter, Tokenizer } from '@dynamo/core';
import { InvalidArgument, parseOrThrow } from '@dynamo/runtime';

import { mdcsum } from '../card/mdcsum.js';
import type { ModelDeploymentCard } from '../card/schema.js';
import type { LocalModel } from '../local-model.js';
import { type ChatCompletionRequest, ChatCompletionRequestSchema, type CompletionRequest, CompletionRequestSchema } from './openai.js';
import type { PreprocessedRequest } from './preprocessed-request.js';

/** Prompts up to this many characters are encoded on the JS thread (a thread hop costs more). */
const SYNC_ENCODE_CHARS = 4096;

type SamplingFields = ChatCompletionRequest | CompletionRequest;

/**
 * Turns OpenAI chat and completions bodies into the `PreprocessedRequest` a Tokens-input worker
 * receives, the way a Dynamo frontend does: chat template, tokenization, stop conditions with
 * the model's EOS ids, sampling and output options, prompt-length check.
 */
export class Preprocessor {
  readonly card: ModelDeploymentCard;
  readonly tokenizer: Tokenizer;
  readonly formatter: PromptFormatter | undefined;
  readonly eosTokenIds: readonly number[];
  readonly mdcSum: string;

  private constructor(card: ModelDeploymentCard, tokenizer: Tokenizer, formatter: PromptFormatter | undefined, eosTokenIds: number[]) {
    this.card = card;
    this.tokenizer = tokenizer;
    this.formatter = formatter;
    this.eosTokenIds = eosTokenIds;
    this.mdcSum = mdcsum(card);
  }

  /** A preprocessor for a model and the card it is served under. */
  static async create(model: LocalModel, card: ModelDeploymentCard): Promise<Preprocessor> {
    const tokenizer = await model.tokenizer();
    const hasTemplate = Object.values(model.templateSources()).some((v) => v !== undefined && v !== null);
    const formatter = hasTemplate ? model.promptFormatter({ excludeToolsWhenToolChoiceNone: card.runtime_config.exclude_tools_when_tool_choice_none }) : undefined;
    return new Preprocessor(card, tokenizer, formatter, await model.eosTokenIds());
  }

  /** The prompt a chat body renders to (no tokenization). */
  async renderChat(body: unknown): Promise<string> {
    return this.#render(parseOrThrow(ChatCompletionRequestSchema, body, 'request'));
  }

  async #render(request: ChatCompletionRequest): Promise<string> {
    if (!this.formatter) throw new InvalidArgument(`model ${this.card.display_name} has no chat template; use /v1/completions`);
    try {
      return await this.formatter.render(JSON.stringify(request));
    } catch (err) {
      throw new InvalidArgument(`request: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The `PreprocessedRequest` for an OpenAI chat-completions body. */
  async preprocessChat(body: unknown): Promise<PreprocessedRequest & { formatted_prompt: string }> {
    const request = parseOrThrow(ChatCompletionRequestSchema, body, 'request');
    const prompt = await this.#render(request);
    const tokenIds = request.nvext?.token_data ?? (await this.#encode(prompt));
    const maxTokens = request.max_completion_tokens ?? request.max_tokens;
    const topLogprobs = request.logprobs ? (request.top_logprobs ?? 0) : undefined;
    return { ...this.#build(request, tokenIds, maxTokens, topLogprobs), formatted_prompt: prompt };
  }

  /** The `PreprocessedRequest` for an OpenAI completions body (a string prompt or token ids). */
  async preprocessCompletion(body: unknown): Promise<PreprocessedRequest> {
    const request = parseOrThrow(CompletionRequestSchema, body, 'request');
    const prompt = Array.isArray(request.prompt) && request.prompt.length === 1 && typeof request.prompt[0] !== 'number' ? request.prompt[0]! : request.prompt;
    const tokenIds = request.nvext?.token_data ?? (typeof prompt === 'string' ? await this.#encode(prompt) : (prompt as number[]));
    return this.#build(request, tokenIds, request.max_tokens, request.logprobs ?? undefined);
  }

  async #encode(prompt: string): Promise<number[]> {
    // NUL characters never reach the tokenizer, as in Dynamo.
    const text = prompt.includes('\0') ? prompt.replaceAll('\0', '') : prompt;
    const ids = text.length <= SYNC_ENCODE_CHARS ? this.tokenizer.encodeSync(text, false) : await this.tokenizer.encode(text, false);
    return Array.from(ids);
  }

  #build(request: SamplingFields, tokenIds: number[], maxTokens: number | null | undefined, logprobs: number | undefined): PreprocessedRequest {
    const contextLength = this.card.context_length;
    if (contextLength > 0 && tokenIds.length >= contextLength) {
      throw new InvalidArgument(
        `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in ${tokenIds.length} tokens. Please reduce the length of the messages.`,
      );
    }
    if (contextLength > 0 && maxTokens != null && tokenIds.length + maxTokens > contextLength) {
      throw new InvalidArgument(
        `This model's maximum context length is ${contextLength} tokens. However, you requested ${tokenIds.length + maxTokens} tokens (${tokenIds.length} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      );
    }
    const ignoreEos = request.ignore_eos ?? request.nvext?.ignore_eos ?? undefined;
    const stop = request.stop == null ? null : typeof request.stop === 'string' ? [request.stop] : request.stop;
    const eos = ignoreEos ? [] : [...this.eosTokenIds];
    const greedy = request.nvext?.greed_sampling === true;
    return {
      model: request.model,
      token_ids: tokenIds,
      stop_conditions: {
        max_tokens: maxTokens ?? (contextLength > 0 ? contextLength - tokenIds.length : null),
        stop: ignoreEos ? null : stop,
        stop_token_ids_hidden: ignoreEos ? null : [...eos, ...(request.stop_token_ids ?? [])],
        min_tokens: request.min_tokens ?? null,
        ignore_eos: ignoreEos ?? null,
      },
      sampling_options: {
        n: request.n ?? null,
        best_of: request.best_of ?? null,
        presence_penalty: request.presence_penalty ?? null,
        frequency_penalty: request.frequency_penalty ?? null,
        repetition_penalty: request.repetition_penalty ?? null,
        temperature: greedy ? null : (request.temperature ?? null),
        top_p: greedy ? null : (request.top_p ?? null),
        top_k: request.top_k ?? null,
        min_p: request.min_p ?? null,
        seed: request.seed ?? null,
        include_stop_str_in_output: request.include_stop_str_in_output ?? null,
      },
      output_options: {
        logprobs: logprobs ?? null,
        prompt_logprobs: null,
        skip_special_tokens: request.skip_special_tokens ?? null,
      },
      eos_token_ids: eos,
      mdc_sum: this.mdcSum,
      annotations: request.nvext?.annotations ?? [],
    };
  }
}
