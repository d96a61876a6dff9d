import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

import { testingRoot } from './repo.js';

/** The conversations every chat-template golden file is rendered from (by scripts/goldens/). */
export const conversations = JSON.parse(readFileSync(join(testingRoot, 'fixtures', 'chat-conversations.json'), 'utf8')) as Array<{
  name: string;
  body: Record<string, unknown>;
}>;

/** One rendered conversation: the reference's prompt (and ids), or the error it raised. */
export interface ChatGolden {
  name: string;
  prompt?: string;
  token_ids?: number[];
  error?: string;
}

/** What the goldens check: a Preprocessor, from this package's source or a built one. */
interface ChatPreprocessor {
  preprocessChat(body: unknown): Promise<{ request: { token_ids: number[] }; prompt: string }>;
}

const hasNullContent = (body: Record<string, unknown>) => (body.messages as Array<{ content?: unknown }>).some((m) => m.content === null);

/**
 * A test per conversation: the preprocessor renders the golden's prompt, with the ids `idsOf`
 * expects for it, or fails where the reference raised (but for a null content, which renders as
 * ""); and one that the goldens cover every
 * conversation, in order.
 */
export function chatGoldenTests(goldens: ChatGolden[], preprocessor: () => ChatPreprocessor, idsOf: (golden: ChatGolden) => number[]): void {
  it('covers every conversation of the shared set', () => {
    expect(goldens.map((g) => g.name)).toEqual(conversations.map((c) => c.name));
  });

  it.each(conversations.map((c, i) => [c.name, c, goldens[i]!] as const))('%s', async (_name, conversation, golden) => {
    if (golden.error !== undefined && !hasNullContent(conversation.body)) {
      await expect(preprocessor().preprocessChat(conversation.body)).rejects.toThrow();
      return;
    }
    if (golden.error !== undefined) {
      // Where the reference raised on a null content, we render it as "" (as vLLM does).
      const withEmpty = JSON.parse(JSON.stringify(conversation.body).replaceAll('"content":null', '"content":""')) as Record<string, unknown>;
      expect((await preprocessor().preprocessChat(conversation.body)).prompt).toBe((await preprocessor().preprocessChat(withEmpty)).prompt);
      return;
    }
    const { request, prompt } = await preprocessor().preprocessChat(conversation.body);
    expect(prompt).toBe(golden.prompt);
    expect(request.token_ids).toEqual(idsOf(golden));
  });
}
