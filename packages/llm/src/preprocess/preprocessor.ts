import type { PromptFormatter, Tokenizer } from '@dynamo/core';
import { InvalidArgument, parseOrThrow } from '@dynamo/runtime';
import { stringifyJson } from '@dynamo/runtime/internal';

import { mdcsum } from '../card/mdcsum.js';
import { embeddingInputs, EmbeddingRequestSchema, type PreprocessedEmbeddingRequest } from '../embeddings/request.js';
import type { ModelDeploymentCard } from '../card/schema.js';
import type { LocalModel } from '../local-model.js';
import { guidedDecoding } from './guided-decoding.js';
import { DEFAULT_MAX_DATA_URL_BYTES, gatherMedia } from './multimodal.js';
import { type ChatCompletionRequest, ChatCompletionRequestSchema, type CompletionRequest, CompletionRequestSchema } from './openai.js';
import type { PreprocessedRequest } from './preprocessed-request.js';
import { templateArgs } from './reasoning-args.js';
import { promptBatch, validateSampling } from './validate.js';

/**
 * The most characters (a chat's JSON, a completion's prompt) that `onCallingThread` keeps on the
 * calling thread: longer inputs always go to the thread pool, so one long prompt never holds the
 * JS thread for the whole encode.
 */
const CALLING_THREAD_MAX_CHARS = 8192;

/** Whether an input of `chars` characters is rendered or encoded on the calling thread. */
const onCallingThread = (options: PreprocessOptions, chars: number): boolean => options.onCallingThread === true && chars <= CALLING_THREAD_MAX_CHARS;

type SamplingFields = ChatCompletionRequest | CompletionRequest;

/** How {@link Preprocessor.preprocessChat} and {@link Preprocessor.preprocessCompletions} run. */
export interface PreprocessOptions {
  /**
   * Render and tokenize inputs of up to 8,192 characters on the calling thread instead of the
   * thread pool (longer ones always go to the pool).
   */
  onCallingThread?: boolean;
  /** Largest `data:` URL a media part may carry (stock: `DYN_MM_MAX_DATA_URL_MB`, 16 MiB). */
  maxDataUrlBytes?: number;
}

/** Stock Dynamo carries sampling floats as f32; the worker sees them widened back. */
const f32 = (v: number | null | undefined): number | null => (v == null ? null : Math.fround(v));

