import { randomUUID } from 'node:crypto';
import { checkParserNames, OutputParser, reasoningParserMarkers, type Tokenizer } from '@dynamo/core';

import { type ReasoningFields, thinkingDisabled } from '../preprocess/reasoning-args.js';

/** One tool call as OpenAI streams it: whole, with its position in the response. */
export interface ToolCallDelta {
  index: number;
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** What a piece of chat output is, once parsed. */
export interface ChatParts {
  content: string;
  reasoning: string;
  toolCalls: ToolCallDelta[];
}

/** The model's parsers, from its card's `runtime_config`. */
export interface ModelParsers {
  toolCallParser?: string | null | undefined;
  reasoningParser?: string | null | undefined;
}

/**
 * The parsers a model's card names (`runtime_config.tool_call_parser` / `reasoning_parser`),
 * falling back to `defaults` where the card names none. A name this frontend does not know is
 * left out, with the reason in `problems`, so the model is still served, unparsed.
 */
export function modelParsers(card: ModelParsers, defaults: ModelParsers = {}): { parsers: ModelParsers; problems: string[] } {
  const problems: string[] = [];
  const known = (name: string | null | undefined, check: (n: string) => void): string | undefined => {
    if (!name) return undefined;
    try {
      check(name);
      return name;
    } catch (err) {
      problems.push((err as Error).message);
      return undefined;
    }
  };
  return {
    parsers: {
      toolCallParser: known(card.toolCallParser || defaults.toolCallParser, (n) => checkParserNames(n, undefined)),
      reasoningParser: known(card.reasoningParser || defaults.reasoningParser, (n) => checkParserNames(undefined, n)),
    },
    problems,
  };
}

/** The request fields that decide which parsers apply. */
interface ChatFields {
  tools?: unknown;
  tool_choice?: unknown;
  chat_template_args?: unknown;
  chat_template_kwargs?: unknown;
  reasoning_effort?: unknown;
  thinking?: unknown;
}

const objectOf = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** Whether the request turns thinking off, read leniently (a Text-input body was not validated). */
function thinkingOff(body: ChatFields): boolean {
  const fields: ReasoningFields = {
    chat_template_args: objectOf(body.chat_template_args),
    chat_template_kwargs: objectOf(body.chat_template_kwargs),
    reasoning_effort: typeof body.reasoning_effort === 'string' ? body.reasoning_effort : undefined,
    thinking: typeof body.thinking === 'boolean' || objectOf(body.thinking) ? (body.thinking as ReasoningFields['thinking']) : undefined,
  };
  return thinkingDisabled(fields);
}

/**
 * Splits one chat request's output into `content`, `reasoning_content` and `tool_calls` with the
 * model's parsers, as stock Dynamo's frontend does: reasoning first, then tool calls in the rest.
 * Tool calls are parsed only when the request has `tools` and `tool_choice` is not `none`; a
 * forced `tool_choice` (`required`, a named function) holds the output and reads it as calls at
 * the end, also for models without a tool-call parser.
 * Tool-call text that does not parse comes back as content.
 */
export class ChatOutputParser {
  readonly #parser: OutputParser;
  readonly #reasoningTokens: ReasoningTokenCounter | undefined;
  #calls = 0;

  private constructor(parser: OutputParser, reasoningTokens: ReasoningTokenCounter | undefined) {
    this.#parser = parser;
    this.#reasoningTokens = reasoningTokens;
  }

