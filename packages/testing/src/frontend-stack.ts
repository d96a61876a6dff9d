// Real processes for frontend tests: dynamo-frontend, dynamo-sample-engine and the successor
// test engine, over one discovery backend and request plane: on loopback, or each process on a
// host of a cluster (cluster.ts) on its default settings.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

import { type Child, startChild } from './child.js';
import { EtcdServer } from './etcd.js';
import { freePort, waitFor } from './free-port.js';
import { type NatsTestServer, startNatsServer } from './nats.js';
import { loopback, type Placement } from './placement.js';
import { qwen3ModelDir } from './qwen3-model.js';
import { repoRoot } from './repo.js';
import { stockRuntimeEnv } from './stock-dynamo.js';

/** @dynamo/frontend's folder: its built CLI, its test fixtures and the packages it installs. */
export const packageDir = join(repoRoot, 'packages', 'frontend');
export const modelDir = qwen3ModelDir();
const frontendCli = join(packageDir, 'dist', 'cli.js');
export const sampleCli = join(packageDir, 'node_modules', '@dynamo', 'sample-engine', 'dist', 'cli.js');
const successorEngine = join(packageDir, 'test', 'fixtures', 'successor-engine.ts');
const replayEngine = join(packageDir, 'test', 'fixtures', 'replay-engine.ts');
const textEngine = join(packageDir, 'test', 'fixtures', 'text-engine.ts');
const loraCardsEngine = join(packageDir, 'test', 'fixtures', 'lora-cards-worker.ts');

/** Discovery backend and request plane of a stack. */
export type Setup = { name: string; discovery: 'file' | 'etcd'; plane: 'tcp' | 'nats' };
export const SETUPS: Setup[] = [
  { name: 'file + tcp', discovery: 'file', plane: 'tcp' },
  { name: 'etcd + NATS', discovery: 'etcd', plane: 'nats' },
];

/** The shared environment of one deployment, and the servers it needs. */
export class Deployment {
  readonly env: Record<string, string>;
  readonly children: Child[] = [];
  readonly #kvDir = mkdtempSync(join(tmpdir(), 'frontend-test-kv-'));
  #etcd: EtcdServer | undefined;
  #nats: NatsTestServer | undefined;

  private constructor(
    readonly setup: Setup,
    env: Record<string, string>,
  ) {
    this.env = {
      DYN_DISCOVERY_BACKEND: setup.discovery,
      DYN_REQUEST_PLANE: setup.plane,
      DYN_FILE_KV: this.#kvDir,
      DYN_LOG: 'warn',
      HF_HUB_OFFLINE: '1',
      ...env,
    };
  }

  /** The etcd of an etcd setup (started with it). */
  get etcd(): EtcdServer | undefined {
    return this.#etcd;
  }

  /** The nats-server of an etcd setup (started with it). */
  get nats(): NatsTestServer | undefined {
    return this.#nats;
  }

