import { rmSync } from 'node:fs';
import { InvalidArgument } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, mdcsum, Preprocessor } from '../src/index.js';
import { qwen3ModelDir } from './helpers/qwen3.js';

let dir: string;
let pre: Preprocessor;
let small: Preprocessor;

beforeAll(async () => {
  dir = qwen3ModelDir();
  const model = await LocalModel.load(dir);
  pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions, modelName: 'qwen3' }));
  small = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat, modelName: 'qwen3', contextLength: 32 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'qwen3', messages: [{ role: 'user', content: 'Hello there' }], ...extra });

describe('Preprocessor', () => {
  it('renders the chat template, tokenizes, and fills stop conditions with the model EOS', async () => {
    const out = await pre.preprocessChat(chat({ max_tokens: 12, temperature: 0.5, stop: 'END', seed: 7 }));
    expect(out.formatted_prompt).toBe('<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n');
    expect(out.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync(out.formatted_prompt, false)));
    expect(out).toMatchObject({
      model: 'qwen3',
      stop_conditions: { max_tokens: 12, stop: ['END'], stop_token_ids_hidden: [151645] },
      sampling_options: { temperature: 0.5, seed: 7 },
      eos_token_ids: [151645],
      mdc_sum: mdcsum(pre.card),
    });
  });

  it('defaults max_tokens to what is left of the context', async () => {
    const out = await small.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: 'Hi' }] });
    expect(out.stop_conditions?.max_tokens).toBe(32 - out.token_ids.length);
  });

  it('passes chat_template_kwargs to the template', async () => {
    const out = await pre.preprocessChat(chat({ chat_template_kwargs: { enable_thinking: false } }));
    expect(out.formatted_prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('clears EOS and stop strings with ignore_eos', async () => {
    const out = await pre.preprocessChat(chat({ ignore_eos: true, stop: ['x'] }));
    expect(out.eos_token_ids).toEqual([]);
    expect(out.stop_conditions).toMatchObject({ ignore_eos: true, stop: null, stop_token_ids_hidden: null });
  });

  it('takes a completions prompt as text or as token ids', async () => {
    const text = await pre.preprocessCompletion({ model: 'qwen3', prompt: 'Once upon a time', max_tokens: 5 });
    expect(text.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync('Once upon a time', false)));
    const ids = await pre.preprocessCompletion({ model: 'qwen3', prompt: [1, 2, 3], max_tokens: 5 });
    expect(ids.token_ids).toEqual([1, 2, 3]);
    const one = await pre.preprocessCompletion({ model: 'qwen3', prompt: ['Once upon a time'] });
    expect(one.token_ids).toEqual(text.token_ids);
  });

  it('encodes a long prompt off the JS thread with the same result', async () => {
    const long = 'The quick brown fox jumps over the lazy dog. '.repeat(400);
    const out = await pre.preprocessCompletion({ model: 'qwen3', prompt: long });
    expect(out.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync(long, false)));
  });

  it('strips NUL characters before tokenizing', async () => {
    const out = await pre.preprocessCompletion({ model: 'qwen3', prompt: 'a\0b' });
    expect(out.token_ids).toEqual(Array.from(pre.tokenizer.encodeSync('ab', false)));
  });
});

describe('Preprocessor with bad input', () => {
  it.each([
    [{ temperature: 3 }, 'request.temperature'],
    [{ temperature: -1 }, 'request.temperature'],
    [{ top_p: 1.5 }, 'request.top_p'],
    [{ top_p: 0 }, 'request.top_p'],
    [{ frequency_penalty: 3 }, 'request.frequency_penalty'],
    [{ presence_penalty: -3 }, 'request.presence_penalty'],
    [{ n: 0 }, 'request.n'],
    [{ max_tokens: 0 }, 'request.max_tokens'],
    [{ max_tokens: -5 }, 'request.max_tokens'],
    [{ top_logprobs: 21, logprobs: true }, 'request.top_logprobs'],
    [{ min_tokens: 9, max_tokens: 3 }, 'request.min_tokens'],
    [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'request.stop'],
    [{ messages: [] }, 'request.messages'],
    [{ messages: 'hi' }, 'request.messages'],
    [{ model: '' }, 'request.model'],
  ])('refuses %j naming %s', async (fields, name) => {
    const err = await pre.preprocessChat(chat(fields)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toContain(name);
  });

  it('refuses a prompt longer than the context, and a prompt plus max_tokens over it', async () => {
    await expect(small.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: 'word '.repeat(40) }] })).rejects.toThrow(
      /maximum context length is 32 tokens\. However, your messages resulted in \d+ tokens/,
    );
    await expect(small.preprocessChat({ model: 'qwen3', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30 })).rejects.toThrow(/you requested \d+ tokens/);
  });

  it('refuses batch completions and names a template error', async () => {
    await expect(pre.preprocessCompletion({ model: 'qwen3', prompt: ['a', 'b'] })).rejects.toThrow('batch prompts are not supported');
    await expect(pre.preprocessChat(chat({ chat_template_kwargs: 'yes' }))).rejects.toThrow('request.chat_template_kwargs');
  });
});
