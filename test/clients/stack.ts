// The deployment the client-library tests talk to: our dynamo-frontend (file + tcp) in front of
// dynamo-sample-engine (the Qwen3 tokenizer, no weights) and dynamo-llama-cpp (SmolLM2-135M), and
// short-lived "victim" workers that are killed mid-stream to show how a failed stream reaches a client.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { LocalModel } from '@dynamo/llm';

import { Deployment, modelDir, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { smolLm2 } from '../../scripts/test-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const llamaCli = join(here, '..', 'node_modules', '@dynamo', 'llama-cpp', 'dist', 'cli.cjs');

/** An engine behind the frontend, and how a client talks to its model. */
export interface Engine {
  name: 'sample engine' | 'SmolLM2 on dynamo-llama-cpp';
  kind: 'sample' | 'llama';
  model: string;
  /** The model's name on the workers that compute its embeddings. */
  embedModel: string;
  /** Chat messages this model answers well (SmolLM2 wants a system message). */
  messages(question: string): Array<{ role: 'system' | 'user'; content: string }>;
}

export const SAMPLE: Engine = {
  name: 'sample engine',
  kind: 'sample',
  model: 'qwen3-sample',
  embedModel: 'qwen3-sample-embed',
  messages: (q) => [{ role: 'user', content: q }],
};
export const SMOLLM2: Engine = {
  name: 'SmolLM2 on dynamo-llama-cpp',
  kind: 'llama',
  model: 'smollm2',
  embedModel: 'smollm2-embed',
  messages: (q) => [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: q },
  ],
};
export const ENGINES: readonly Engine[] = [SAMPLE, SMOLLM2];

/** A running client-test deployment. */
export interface ClientStack {
  url: string;
  deployment: Deployment;
  modelPath: string;
  /** The sample engine's text for tokens 1..n (what it answers with `max_tokens: n`). */
  sampleText(n: number): string;
  /** The token ids the frontend makes of an embedding input for the sample engine's model. */
  sampleTokens(text: string): number[];
  /**
   * A worker of `engine` serving its own model name, slow enough to be killed mid-stream: call
   * `kill()` once the client has its first chunk. The frontend has no migration budget for it.
   */
  victim(engine: Engine, name: string): Promise<{ model: string; body: Record<string, unknown>; pid: number; kill(): void }>;
  stop(): Promise<void>;
}

/** How {@link startClientStack} sets the deployment up. */
export interface ClientStackOptions {
  frontendArgs?: string[];
  /** Start each engine's embedding worker too (default true). */
  embeddings?: boolean;
}

/** Starts the frontend and both engines, and waits until both models are served. */
export async function startClientStack(options: ClientStackOptions = {}): Promise<ClientStack> {
  const { frontendArgs = [], embeddings = true } = options;
  const modelPath = await smolLm2();
  const deployment = await Deployment.start(SETUPS[0]!);
  deployment.sampleWorker(['--model-name', SAMPLE.model, '--delay-ms', '0']);
  deployment.nodeProcess([llamaCli, '--model-path', modelPath, '--model-name', SMOLLM2.model, '--parallel', '4', '--context-size', '1024']);
  if (embeddings) {
    // Embeddings of the same models, from workers of their own, as embedding workers are deployed.
    deployment.sampleWorker(['--model-name', SAMPLE.embedModel, '--component', 'sampleembed', '--endpoint-types', 'embedding']);
    deployment.nodeProcess([llamaCli, '--model-path', modelPath, '--model-name', SMOLLM2.embedModel, '--component', 'llamaembed', '--embedding']);
  }
  const { url } = await deployment.frontend(['--migration-limit', '0', ...frontendArgs]);
  await waitForModel(url, SAMPLE.model, 'sample', 1, 60_000);
  await waitForModel(url, SMOLLM2.model, 'llama', 1, 120_000);
  if (embeddings) {
    await waitForModel(url, SAMPLE.embedModel, 'sampleembed', 1, 60_000);
    await waitForModel(url, SMOLLM2.embedModel, 'llamaembed', 1, 120_000);
  }
  const tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
  const children: Child[] = [];
  return {
    url,
    deployment,
    modelPath,
    sampleText: (n) =>
      tokenizer.decode(
        Uint32Array.from({ length: n }, (_, i) => i + 1),
        false,
      ),
    sampleTokens: (text) => Array.from(tokenizer.encodeSync(text, true)),
    async victim(engine, name) {
      const model = `${engine.model}-${name}`;
      const child =
        engine.kind === 'sample'
          ? deployment.sampleWorker(['--model-name', model, '--component', model, '--delay-ms', '50'])
          : deployment.nodeProcess([
              llamaCli,
              '--model-path',
              modelPath,
              '--model-name',
              model,
              '--component',
              model,
              '--parallel',
              '1',
              '--context-size',
              '1024',
            ]);
      children.push(child);
      await waitForModel(url, model, model, 1, 120_000);
      const body = { model, messages: engine.messages('Tell me a long story.'), max_tokens: 400, min_tokens: 400, stream: true };
      return {
        model,
        body,
        pid: child.child.pid!,
        kill: () => {
          child.kill();
          void waitFor(`victim ${model} to exit`, () => child.child.exitCode !== null || child.child.signalCode !== null, 10_000).catch(() => {});
        },
      };
    },
    stop: () => deployment.stop(),
  };
}