  /**
   * The parser for a request, or undefined when none applies (its text goes out as it is).
   * Throws naming an unknown parser.
   */
  static forRequest(parsers: ModelParsers, body: ChatFields, tokenizer?: Tokenizer): ChatOutputParser | undefined {
    const tools = Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== 'none' ? body.tools : undefined;
    const choice = body.tool_choice;
    const named = typeof choice === 'object' && choice !== null ? (choice as { function?: { name?: unknown } }).function?.name : undefined;
    const forced = choice === 'required' || typeof named === 'string';
    // Most requests need no parser: skip the native object altogether.
    if (!parsers.reasoningParser && !(tools && (parsers.toolCallParser || forced))) return undefined;
    const thinkingDisabled = thinkingOff(body);
    const parser = new OutputParser({
      toolCallParser: parsers.toolCallParser ?? undefined,
      reasoningParser: parsers.reasoningParser ?? undefined,
      tools,
      toolChoiceRequired: choice === 'required',
      ...(typeof named === 'string' && { toolChoiceFunction: named }),
      thinkingDisabled,
    });
    if (parser.passthrough) return undefined;
    const markers = parsers.reasoningParser ? reasoningParserMarkers(parsers.reasoningParser) : null;
    const counting = markers && !(markers.forced && thinkingDisabled) && tokenizer ? ReasoningTokenCounter.create(markers, tokenizer) : undefined;
    return new ChatOutputParser(parser, counting);
  }

  /**
   * The generated tokens that were reasoning (`usage.completion_tokens_details.reasoning_tokens`),
   * when a reasoning parser applies: from the token after the start marker through the end marker.
   */
  get reasoningTokens(): number | undefined {
    return this.#reasoningTokens?.count;
  }

  /** Counts reasoning tokens among a delta's token ids. */
  countTokens(tokenIds: readonly number[]): void {
    this.#reasoningTokens?.push(tokenIds);
  }

  /** True once a tool call was parsed: the response finishes with `tool_calls`. */
  get sawToolCalls(): boolean {
    return this.#calls > 0;
  }

  /** Parses the next delta of text. */
  push(text: string): ChatParts {
    return this.#parts(this.#parser.push(text));
  }

  /** The output ended: what was held back. */
  finish(): ChatParts {
    return this.#parts(this.#parser.finish());
  }

  #parts(parsed: { content: string; reasoning: string; toolCalls: Array<{ name: string; arguments: string }> }): ChatParts {
    const toolCalls = parsed.toolCalls.map((call) => ({ index: this.#calls++, id: `call-${randomUUID()}`, type: 'function' as const, function: call }));
    return { content: parsed.content, reasoning: parsed.reasoning, toolCalls };
  }
}

/** Joins two parses of consecutive output. */
export function joinParts(a: ChatParts, b: ChatParts): ChatParts {
  return { content: a.content + b.content, reasoning: a.reasoning + b.reasoning, toolCalls: [...a.toolCalls, ...b.toolCalls] };
}

/**
 * Counts reasoning tokens by the marker tokens, as stock counts them: the start marker is not
 * reasoning, every token after it is, through the end marker. A parser that assumes reasoning
 * starts inside it (and skips a leading start marker) counts from the first token. Only for
 * markers that are single tokens of the model's vocabulary.
 */
class ReasoningTokenCounter {
  count = 0;
  #state: 'before' | 'reasoning' | 'after';
  #first = true;

  private constructor(
    readonly start: number,
    readonly end: number,
    forced: boolean,
  ) {
    this.#state = forced ? 'reasoning' : 'before';
  }

  static create(markers: { start: string; end: string; forced: boolean }, tokenizer: Tokenizer): ReasoningTokenCounter | undefined {
    const start = tokenizer.tokenToId(markers.start);
    const end = tokenizer.tokenToId(markers.end);
    return start === null || end === null ? undefined : new ReasoningTokenCounter(start, end, markers.forced);
  }

  push(tokenIds: readonly number[]): void {
    for (const id of tokenIds) {
      const first = this.#first;
      this.#first = false;
      if (this.#state === 'before') {
        if (id === this.start) this.#state = 'reasoning';
      } else if (this.#state === 'reasoning') {
        if (first && id === this.start) continue;
        this.count += 1;
        if (id === this.end) this.#state = 'after';
      }
    }
  }
}
