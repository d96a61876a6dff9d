// The official OpenAI Python SDK against our frontend, with the sample engine and with SmolLM2 on
// dynamo-llama-cpp behind it: python/openai_client.py makes every call through the real client and
// reports what it returned or raised; this file checks the report.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { sampleEmbedding, sampleLogprobs } from '@dynamo/sample-engine';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { stockPython } from '@dynamo/testing/stock-dynamo';
import { type ClientStack, ENGINES, type Engine, SAMPLE, SMOLLM2, startClientStack } from './stack.js';

const script = join(dirname(fileURLToPath(import.meta.url)), 'python', 'openai_client.py');
// The OpenAI Python SDK is in the test venv beside stock Dynamo (setup-venv.sh's TEST_PINS).
const venv = stockPython();
const skip = 'skip' in venv ? ` (skipped: ${venv.skip})` : '';

type SdkError = { class: string; message: string; param: string | null; status: number | null } | null;
interface Report {
  chat: { content: string; finish: string; usage: Record<string, unknown> };
  chat_stream: { content: string; finish: string; usage: Record<string, unknown> };
  completion: string;
  completion_stream: string;
  not_found: SdkError;
  bad_request: SdkError;
  mid_stream: SdkError;
  n3: { indices: number[]; texts: string[] };
  n3_stream: string[];
  logprobs: Array<{ token: string; logprob: number; bytes: number[] | null; top: number[] }>;
  logprobs_usage: number;
  batch: { indices: number[]; completion_tokens: number };
  echo: { plain: string; echoed: string };
  embeddings: { base64: number[][]; float: number[][]; prompt_tokens: number };
  responses: { whole: string; streamed: string; final: string };
  tool_round_trip?: { name: string; arguments: Record<string, unknown>; answer: string };
}

let stack: ClientStack;
beforeAll(async () => {
  if (!skip) stack = await startClientStack();
}, 300_000);
afterAll(() => stack?.stop());

describe.skipIf(skip !== '').each(ENGINES)(`the OpenAI Python SDK, $name${skip}`, (engine: Engine) => {
  let report: Report;
  beforeAll(async () => {
    const victim = await stack.victim(engine, 'python-sdk');
    const config = {
      model: engine.model,
      embed_model: engine.embedModel,
      ...(engine === SMOLLM2 && { instructions: 'You are a helpful assistant.', tool_round_trip: true }),
      messages: engine.messages('What is the capital of France?'),
      victim_body: victim.body,
      victim_pid: victim.pid,
    };
    const run = spawnSync((venv as { python: string }).python, [script, stack.url, JSON.stringify(config)], { encoding: 'utf8', timeout: 240_000 });
    if (run.status !== 0) throw new Error(`openai_client.py failed (${run.status}):\n${run.stderr}`);
    report = JSON.parse(run.stdout) as Report;
  }, 300_000);

  it('answers chat and completions whole and streamed alike', () => {
    // The streamed repeat may find the prompt in the engine's prefix cache: the same counts, more cached tokens.
    const counts = ({ usage: { prompt_tokens_details: _, ...usage }, ...rest }: Report['chat']) => ({ ...rest, usage });
    expect(counts(report.chat_stream)).toEqual(counts(report.chat));
    if (engine === SAMPLE) expect(report.chat.content).toBe(stack.sampleText(12));
    else expect(report.chat.content).toContain('Paris');
    expect(report.completion_stream).toBe(report.completion);
  });

  it('raises NotFoundError naming the model, BadRequestError naming the field', () => {
    expect(report.not_found).toMatchObject({ class: 'NotFoundError', status: 404 });
    expect(report.not_found!.message).toContain(`${engine.model}-nope`);
    expect(report.bad_request).toMatchObject({ class: 'BadRequestError', status: 400, param: 'temperature' });
    expect(report.bad_request!.message).toContain('temperature');
  });

  it('raises APIError with the message when the stream fails after it started', () => {
    expect(report.mid_stream).toMatchObject({ class: 'APIError' });
    expect(report.mid_stream!.message).toMatch(/Stream ended before generation completed|disconnected|ended|closed/i);
  });

  it('gives n: 3 choices, whole and streamed', () => {
    expect(report.n3.indices).toEqual([0, 1, 2]);
    expect(report.n3_stream).toEqual(report.n3.texts);
    for (const text of report.n3.texts) expect(text.length).toBeGreaterThan(0);
  });

  it('returns logprobs with 3 top alternatives per token, each at most 0', () => {
    expect(report.logprobs).toHaveLength(report.logprobs_usage);
    for (const entry of report.logprobs) {
      expect(entry.top).toHaveLength(3);
      for (const value of [entry.logprob, ...entry.top]) expect(value).toBeLessThanOrEqual(0);
      expect(entry.bytes).toEqual(Array.from(Buffer.from(entry.token)));
    }
    if (engine === SAMPLE) {
      report.logprobs.forEach((entry, i) => {
        const expected = sampleLogprobs(i + 1, 3);
        expect(entry.logprob).toBeCloseTo(expected.log_probs![0]!, 9);
        expect(entry.top).toEqual(expected.top_logprobs![0]!.map((t) => expect.closeTo(t.logprob as number, 9)));
      });
    } else {
      // Greedy: the chosen token is the most likely one.
      for (const entry of report.logprobs) expect(entry.logprob).toBeCloseTo(entry.top[0]!, 6);
    }
  });

  it('answers a batch of prompts with n choices each, and echoes the prompt', () => {
    expect(report.batch.indices).toEqual([0, 1, 2, 3]);
    expect(report.batch.completion_tokens).toBeGreaterThanOrEqual(engine === SAMPLE ? 16 : 4);
    expect(report.echo.echoed).toBe(`The capital of France is${report.echo.plain}`);
  });

  it('embeds a batch of strings, as floats and as base64 decoding to the same vectors', () => {
    const { base64, float } = report.embeddings;
    expect(base64).toHaveLength(2);
    expect(float.map((v) => v.map(Math.fround))).toEqual(base64.map((v) => v.map(Math.fround)));
    if (engine === SAMPLE) expect(base64[0]!.map(Math.fround)).toEqual(Array.from(sampleEmbedding(stack.sampleTokens('The cat sat on the mat.'))));
    else expect(base64[0]).toHaveLength(576);
    expect(report.embeddings.prompt_tokens).toBeGreaterThan(0);
  });

  it('answers through the Responses API, whole and streamed alike', () => {
    expect(report.responses.streamed).toBe(report.responses.whole);
    expect(report.responses.final).toBe(report.responses.whole);
    if (engine === SAMPLE) expect(report.responses.whole).toBe(stack.sampleText(12));
    else expect(report.responses.whole).toContain('Paris');
  });

  it.runIf(engine === SMOLLM2)('makes a function call through the Responses API and answers from its output (the sample engine makes no calls)', () => {
    expect(report.tool_round_trip).toMatchObject({ name: 'get_weather', arguments: { city: 'Paris' } });
    expect(report.tool_round_trip!.answer.toLowerCase()).toContain('sunny');
  });
});
