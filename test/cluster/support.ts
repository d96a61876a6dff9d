// What the cluster suite's files share: whether this machine can run it, a cluster with etcd and
// NATS on an infra host, and streams whose every token is checked after a fault.
import { LocalModel, type Tokenizer } from '@dynamo/llm';

import { Cluster } from '@dynamo/testing/cluster';
import { followIds, randomFirst, type StreamedCompletion, streamCompletion } from '@dynamo/testing/follow-prompt';
import { Deployment, modelDir, post, type Setup } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { counter, healthInstances } from '@dynamo/testing/interop-stack';
import { clusterUnsupported } from '@dynamo/testing/netns';
import { toxiproxyBinary } from '@dynamo/testing/toxiproxy';

/** Why the cluster suite cannot run here (needs root, ip, nft and Toxiproxy), or `undefined`. */
export const skipReason: string | undefined = await (async () => {
  const reason = await clusterUnsupported();
  if (reason !== undefined) return reason;
  const toxiproxy = toxiproxyBinary();
  return 'skip' in toxiproxy ? toxiproxy.skip : undefined;
})();
if (skipReason !== undefined) console.warn(`\n*** CLUSTER SUITE SKIPPED: ${skipReason} ***\n`);

/** The model every worker of the suite serves, and the component it registers under. */
export const MODEL = 'cluster';

/** A cluster of `hosts` (the first one, `infra`, runs etcd and NATS) and a deployment on it. */
export async function startCluster(hosts: string[], setup: Setup): Promise<{ cluster: Cluster; deployment: Deployment }> {
  const toxiproxy = toxiproxyBinary();
  const cluster = await Cluster.create(['infra', ...hosts], 'bin' in toxiproxy ? { toxiproxy: toxiproxy.bin } : {});
  try {
    const deployment = await Deployment.start(setup, {}, cluster.host('infra'));
    return { cluster, deployment };
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
}

/** The flags of a follow-prompt sample worker serving {@link MODEL}, `delayMs` before each token. */
export const followWorker = (delayMs: number, ...more: string[]) => [
  '--model-name',
  MODEL,
  '--component',
  MODEL,
  '--follow-prompt',
  '--delay-ms',
  String(delayMs),
  ...more,
];

let tokenizer: Tokenizer | undefined;
/** The text a follow-prompt worker answers prompt [first] with. */
export async function followText(first: number, n: number): Promise<string> {
  tokenizer ??= await (await LocalModel.load(modelDir)).tokenizer();
  return tokenizer.decode(followIds(first, n), false);
}

/** Streams in flight together, each with the answer it must give. */
export class Streams {
  readonly #first: number[];
  readonly #live: StreamedCompletion[];
  readonly done: Promise<StreamedCompletion[]>;
  readonly #maxTokens: number;

  /** Starts `n` streamed completions of `maxTokens` tokens from the frontend at `url`. */
  constructor(url: string, n: number, maxTokens: number, model = MODEL) {
    this.#maxTokens = maxTokens;
    this.#first = Array.from({ length: n }, () => randomFirst(maxTokens));
    this.#live = this.#first.map(() => ({ text: '', complete: false, totalMs: 0, events: 0 }));
    this.done = Promise.all(this.#first.map((first, i) => streamCompletion(url, model, first, maxTokens, (so) => (this.#live[i] = so))));
  }

  /** Waits until every stream has `events` text events (each stream then runs on its worker). */
  async reach(events: number, timeoutMs = 30_000): Promise<void> {
    await waitFor(`every stream past ${events} events`, () => this.#live.every((s) => s.events >= events), timeoutMs);
  }

  /** How many answers are complete and exactly what an unbroken stream would say, and the failures' messages. */
  async check(): Promise<{ exact: number; wrong: string[]; results: StreamedCompletion[] }> {
    const results = await this.done;
    const wrong: string[] = [];
    let exact = 0;
    for (const [i, r] of results.entries()) {
      if (r.complete && r.text === (await followText(this.#first[i]!, this.#maxTokens))) exact += 1;
      else
        wrong.push(
          r.error ??
            (r.complete ? `prompt [${this.#first[i]}]: wrong text ${JSON.stringify(r.text.slice(0, 40))}` : 'ended without its finish reason and [DONE]'),
        );
    }
    return { exact, wrong, results };
  }
}

/** How many instances of `component` the frontend at `url` routes to (its `/health`). */
export async function instances(url: string, component = MODEL): Promise<number> {
  return (await healthInstances(url, component)).length;
}

/** Tokens per KV block of the simulated caches. */
export const BLOCK = 16;
/** A prompt of `blocks` full KV blocks, distinct per `seed`. */
export const blockPrompt = (seed: number, blocks: number) => Array.from({ length: blocks * BLOCK }, (_, i) => 1000 + seed * 7919 + i);
/** A follow-prompt worker whose simulated prefix cache publishes KV events. */
export const kvWorker = (delayMs = 20) => followWorker(delayMs, '--simulate-kv-cache', '--kv-block-size', String(BLOCK), '--prefill-ms-per-token', '0.01');

/**
 * Sends `tokens` through the frontend at `url` (in kv mode); the prompt tokens its worker found
 * cached, and the cached prefix its router chose the worker for (0 by chance: a repeat can land on
 * the caching worker before the router has its KV event).
 */
export async function routed(url: string, tokens: number[]): Promise<{ cached: number; selected: number }> {
  const selected = () => counter(`${url}/metrics`, 'dynamo_component_router_kv_selected_cached_prefix_tokens_total');
  const before = await selected();
  const res = await post(url, '/v1/completions', { model: MODEL, prompt: tokens, max_tokens: 2 });
  const body = (await res.json()) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } | null }; error?: unknown };
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  return { cached: body.usage?.prompt_tokens_details?.cached_tokens ?? 0, selected: (await selected()) - before };
}
