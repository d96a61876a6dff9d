import { describe, expect, it } from 'vitest';

import { ChatOutputParser, joinParts, modelParsers } from '../src/internal.js';

const tools = [{ type: 'function', function: { name: 'f' } }];
const call = (name: string) => `<tool_call>\n{"name": "${name}", "arguments": {}}\n</tool_call>`;

describe('ChatOutputParser', () => {
  it('is not made when no parser applies to the request', () => {
    expect(ChatOutputParser.forRequest({}, { tools })).toBeUndefined();
    expect(ChatOutputParser.forRequest({ toolCallParser: 'hermes' }, {})).toBeUndefined();
    expect(ChatOutputParser.forRequest({ toolCallParser: 'hermes' }, { tools, tool_choice: 'none' })).toBeUndefined();
    expect(ChatOutputParser.forRequest({ toolCallParser: 'hermes' }, { tools: [] })).toBeUndefined();
    expect(ChatOutputParser.forRequest({ reasoningParser: 'qwen3' }, {})).toBeDefined();
  });

  it('numbers tool calls across deltas and gives each a call-<uuid> id', () => {
    const parser = ChatOutputParser.forRequest({ toolCallParser: 'hermes' }, { tools })!;
    const first = parser.push(`Hi ${call('f')}`);
    expect(parser.sawToolCalls).toBe(true);
    const rest = joinParts(parser.push(` ${call('g').slice(0, 20)}`), parser.push(call('g').slice(20)));
    const all = joinParts(joinParts(first, rest), parser.finish());
    expect(all.content).toBe('Hi  ');
    expect(all.toolCalls.map((c) => [c.index, c.function.name, c.type])).toEqual([
      [0, 'f', 'function'],
      [1, 'g', 'function'],
    ]);
    for (const c of all.toolCalls) expect(c.id).toMatch(/^call-[0-9a-f-]{36}$/);
    expect(all.toolCalls[0]!.id).not.toBe(all.toolCalls[1]!.id);
  });

  it('honours enable_thinking: false for parsers that assume reasoning', () => {
    // Nothing is left to parse: the text goes out as it is.
    expect(ChatOutputParser.forRequest({ reasoningParser: 'deepseek_r1' }, { chat_template_kwargs: { enable_thinking: false } })).toBeUndefined();
    const on = ChatOutputParser.forRequest({ reasoningParser: 'deepseek_r1' }, {})!;
    expect(joinParts(on.push('a</think>b'), on.finish())).toMatchObject({ reasoning: 'a', content: 'b' });
  });
});

describe('modelParsers', () => {
  it('keeps known names, falls back to the defaults, and names unknown ones', () => {
    expect(modelParsers({ toolCallParser: null, reasoningParser: 'qwen3' }, { toolCallParser: 'hermes', reasoningParser: 'basic' })).toEqual({
      parsers: { toolCallParser: 'hermes', reasoningParser: 'qwen3' },
      problems: [],
    });
    const { parsers, problems } = modelParsers({ toolCallParser: 'harmony', reasoningParser: 'nope' });
    expect(parsers).toEqual({ toolCallParser: undefined, reasoningParser: undefined });
    expect(problems).toEqual([
      expect.stringMatching(/^unknown tool_call_parser "harmony"; known: deepseek_v3, hermes/),
      expect.stringMatching(/^unknown reasoning_parser "nope"; known: basic/),
    ]);
  });
});