/**
 * Turns OpenAI chat and completions bodies into the `PreprocessedRequest` a Tokens-input worker
 * receives, field for field as the stock Dynamo 1.6.1 frontend sends it: chat template,
 * tokenization, stop conditions with the model's EOS ids, sampling and output options.
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
    const formatter = hasTemplate
      ? model.promptFormatter({ excludeToolsWhenToolChoiceNone: card.runtime_config.exclude_tools_when_tool_choice_none })
      : undefined;
    return new Preprocessor(card, tokenizer, formatter, await model.eosTokenIds());
  }

  /** The prompt a chat body renders to (no tokenization). */
  async renderChat(body: unknown): Promise<string> {
    return this.#render(this.#parseChat(body));
  }

  /**
   * A validated chat body, its reasoning controls folded into `chat_template_args` (as stock
   * renders and forwards them; `chat_template_kwargs` merged in), and a `null` or missing content
   * (OpenAI's assistant turn of only tool calls) given to the template as "", as vLLM gives it:
   * templates that join strings (SmolLM2's, Qwen3's) cannot render null or undefined, and stock
   * and transformers fail there.
   */
  #parseChat(body: unknown): ChatCompletionRequest {
    const parsed = parseOrThrow(ChatCompletionRequestSchema, body, 'request');
    validateSampling(parsed, 'chat');
    const request = parsed.messages.some((m) => m.content == null)
      ? { ...parsed, messages: parsed.messages.map((m) => (m.content == null ? { ...m, content: '' } : m)) }
      : parsed;
    const args = templateArgs(request);
    const { chat_template_kwargs: _kwargs, ...rest } = request;
    return args ? { ...rest, chat_template_args: args } : request;
  }

  async #render(request: ChatCompletionRequest): Promise<string> {
    return this.#templated(() => this.#formatter().render(stringifyJson(request)));
  }

  #formatter(): PromptFormatter {
    if (!this.formatter) throw new InvalidArgument(`model ${this.card.display_name} has no chat template; use /v1/completions`);
    return this.formatter;
  }

  /** Runs a template step; a template that rejects the request is the request's fault. */
  async #templated<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (err instanceof InvalidArgument || (err as { code?: unknown }).code !== 'InvalidArg') throw err;
      throw new InvalidArgument(`request: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * The `PreprocessedRequest` for an OpenAI chat-completions body, and the prompt it rendered.
   * The template and the tokenizer run on the thread pool unless `options.onCallingThread` (and
   * the chat is short): the hop costs latency when nothing else is waiting for the JS thread, but
   * under load it lets the thread go on with other requests while the render uses another core: 64
   * requests arriving together waited ~19 ms at the median for the JS thread (bench/README.md,
   * profile 13).
   */
  async preprocessChat(body: unknown, options: PreprocessOptions = {}): Promise<{ request: PreprocessedRequest; prompt: string }> {
    const chat = this.#parseChat(body);
    const media = gatherMedia(chat.messages, options.maxDataUrlBytes ?? DEFAULT_MAX_DATA_URL_BYTES);
    let prompt: string;
    let tokenIds: number[];
    if (chat.nvext?.token_data) {
      prompt = await this.#render(chat);
      tokenIds = chat.nvext.token_data;
    } else {
      const json = stringifyJson(chat);
      const encoded = await this.#templated(async () =>
        onCallingThread(options, json.length)
          ? this.#formatter().renderAndEncodeSync(json, this.tokenizer)
          : this.#formatter().renderAndEncode(json, this.tokenizer),
      );
      prompt = encoded.prompt;
      tokenIds = Array.from(encoded.tokenIds);
    }
    // `logprobs: true` alone asks the engine for one alternative, as stock asks.
    const logprobs = chat.logprobs ? (chat.top_logprobs ?? 1) : null;
    const request = this.#build(chat, tokenIds, chat.max_completion_tokens ?? chat.max_tokens, logprobs);
    if (!media) return { request, prompt };
    // Stock puts the media after the prompt ids, and the messages (data URLs blanked) and the
    // rendered prompt in extra_args, for engines that process media themselves.
    const { model, token_ids, ...rest } = request;
    const withMedia: PreprocessedRequest = {
      model,
      token_ids,
      multi_modal_data: media.data,
      ...(media.uuids && { multi_modal_uuids: media.uuids }),
      ...rest,
      extra_args: { ...(rest.extra_args as Record<string, unknown> | undefined), messages: media.messages, formatted_prompt: prompt },
    };
    return { request: withMedia, prompt };
  }

  /**
   * The `PreprocessedRequest`s for an OpenAI completions body: one per prompt (a batch of
   * prompts is one request each, as in stock Dynamo). Prompts are tokenized on the thread pool
   * unless `options.onCallingThread` (and the prompt is short), as in {@link preprocessChat}.
   */
  async preprocessCompletions(body: unknown, options: PreprocessOptions = {}): Promise<PreprocessedRequest[]> {
    const completion = parseOrThrow(CompletionRequestSchema, body, 'request');
    validateSampling(completion, 'completions');
    const prompts = promptBatch(completion.prompt);
    return Promise.all(
      prompts.map(async (p) => {
        const tokenIds = completion.nvext?.token_data ?? (typeof p === 'string' ? await this.#encode(p, options) : p);
        const request = this.#build(completion, tokenIds, completion.max_tokens, completion.logprobs ?? null);
        // echo asks the engine for the prompt's log probabilities, as stock asks.
        if (completion.echo === true) request.output_options = { ...request.output_options, prompt_logprobs: 1 };
        return request;
      }),
    );
  }

  /** The `PreprocessedRequest` for a completions body with one prompt. */
  async preprocessCompletion(body: unknown, options: PreprocessOptions = {}): Promise<PreprocessedRequest> {
    const requests = await this.preprocessCompletions(body, options);
    if (requests.length !== 1) throw new InvalidArgument(`request.prompt: holds ${requests.length} prompts; use preprocessCompletions for a batch`);
    return requests[0]!;
  }

  async #encode(prompt: string, options: PreprocessOptions): Promise<number[]> {
    // NUL characters never reach the tokenizer, as in Dynamo.
    const text = prompt.includes('\0') ? prompt.replaceAll('\0', '') : prompt;
    const ids = onCallingThread(options, text.length) ? this.tokenizer.encodeSync(text, false) : await this.tokenizer.encode(text, false);
    return Array.from(ids);
  }

  #build(request: SamplingFields, tokenIds: number[], maxTokens: number | null | undefined, logprobs: number | null): PreprocessedRequest {
    const ignoreEos = request.ignore_eos ?? request.nvext?.ignore_eos ?? null;
    // `stop` as token ids wins over `stop_token_ids`, as in stock.
    const stopIds = Array.isArray(request.stop) && typeof request.stop[0] === 'number' ? (request.stop as number[]) : undefined;
    const stop = request.stop == null || stopIds ? null : typeof request.stop === 'string' ? [request.stop] : (request.stop as string[]);
    const greedy = request.nvext?.greed_sampling === true;
    const chat = 'messages' in request ? (request as ChatCompletionRequest) : undefined;
    const runtime = this.card.runtime_config;
    const guided = guidedDecoding(request, chat ?? {}, {
      toolCallParser: runtime.tool_call_parser,
      mode: runtime.structural_tag_mode,
      scope: runtime.structural_tag_scope,
      schema: runtime.structural_tag_schema,
    });
    // With a reasoning parser, the engine gets the template arguments too (vLLM's parsers read them).
    const thinking = chat && this.card.runtime_config.reasoning_parser ? chat.chat_template_args : undefined;
    // Field order and explicit nulls as the stock frontend sends them.
    return {
      model: request.model,
      token_ids: tokenIds,
      stop_conditions: {
        max_tokens: maxTokens ?? null,
        stop,
        stop_token_ids: stopIds ?? request.stop_token_ids ?? null,
        stop_token_ids_visible: null,
        stop_token_ids_hidden: ignoreEos ? null : [...this.eosTokenIds],
        min_tokens: request.min_tokens ?? null,
        ignore_eos: ignoreEos,
        max_thinking_tokens: null,
      },
      sampling_options: {
        n: request.n ?? null,
        best_of: request.best_of ?? null,
        presence_penalty: f32(request.presence_penalty),
        frequency_penalty: f32(request.frequency_penalty),
        repetition_penalty: f32(request.repetition_penalty),
        temperature: greedy ? null : f32(request.temperature),
        top_p: greedy ? null : f32(request.top_p),
        top_k: request.top_k ?? null,
        min_p: f32(request.min_p),
        use_beam_search: request.use_beam_search ?? null,
        length_penalty: f32(request.length_penalty),
        seed: request.seed ?? null,
        include_stop_str_in_output: request.include_stop_str_in_output ?? null,
        guided_decoding: guided,
      },
      output_options: {
        logprobs,
        prompt_logprobs: null,
        skip_special_tokens: request.skip_special_tokens ?? null,
        formatted_prompt: null,
        return_tokens_as_token_ids: null,
      },
      eos_token_ids: ignoreEos ? [] : [...this.eosTokenIds],
      mdc_sum: this.mdcSum,
      annotations: request.nvext?.annotations ?? [],
      routing: {},
      router_config_override: null,
      ...(thinking && { extra_args: { reasoning_parser_kwargs: { chat_template_kwargs: thinking } } }),
    };
  }

  /**
   * The `PreprocessedEmbeddingRequest` for an OpenAI embeddings body, as stock Dynamo 1.6.1 builds
   * it: string inputs tokenized without a chat template (special tokens added unless
   * `add_special_tokens: false`) and cut to `truncate_prompt_tokens` (-1: the context length),
   * token-id inputs checked against the vocabulary; all inputs in one request. Throws
   * `InvalidArgument` naming a bad field or an empty input.
   */
  async preprocessEmbeddings(body: unknown): Promise<PreprocessedEmbeddingRequest> {
    const request = parseOrThrow(EmbeddingRequestSchema, body, 'request');
    const inputs = embeddingInputs(request.input);
    if (inputs.length === 0) throw new InvalidArgument('request.input: must hold at least one input');
    inputs.forEach((input, i) => {
      if (input.length === 0) throw new InvalidArgument(`request.input${inputs.length > 1 ? `.${i}` : ''}: must not be empty`);
    });
    const truncate = request.truncate_prompt_tokens;
    const context = this.card.context_length;
    if (truncate === -1 && context === 0)
      throw new InvalidArgument("request.truncate_prompt_tokens: -1 needs the model's context length, which its card does not give");
    if (truncate != null && context > 0 && truncate > context) {
      throw new InvalidArgument(`request.truncate_prompt_tokens: ${truncate} cannot be greater than the model's context length ${context}`);
    }
    const keep = truncate == null ? undefined : truncate === -1 ? context : truncate;
    const texts = inputs.filter((i): i is string => typeof i === 'string');
    const encoded = texts.length === 0 ? [] : await this.tokenizer.encodeBatch(texts, request.add_special_tokens ?? true);
    let next = 0;
    const vocab = this.tokenizer.vocabSize;
    const tokenIds = inputs.map((input, i) => {
      if (typeof input === 'string') {
        const ids = Array.from(encoded[next++]!);
        return keep === undefined ? ids : ids.slice(0, keep);
      }
      const bad = input.find((id) => id >= vocab);
      if (bad !== undefined)
        throw new InvalidArgument(`request.input${inputs.length > 1 ? `.${i}` : ''}: token id ${bad} is out of range (must be < ${vocab})`);
      return input;
    });
    // Key order and presence as the stock frontend sends them.
    return {
      token_ids: tokenIds,
      model: request.model,
      ...(request.encoding_format != null && { encoding_format: request.encoding_format }),
      ...(truncate != null && { truncate_prompt_tokens: truncate }),
      dimensions: request.dimensions ?? null,
      mdc_sum: this.mdcSum,
      annotations: request.nvext?.annotations ?? [],
    };
  }
}
