import { Context, type GenerateChunk, runConformance } from '@dynamo/backend';
import { conformanceSuite } from '@dynamo/backend/vitest';
import { describe, expect, it } from 'vitest';
import { EchoEngine } from '../src/echo-engine.js';

describe('EchoEngine', () => {
  it('passes runConformance', async () => {
    await expect(runConformance(() => new EchoEngine())).resolves.toMatchObject({ passed: true });
  });

  it('echoes the prompt in chunks and reports usage', async () => {
    const engine = new EchoEngine({ tokensPerChunk: 2, pauseMs: 0 });
    await engine.start(1n);
    const chunks: GenerateChunk[] = [];
    for await (const chunk of engine.generate({ token_ids: [7, 8, 9], stop_conditions: { max_tokens: 5 } }, new Context())) chunks.push(chunk);
    expect(chunks.map((c) => c.token_ids)).toEqual([[7, 8], [9, 7], [8]]);
    expect(chunks.at(-1)).toMatchObject({ finish_reason: 'length', completion_usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } });
    expect(engine.inflight).toBe(0);
  });

  it('stops mid-pause when the request is stopped', async () => {
    const engine = new EchoEngine({ pauseMs: 60_000 });
    await engine.start(1n);
    const context = new Context();
    setTimeout(() => context.stopGenerating(), 20);
    const chunks: GenerateChunk[] = [];
    for await (const chunk of engine.generate({ token_ids: [1], stop_conditions: { max_tokens: 10 } }, context)) chunks.push(chunk);
    expect(chunks).toEqual([{ token_ids: [], finish_reason: 'cancelled', completion_usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 } }]);
  });
});

// One vitest test per conformance check, as an engine author would wire it.
conformanceSuite('EchoEngine conformance', () => new EchoEngine());
