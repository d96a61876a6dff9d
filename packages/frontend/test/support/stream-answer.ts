// What the tests of the streamed-answer writers share: the Qwen3 tokenizer, and an answer's
// settings as the generation route makes them.
import { rmSync } from 'node:fs';
import { LocalModel, type Tokenizer } from '@dynamo/llm';
import { Context } from '@dynamo/runtime';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { afterAll, beforeAll } from 'vitest';

import { responseIds } from '../../src/openai/shapes.js';
import type { FrontendMetrics } from '../../src/metrics.js';
import { RequestTracker } from '../../src/metrics.js';
import { UsageCounter } from '../../src/openai/usage.js';

/** Loads the Qwen3 tokenizer before the file's tests (and removes its files after); call at the top level. */
export function useQwen3Tokenizer(): () => Tokenizer {
  let dir: string | undefined;
  let tokenizer: Tokenizer | undefined;
  beforeAll(async () => {
    dir = qwen3ModelDir();
    tokenizer = await (await LocalModel.load(dir)).tokenizer();
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return () => tokenizer!;
}

export type Surface = 'chat' | 'completions';

/** The settings of a one-choice streamed answer to request `req-1`, its metrics in `metrics`. */
export function answerSettings(metrics: FrontendMetrics, surface: Surface, promptTokens: number, includeUsage: boolean) {
  return {
    surface,
    ids: { ...responseIds(surface, 'req-1', 'Qwen/Qwen3 "0.6B"'), created: 1_795_000_000 },
    context: new Context({ id: 'req-1' }),
    choices: 1,
    usage: new UsageCounter([{ firstIndex: 0, choices: 1, countsPrompt: true, promptTokens }]),
    includeUsage,
    continuousUsage: false,
    tracker: new RequestTracker(metrics, 'qwen3', 'chat_completions', true),
    promptTokens,
    reasoningField: 'reasoning_content' as const,
    overloadStatus: 529,
    keepAliveMs: 0,
    newParser: undefined,
    singleToolCall: false,
    topLogprobs: undefined,
    echo: undefined,
  };
}
