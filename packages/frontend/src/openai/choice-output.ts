import type { ChoiceDelta, TokenLogprob } from '@dynamo/llm';
import { type ChatOutputParser, type ChatParts, joinParts } from '@dynamo/llm/internal';

import type { GenerationSurface } from '../models/served-model.js';
import { chatLogprobs, completionLogprobs } from './shapes.js';

/** How a response's choices are written. */
export interface ChoiceSettings {
  surface: GenerationSurface;
  /** A parser per choice, when the model's output is parsed (tool calls, reasoning). */
  newParser: (() => ChatOutputParser | undefined) | undefined;
  /** `parallel_tool_calls: false`: only a choice's first tool call goes out. */
  singleToolCall: boolean;
  /** Alternatives per token in `logprobs`, or undefined when the request did not ask for them. */
  topLogprobs: number | undefined;
  /** `/v1/completions` with `echo`: the prompt text each choice starts with. */
  echo: ((index: number) => string) | undefined;
}

const EMPTY: ChatParts = { content: '', reasoning: '', toolCalls: [] };

/**
 * One choice of a response on its way out: its parser, what it has written so far, and (for a
 * whole response) everything it said.
 */
export class ChoiceOutput {
  readonly index: number;
  readonly #settings: ChoiceSettings;
  readonly #parser: ChatOutputParser | undefined;
  /** Chunks streamed. */
  sent = 0;
  /** Set once a delta carried the finish reason. */
  finishReason: string | null = null;
  /** A whole response's parts and log probabilities, gathered. */
  readonly whole: { parts: ChatParts; logprobs: TokenLogprob[]; offsets: number[] } = {
    parts: { content: '', reasoning: '', toolCalls: [] },
    logprobs: [],
    offsets: [],
  };
  #echo: string | undefined;
  /** Characters of text written so far (the echoed prompt included), where the next token starts. */
  #length = 0;

  constructor(index: number, settings: ChoiceSettings) {
    this.index = index;
    this.#settings = settings;
    this.#parser = settings.newParser?.();
    this.#echo = settings.echo?.(index);
  }

  /** Whether its output is parsed (tool calls, reasoning): empty content is then null in a whole response. */
  get parsed(): boolean {
    return this.#parser !== undefined;
  }

  /** Reasoning tokens counted by its parser, if one counts them. */
  get reasoningTokens(): number | undefined {
    return this.#parser?.reasoningTokens;
  }

  /** What a delta adds: parsed parts (with what the parser held back when it is the last), the echo first. */
  parts(delta: ChoiceDelta): ChatParts {
    let parts: ChatParts;
    if (!this.#parser) parts = { ...EMPTY, content: delta.text };
    else {
      this.#parser.countTokens(delta.tokenIds);
      parts = delta.openaiFinishReason !== undefined ? joinParts(this.#parser.push(delta.text), this.#parser.finish()) : this.#parser.push(delta.text);
      if (this.#settings.singleToolCall && parts.toolCalls.length > 0) parts = { ...parts, toolCalls: parts.toolCalls.filter((c) => c.index === 0) };
    }
    if (this.#echo !== undefined) {
      parts = { ...parts, content: this.#echo + parts.content };
      this.#echo = undefined;
    }
    return parts;
  }

  /** What the parser still holds when the output ended without a finish reason. */
  rest(): ChatParts {
    const parts = this.#parser ? this.#parser.finish() : EMPTY;
    return this.#echo !== undefined ? { ...parts, content: this.#echo + parts.content } : parts;
  }

  /** The finish reason for the engine's (OpenAI) reason: `tool_calls` after tool calls, unless cut off. */
  finish(reason: ChoiceDelta['openaiFinishReason']): string {
    const base = reason ?? 'stop';
    this.finishReason = base === 'stop' && this.#parser?.sawToolCalls ? 'tool_calls' : base;
    return this.finishReason;
  }

  /**
   * The `logprobs` of a delta whose parts are `parts`, in the surface's shape, or undefined when
   * none were asked for or sent. Completions offsets point into the choice's whole text: each
   * token after the ones before it, within the text the delta adds.
   */
  logprobs(delta: ChoiceDelta, parts: ChatParts): unknown {
    const top = this.#settings.topLogprobs;
    const entries = delta.logprobs;
    const start = this.#length;
    this.#length += parts.content.length;
    if (top === undefined || !entries || entries.length === 0) return undefined;
    if (this.#settings.surface === 'chat') return chatLogprobs(entries, top);
    const end = this.#length;
    let at = end - delta.text.length;
    const offsets = entries.map((e) => {
      const offset = Math.max(start, Math.min(at, end));
      at += e.token.length;
      return offset;
    });
    return completionLogprobs(entries, top, offsets);
  }

  /** Adds a delta's parts and log probabilities to the whole response. */
  gather(parts: ChatParts, delta: ChoiceDelta, logprobs: unknown): void {
    const whole = this.whole;
    whole.parts = joinParts(whole.parts, parts);
    if (logprobs !== undefined && delta.logprobs) {
      whole.logprobs.push(...delta.logprobs);
      if (this.#settings.surface === 'completions') whole.offsets.push(...((logprobs as { text_offset: number[] }).text_offset ?? []));
    }
  }

  /** The whole response's `logprobs`, or null. */
  wholeLogprobs(): unknown {
    const top = this.#settings.topLogprobs;
    if (top === undefined || this.whole.logprobs.length === 0) return null;
    return this.#settings.surface === 'chat' ? chatLogprobs(this.whole.logprobs, top) : completionLogprobs(this.whole.logprobs, top, this.whole.offsets);
  }
}
