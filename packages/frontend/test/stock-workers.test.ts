// Our frontend in front of REAL stock Dynamo 1.6.1 workers from the test venv: the unified-backend
// sample engine (`dynamo.common.backend.sample_main`) and the Rust mocker (`dynamo.mocker`), on the
// embedded default (file discovery + TCP). Skipped, never passed, without PyPI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { stockPython } from '../../runtime/test/harness/stock-dynamo.js';
import { waitFor } from '../../runtime/test/harness/free-port.js';
import { Deployment, modelDir, post, SETUPS, sseEvents } from './support/stack.js';

const stock = stockPython();

describe.skipIf('skip' in stock)('our frontend serving stock Dynamo 1.6.1 workers', () => {
  let deployment: Deployment;
  let url = '';
  // The stock sample engine serves the model under its --model-name, which is also where it reads the model.
  const sampleName = modelDir;
  const mockerName = 'qwen3-mocker';

  beforeAll(async () => {
    const python = (stock as { python: string }).python;
    deployment = await Deployment.start(SETUPS[0]!);
    const common = ['--discovery-backend', 'file', '--request-plane', 'tcp'];
    deployment.stockProcess(python, ['-m', 'dynamo.common.backend.sample_main', '--model-name', sampleName, ...common, '--delay', '0']);
    deployment.stockProcess(python, ['-m', 'dynamo.mocker', '--model-path', modelDir, '--model-name', mockerName, '--speedup-ratio', '1000000', ...common]);
    ({ url } = await deployment.frontend());
    const listed = async () => ((await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
    await waitFor('both stock models behind our frontend', async () => (await listed()).includes(sampleName) && (await listed()).includes(mockerName), 120_000);
  }, 300_000);
  afterAll(() => deployment?.stop());

  const models = [
    { name: 'stock sample engine', model: () => sampleName, content: (n: number) => `"#$%&'()*+,-./0123456789`.slice(0, n) },
    { name: 'stock mocker', model: () => mockerName, content: undefined },
  ];

  describe.each(models)('$name', ({ model, content }) => {
    it('answers chat completions, whole and streamed, with usage', async () => {
      const body = { model: model(), messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 10 };
      const whole = (await (await post(url, '/v1/chat/completions', body)).json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { completion_tokens: number; prompt_tokens: number } };
      expect(whole.choices[0]!.finish_reason).toBe('length');
      expect(whole.choices[0]!.message.content.length).toBeGreaterThan(0);
      if (content) expect(whole.choices[0]!.message.content).toBe(content(10));
      expect(whole.usage.completion_tokens).toBe(10);
      expect(whole.usage.prompt_tokens).toBeGreaterThan(5);

      const events = await sseEvents(await post(url, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } }));
      expect(events.at(-1)).toBe('[DONE]');
      const chunks = events.slice(0, -1) as Array<{ choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: { completion_tokens: number } }>;
      const text = chunks.flatMap((c) => c.choices).map((c) => c.delta.content ?? '').join('');
      expect(text.length).toBeGreaterThan(0);
      if (content) expect(text).toBe(content(10));
      expect(chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean)).toEqual(['length']);
      expect(chunks.at(-1)!.usage?.completion_tokens).toBe(10);
    });

    it('answers completions', async () => {
      const res = await post(url, '/v1/completions', { model: model(), prompt: 'Once upon a time', max_tokens: 6 });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { choices: Array<{ text: string; finish_reason: string }>; usage: { completion_tokens: number } };
      expect(body.choices[0]!.text.length).toBeGreaterThan(0);
      if (content) expect(body.choices[0]!.text).toBe(content(6));
      expect(body.choices[0]!.finish_reason).toBe('length');
      expect(body.usage.completion_tokens).toBe(6);
    });
  });
});