  /** Starts the servers `setup` needs (etcd and NATS for an etcd setup), on this machine or on the host `infra`. */
  static async start(setup: Setup, env: Record<string, string> = {}, infra: Placement = loopback): Promise<Deployment> {
    const d = new Deployment(setup, env);
    if (setup.discovery === 'etcd') {
      [d.#etcd, d.#nats] = await Promise.all([EtcdServer.start({ on: infra }), startNatsServer({ on: infra })]);
      Object.assign(d.env, { ETCD_ENDPOINTS: d.#etcd.endpoint, NATS_SERVER: d.#nats.url });
    }
    return d;
  }

  /**
   * Starts dynamo-frontend and waits until it answers /live: on loopback, or on the host `on` with
   * its default HTTP host (every address).
   */
  async frontend(args: string[] = [], env: Record<string, string> = {}, on: Placement = loopback): Promise<{ child: Child; url: string }> {
    const port = await freePort();
    const host = on === loopback ? ['--http-host', '127.0.0.1'] : [];
    const child = this.programProcess(frontendCli, [...host, '--http-port', String(port), ...args], env, on);
    const url = `http://${on.address}:${port}`;
    await waitFor('the frontend to listen', async () => (await fetch(`${url}/live`).catch(() => undefined))?.ok, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${child.stderr()}`);
    });
    return { child, url };
  }

  /** Starts a dynamo-sample-engine worker on the test model (on the host `on`, if given). */
  sampleWorker(args: string[] = [], env: Record<string, string> = {}, on: Placement = loopback): Child {
    return this.programProcess(sampleCli, ['--model-path', modelDir, ...args], env, on);
  }

  /**
   * The environment of a stock process in this deployment: on this machine it binds loopback only;
   * on a cluster host it keeps stock's defaults (its host's routable address).
   */
  stockEnv(env: Record<string, string> = {}, on: Placement = loopback): Record<string, string> {
    const local: Record<string, string> =
      on === loopback
        ? { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1', DYN_EVENT_PLANE_HOST: '127.0.0.1', DYN_SYSTEM_HOST: '127.0.0.1' }
        : {};
    return { ...this.env, ...local, ...stockRuntimeEnv, ...env };
  }

  /** Starts a process of the stock Dynamo venv's python (`-m module ...`) in this deployment, on loopback or on the host `on`. */
  stockProcess(python: string, args: string[], env: Record<string, string> = {}, on: Placement = loopback): Child {
    const child = startChild(python, args, this.stockEnv(env, on), { cwd: packageDir, on });
    this.children.push(child);
    return child;
  }

  /**
   * Starts the stock 1.6.1 frontend (`python -m dynamo.frontend`) of the venv's `python` on a free
   * port (loopback, or every address of the host `on`), on this deployment's discovery and request
   * plane; it is listening once it lists models.
   */
  async stockFrontend(python: string, args: string[] = [], on: Placement = loopback): Promise<{ child: Child; url: string }> {
    const port = await freePort();
    const { discovery, plane } = this.setup;
    const host = on === loopback ? ['--http-host', '127.0.0.1'] : [];
    const child = this.stockProcess(
      python,
      ['-m', 'dynamo.frontend', ...host, '--http-port', String(port), '--discovery-backend', discovery, '--request-plane', plane, ...args],
      {},
      on,
    );
    return { child, url: `http://${on.address}:${port}` };
  }

  /** Starts a replay-engine worker (scripted output, see the fixture) serving the test model as `model` in component `model`. */
  replayWorker(model: string, args: string[] = []): Child {
    return this.nodeProcess(['--import', 'tsx', replayEngine, '--model-path', modelDir, '--model-name', model, '--component', model, ...args]);
  }

  /** Starts a successor-engine worker on the test model. */
  successorWorker(args: string[] = [], env: Record<string, string> = {}): Child {
    return this.nodeProcess(['--import', 'tsx', successorEngine, '--model-path', modelDir, '--component', 'successor', ...args], env);
  }

  /** Starts a Text-input worker (component `text`) serving the test model as `modelName`. */
  textWorker(modelName: string): Child {
    return this.nodeProcess(['--import', 'tsx', textEngine, modelDir, modelName], {});
  }

  /**
   * Starts a worker (component `component`) that publishes the test model's `cards` as `modelName`:
   * `base`, `adapter=<name>`, `mismatch=<name>` (see the fixture). It prints `REQUEST <id> <json>` per request.
   */
  loraCardsWorker(modelName: string, component: string, cards: string[]): Child {
    return this.nodeProcess(['--import', 'tsx', loraCardsEngine, modelDir, modelName, component, ...cards], {});
  }

  /** Starts `node <args>` in this deployment (stopped with it). */
  nodeProcess(args: string[], env: Record<string, string> = {}): Child {
    const child = startChild(process.execPath, args, { ...this.env, ...env }, packageDir);
    this.children.push(child);
    return child;
  }

  /**
   * Runs a built CLI as a program, the way its users start it: its first lines start node with the
   * CLI's V8 flags. The `node` it finds is the one running this process.
   */
  programProcess(cli: string, args: string[], env: Record<string, string> = {}, on: Placement = loopback): Child {
    const path = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`;
    const child = startChild(cli, args, { ...this.env, PATH: path, ...env }, { cwd: packageDir, on });
    this.children.push(child);
    return child;
  }

  /** SIGTERM to every child (SIGKILL after 5 s), then the servers. */
  async stop(): Promise<void> {
    for (const c of this.children) c.child.kill('SIGTERM');
    await Promise.all(this.children.map((c) => Promise.race([c.exited, new Promise((r) => setTimeout(r, 5000))])));
    for (const c of this.children) c.kill();
    await this.#etcd?.dispose();
    await this.#nats?.stop();
    rmSync(this.#kvDir, { recursive: true, force: true });
  }
}

/** Waits until the frontend routes `model` to `count` instances (by its /health and /v1/models). */
export async function waitForModel(url: string, model: string, component: string, count: number, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    `${count} instance(s) of ${model} behind the frontend`,
    async () => {
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      if (count > 0 && !models.data.some((m) => m.id === model)) return false;
      if (count === 0) return !models.data.some((m) => m.id === model);
      const health = (await (await fetch(`${url}/health`)).json()) as { instances: Array<{ component: string }> };
      return health.instances.filter((i) => i.component === component).length === count;
    },
    timeoutMs,
  );
}

/** POSTs JSON. */
export function post(url: string, path: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    ...init,
    headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
    body: JSON.stringify(body),
  });
}

/** The `data:` payloads of an SSE body, parsed (up to `[DONE]`, which is returned as the string). */
export async function sseEvents(res: Response): Promise<Array<Record<string, unknown> | '[DONE]'>> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as Record<string, unknown>);
    });
}

/**
 * An `onChunk` that runs `act` once, at the `at`-th event or the first after it: a client that
 * falls behind gets chunks merged into fewer events, so an exact count may never come.
 */
export function once(at: number, act: () => void): (count: number) => void {
  let done = false;
  return (n) => {
    if (done || n < at) return;
    done = true;
    act();
  };
}

/** Reads an SSE completions or chat stream: its text, finish reasons, whether it ended with [DONE], and the message of its error frame, if any. */
export async function readStream(
  res: Response,
  onChunk?: (count: number) => void,
): Promise<{ text: string; finishes: string[]; done: boolean; error?: string }> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let text = '';
  let done = false;
  let error: string | undefined;
  const finishes: string[] = [];
  let count = 0;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buffer += value;
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (block === 'data: [DONE]') done = true;
      else if (block.startsWith('data: ')) {
        const data = JSON.parse(block.slice(6)) as {
          choices?: Array<{ text?: string; delta?: { content?: string | null }; finish_reason: string | null }>;
          error?: { message: string };
        };
        if (data.error) {
          error = data.error.message;
          continue;
        }
        const choice = data.choices?.[0];
        if (!choice) continue;
        text += choice.text ?? choice.delta?.content ?? '';
        if (choice.finish_reason) finishes.push(choice.finish_reason);
        onChunk?.(++count);
      }
    }
  }
  return { text, finishes, done, ...(error === undefined ? {} : { error }) };
}
