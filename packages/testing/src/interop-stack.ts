// One deployment of the interop matrix: our processes and the real stock Dynamo 1.6.1 release (from
// the cached test venv) side by side, on one discovery backend and request plane, on loopback.
import { join } from 'node:path';

import type { Child } from './child.js';
import { waitFor } from './free-port.js';
import { Deployment, modelDir, sampleCli, type Setup } from './frontend-stack.js';
import { repoRoot } from './repo.js';

/** Every pairing runs on each of these. */
export const MATRIX_SETUPS: Setup[] = [
  { name: 'file + tcp', discovery: 'file', plane: 'tcp' },
  { name: 'etcd + tcp', discovery: 'etcd', plane: 'tcp' },
  { name: 'etcd + NATS', discovery: 'etcd', plane: 'nats' },
];

/** A frontend's address and process. */
export interface Frontend {
  name: 'stock' | 'our';
  url: string;
  child: Child;
}

/** Our processes and stock ones in one deployment. */
export class InteropStack {
  private constructor(
    readonly setup: Setup,
    readonly python: string,
    readonly deployment: Deployment,
  ) {}

  static async start(setup: Setup, python: string): Promise<InteropStack> {
    return new InteropStack(setup, python, await Deployment.start(setup));
  }

  /** The discovery and request-plane flags every stock process takes. */
  get #flags(): string[] {
    return ['--discovery-backend', this.setup.discovery, '--request-plane', this.setup.plane];
  }

  async ourFrontend(args: string[] = [], env: Record<string, string> = {}): Promise<Frontend> {
    return { name: 'our', ...(await this.deployment.frontend(args, env)) };
  }

  /** `python -m dynamo.frontend`, once it answers `/v1/models`. */
  async stockFrontend(args: string[] = []): Promise<Frontend> {
    const { child, url } = await this.deployment.stockFrontend(this.python, args);
    await waitFor('the stock frontend to listen', async () => (await fetch(`${url}/v1/models`).catch(() => undefined))?.ok, 120_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${child.stderr().slice(-5000)}`);
    });
    return { name: 'stock', url, child };
  }

  /** dynamo-sample-engine serving `modelPath` as `name` in `component`. */
  ourSample(name: string, component: string, args: string[] = [], env: Record<string, string> = {}, modelPath = modelDir): Child {
    return this.deployment.programProcess(sampleCli, ['--model-path', modelPath, '--model-name', name, '--component', component, ...args], env);
  }

  /** examples/custom-engine (the echo engine) serving the test model as `name` in `component`. */
  customEngine(name: string, component: string, args: string[] = []): Child {
    const main = join(repoRoot, 'examples', 'custom-engine', 'src', 'main.ts');
    return this.deployment.nodeProcess(['--import', 'tsx', main, '--model-path', modelDir, '--model-name', name, '--component', component, ...args]);
  }

  /** The stock unified-backend sample engine; it serves the model folder's path as the model's name. */
  stockSample(modelPath: string, component: string, args: string[] = [], env: Record<string, string> = {}): Child {
    return this.deployment.stockProcess(
      this.python,
      ['-m', 'dynamo.common.backend.sample_main', '--model-name', modelPath, '--component', component, ...this.#flags, ...args],
      env,
    );
  }

  /** The stock Rust mocker serving the test model as `name`, as fast as it goes. */
  stockMocker(name: string): Child {
    return this.deployment.stockProcess(this.python, [
      '-m',
      'dynamo.mocker',
      '--model-path',
      modelDir,
      '--model-name',
      name,
      '--speedup-ratio',
      '1000000',
      ...this.#flags,
    ]);
  }

  /**
   * test/interop/python/lora_engine.py: the stock sample engine (its model's name is the folder's
   * path) with simulated LoRA adapters behind the stock worker's /v1/loras on `systemPort`.
   */
  stockLoraEngine(modelPath: string, component: string, systemPort: number): Child {
    const script = join(repoRoot, 'test', 'interop', 'python', 'lora_engine.py');
    const env = { DYN_LORA_ENABLED: 'true', DYN_SYSTEM_PORT: String(systemPort) };
    return this.deployment.stockProcess(this.python, [script, '--model-name', modelPath, '--component', component, '--delay', '0', ...this.#flags], env);
  }

  /** test/interop/python/llm_worker.py: a stock-bindings worker that prints each request it gets. */
  stockLlmWorker(args: string[]): Child {
    return this.deployment.stockProcess(this.python, [join(repoRoot, 'test', 'interop', 'python', 'llm_worker.py'), '--model-path', modelDir, ...args]);
  }

  stop(): Promise<void> {
    return this.deployment.stop();
  }
}

/** The ids of the models a frontend lists. */
export async function listedModels(url: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  return res?.ok ? ((await res.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id) : [];
}

/** The instances of `component`'s generate endpoint that a frontend's `/health` lists. */
export async function healthInstances(url: string, component: string): Promise<bigint[]> {
  const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  if (!res) return [];
  const text = await res.text();
  // Instance ids are u64: read them from the text, not through a double.
  const health = JSON.parse(text.replace(/"instance_id":(\d+)/g, '"instance_id":"$1"')) as {
    instances?: Array<{ component: string; endpoint: string; instance_id: string }>;
  };
  return (health.instances ?? []).filter((i) => i.component === component && i.endpoint === 'generate').map((i) => BigInt(i.instance_id));
}

/** Sums a counter's samples in a Prometheus text page. */
export async function counter(metricsUrl: string, name: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** The values of every sample whose line starts with `prefix` (a metric name and `{`, say) in a frontend's `/metrics`. */
export async function samples(url: string, prefix: string): Promise<number[]> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(prefix))
    .map((l) => Number(l.split(' ').at(-1)));
}
