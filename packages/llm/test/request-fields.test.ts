// Request fields as stock Dynamo 1.6.1's frontend reads them (observed from the release): reasoning
// controls folded into the template arguments, media parts gathered for the worker, stop token ids,
// and the checks on n, batches and suffix, with stock's messages.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { DEFAULT_MAX_DATA_URL_BYTES, templateArgs } from '../src/internal.js';
import { gatherMedia } from '../src/preprocess/multimodal.js';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

let dir: string;
let pre: Preprocessor;
beforeAll(async () => {
  dir = qwen3ModelDir();
  const model = await LocalModel.load(dir);
  pre = await Preprocessor.create(
    model,
    buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions, modelName: 'qwen3' }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const messages = [{ role: 'user', content: 'Hi' }];

describe('reasoning controls in the template arguments', () => {
  it.each([
    // What stock's template saw for each request (a template printing the four variables).
    [{ reasoning_effort: 'low' }, { thinking: true, enable_thinking: true, thinking_mode: 'enabled', reasoning_effort: 'low' }],
    [{ reasoning_effort: 'none' }, { thinking: false, enable_thinking: false, thinking_mode: 'disabled', reasoning_effort: 'none' }],
    [
      { reasoning_effort: 'high', chat_template_kwargs: { enable_thinking: false } },
      { thinking: false, enable_thinking: false, thinking_mode: 'disabled', reasoning_effort: 'high' },
    ],
    [{ chat_template_kwargs: { reasoning_effort: 'medium' } }, { thinking: true, enable_thinking: true, thinking_mode: 'enabled', reasoning_effort: 'medium' }],
    [
      { reasoning_effort: 'max', thinking: { type: 'adaptive' as const } },
      { thinking_mode: 'adaptive', reasoning_effort: 'max' },
    ],
    [{ thinking: false }, { thinking: false, enable_thinking: false, thinking_mode: 'disabled' }],
    [{ chat_template_args: { custom: 1 } }, { custom: 1 }],
  ])('%j gives %j', (request, args) => {
    expect(templateArgs(request)).toEqual(args);
  });

  it('leaves a request without any alone', () => {
    expect(templateArgs({})).toBeUndefined();
  });

  it('renders "none" as Qwen3 renders disabled thinking: an empty think block', async () => {
    const { prompt } = await pre.preprocessChat({ model: 'qwen3', messages, reasoning_effort: 'none' });
    expect(prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    const { prompt: high } = await pre.preprocessChat({ model: 'qwen3', messages, reasoning_effort: 'high' });
    expect(high.endsWith('<|im_start|>assistant\n')).toBe(true);
  });
});

describe('media parts', () => {
  it('become Url items per part type in message order, a uuid-only image a UuidOnly item; input_audio stays out', () => {
    const media = gatherMedia([
      { role: 'system', content: 'plain' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'https://example.com' } },
          { type: 'image_url', image_url: { url: '' }, uuid: 'img-1' },
          { type: 'audio_url', audio_url: { url: 'https://example.com/a.wav' } },
          { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } },
        ],
      },
    ]);
    expect(media!.data).toEqual({ image_url: [{ Url: 'https://example.com/' }, { UuidOnly: 'img-1' }], audio_url: [{ Url: 'https://example.com/a.wav' }] });
    expect(media!.uuids).toEqual({ image_url: [null, 'img-1'], audio_url: [null] });
    expect(gatherMedia(messages)).toBeUndefined();
  });

  it('refuses, naming the part, a URL that is not absolute, a part with neither url nor uuid, and a data: URL over the limit', () => {
    const part = (p: unknown) => () => gatherMedia([{ role: 'user', content: [{ type: 'text', text: 'x' }, p] }], 100);
    expect(part({ type: 'image_url', image_url: { url: 'a.png' } })).toThrow(/^messages\[0\]\.content\[1\]: image_url\.url is not an absolute URL/);
    expect(part({ type: 'video_url', video_url: {} })).toThrow(/messages\[0\]\.content\[1\]: video_url part has neither `url` nor `uuid`/);
    expect(part({ type: 'video_url', video_url: { url: '' }, uuid: 'v' })).toThrow(/UUID-only cache reuse is not supported for media modality `video_url`/);
    expect(part({ type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100)}` } })).toThrow(
      /messages\[0\]\.content\[1\]: image_url data: URL is 122 bytes, exceeds the 100-byte limit\. To raise the limit, set DYN_MM_MAX_DATA_URL_MB/,
    );
    expect(DEFAULT_MAX_DATA_URL_BYTES).toBe(16 * 1024 * 1024);
  });
});

describe('stop token ids and the checks on n, batches and suffix', () => {
  it('takes stop as token ids into stop_token_ids, over a stop_token_ids field', async () => {
    const { request } = await pre.preprocessChat({ model: 'qwen3', messages, stop: [5, 6], stop_token_ids: [7] });
    expect(request.stop_conditions).toMatchObject({ stop: null, stop_token_ids: [5, 6] });
    const [completion] = await pre.preprocessCompletions({ model: 'qwen3', prompt: 'x', stop_token_ids: [7] });
    expect(completion!.stop_conditions).toMatchObject({ stop_token_ids: [7] });
  });

  it.each([
    [
      { messages, n: 2, temperature: 0 },
      'chat',
      'Validation: When n > 1, temperature must be greater than 0 to ensure diverse outputs. Got n=2, temperature=0',
    ],
    [{ messages, stop: Array.from({ length: 33 }, (_, i) => `s${i}`) }, 'chat', 'Maximum of 32 stop sequences allowed, got 33'],
    [{ messages, stop: [] }, 'chat', 'Validation: Stop sequences array cannot be empty'],
    [{ prompt: ['a', 'b', 'c'], n: 50 }, 'completions', 'Validation: Total choices (batch_size × n = 3 × 50 = 150) exceeds maximum of 128'],
    [{ prompt: ['a', ''] }, 'completions', 'Validation: Prompt string at index 1 cannot be empty'],
    [{ prompt: 'a', suffix: 'x'.repeat(10_001) }, 'completions', 'Validation: Suffix is too long, maximum 10000 characters'],
  ])("%j (%s) is refused with stock's message", async (body, kind, message) => {
    const run = kind === 'chat' ? pre.preprocessChat({ model: 'qwen3', ...body }) : pre.preprocessCompletions({ model: 'qwen3', ...body });
    await expect(run).rejects.toThrow(message);
  });

  it('asks the engine for one alternative for logprobs: true alone, and for prompt logprobs with echo, as stock does', async () => {
    const { request } = await pre.preprocessChat({ model: 'qwen3', messages, logprobs: true });
    expect(request.output_options).toMatchObject({ logprobs: 1 });
    const [echo] = await pre.preprocessCompletions({ model: 'qwen3', prompt: 'x', echo: true });
    expect(echo!.output_options).toMatchObject({ prompt_logprobs: 1 });
  });
});
