// Prefill/decode disaggregation across stock Dynamo 1.6.1 and us, both ways, model-free: each
// frontend drives each side's sample-engine pair (prefill and decode workers of one model in one
// namespace), and a model whose decode workers need a prefill worker is answered 503 (and not
// listed) while none is there. A stock decode worker refuses a request without `prefill_result`, so an answer through
// ours shows it ran the prefill hop as stock's does. SmolLM2 with a real KV transfer is in
// test/llama-cpp/disaggregation.test.ts. Skipped, never passed, without PyPI.
import { post } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { type Frontend, InteropStack, listedModels } from '@dynamo/testing/interop-stack';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** DISAGGREGATION INTEROP SKIPPED: ${stock.skip} ***\n`);

const SETUP = { name: 'file + tcp', discovery: 'file', plane: 'tcp' } as const;
const modelDir = qwen3ModelDir();
/** Stock's sample engine serves its model folder's path as the model's name. */
const STOCK_MODEL = modelDir;
const OUR_MODEL = 'qwen3-disagg';
const LONELY = 'qwen3-decode-only';
type Completion = {
  choices?: Array<{ text: string; finish_reason: string }>;
  usage?: { completion_tokens: number };
  message?: string;
  error?: { message?: string };
};

async function complete(url: string, model: string): Promise<{ status: number; body: Completion }> {
  const res = await post(url, '/v1/completions', { model, prompt: 'Tell me a story', max_tokens: 6 });
  return { status: res.status, body: (await res.json()) as Completion };
}

describe.skipIf('skip' in stock)('prefill and decode workers of either side behind either frontend', () => {
  let stack: InteropStack;
  const frontends: Frontend[] = [];

  beforeAll(async () => {
    stack = await InteropStack.start(SETUP, (stock as { python: string }).python);
    stack.stockSample(modelDir, 'sprefill', ['--disaggregation-mode', 'prefill', '--delay', '0']);
    stack.stockSample(modelDir, 'sdecode', ['--disaggregation-mode', 'decode', '--delay', '0']);
    stack.ourSample(OUR_MODEL, 'oprefill', ['--disaggregation-mode', 'prefill', '--delay-ms', '0']);
    stack.ourSample(OUR_MODEL, 'odecode', ['--disaggregation-mode', 'decode', '--delay-ms', '0']);
    stack.ourSample(LONELY, 'lonely', ['--disaggregation-mode', 'decode', '--delay-ms', '0']);
    frontends.push(await stack.ourFrontend(), await stack.stockFrontend());
    for (const { name, url } of frontends) {
      await waitFor(
        `the ${name} frontend to list both disaggregated models`,
        async () => {
          const listed = await listedModels(url);
          return listed.includes(OUR_MODEL) && listed.includes(STOCK_MODEL);
        },
        120_000,
      );
    }
  }, 300_000);
  afterAll(() => stack?.stop());

  it("answers through each frontend with each side's pair: the prefill worker first, then the decode worker with its prefill_result", async () => {
    for (const frontend of frontends) {
      for (const model of [OUR_MODEL, STOCK_MODEL]) {
        // A frontend may list the decode workers a moment before it has paired them with their prefill workers.
        let answer: { status: number; body: Completion } | undefined;
        await waitFor(`${frontend.name} frontend to answer ${model}`, async () => (answer = await complete(frontend.url, model)).status === 200, 60_000).catch(
          () => {},
        );
        expect(answer?.status, `${frontend.name} frontend, ${model}: ${JSON.stringify(answer?.body)}`).toBe(200);
        expect(answer!.body.usage?.completion_tokens, `${frontend.name} frontend, ${model}`).toBe(6);
        expect(answer!.body.choices?.[0]?.finish_reason, `${frontend.name} frontend, ${model}`).toBe('length');
      }
    }
  }, 240_000);

  it('answers 503 "not ready" for a model whose decode workers need a prefill worker and have none, and leaves it unlisted, through each frontend', async () => {
    for (const frontend of frontends) {
      // 404 until the frontend has seen the decode worker's card.
      let answer: { status: number; body: Completion } | undefined;
      await waitFor(
        `${frontend.name} frontend to answer 503 for ${LONELY}`,
        async () => (answer = await complete(frontend.url, LONELY)).status === 503,
        60_000,
      ).catch(() => {});
      expect(answer?.status, `${frontend.name} frontend: ${JSON.stringify(answer?.body)}`).toBe(503);
      expect(JSON.stringify(answer!.body), frontend.name).toContain(`Model \`${LONELY}\` is not ready to serve requests yet`);
      expect(await listedModels(frontend.url), frontend.name).not.toContain(LONELY);
      const ready = await fetch(`${frontend.url}/v1/models/${LONELY}/ready`);
      const readiness = (await ready.json()) as { ready: boolean; namespaces: Record<string, { missing_worker_types: string[] }> };
      expect({ status: ready.status, ready: readiness.ready, missing: readiness.namespaces.dynamo?.missing_worker_types }, frontend.name).toEqual({
        status: 503,
        ready: false,
        missing: ['prefill'],
      });
      const paired = (await (await fetch(`${frontend.url}/v1/models/${OUR_MODEL}/ready`)).json()) as {
        ready: boolean;
        namespaces: Record<string, { present: string[] }>;
      };
      expect({ ready: paired.ready, present: [...(paired.namespaces.dynamo?.present ?? [])].sort() }, frontend.name).toEqual({
        ready: true,
        present: ['decode', 'prefill'],
      });
    }
  }, 150_000);
});
