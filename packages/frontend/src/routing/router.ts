import type { ModelDeploymentCard } from '@dynamo/llm';
import { type Client, type EventScope, InvalidArgument } from '@dynamo/runtime';
import { KvAwareRouter, type KvRouterDeps, type KvRouterSettings } from './kv-router.js';

/** An instance that can take a request for a model now, and the client that reaches it. */
export interface Candidate {
  readonly instanceId: bigint;
  readonly client: Client;
}

/** What a router may look at to place one request. */
export interface RouteRequest {
  /** The served model name. */
  readonly model: string;
  /** The request id (also the worker-side context id). */
  readonly requestId: string;
  /** The prompt's token ids (Tokens-input models), for routers that weigh prefix reuse. */
  readonly tokenIds?: readonly number[];
  /** Instances this request already failed on (during migration); avoid them when possible. */
  readonly failed: ReadonlySet<bigint>;
}

/**
 * Chooses the instance a request goes to. One router serves one model; `candidates` is never
 * empty. The KV-aware router plugs in here.
 */
export interface Router {
  /** The routing mode's name, as `--router-mode` spells it. */
  readonly mode: string;
  select(candidates: readonly Candidate[], request: RouteRequest): Candidate;
  /** An endpoint now serves the model (routers that follow workers' events subscribe here). */
  addEndpoint?(scope: EventScope): void;
  /** An instance no longer serves the model. */
  removeInstance?(instanceId: bigint): void;
  /** The request's first output arrived (its prompt is prefilled). */
  firstOutput?(requestId: string): void;
  /** The request ended, however it ended. */
  finished?(requestId: string): void;
  /** The model is no longer served. */
  close?(): Promise<void>;
}

/** Builds the router of one model, from the card its first worker registered. */
export type RouterFactory = (model: string, card: ModelDeploymentCard) => Router;

/** The built-in modes. */
export const ROUTER_MODES = ['round-robin', 'random', 'kv', 'direct'] as const;
export type RouterMode = (typeof ROUTER_MODES)[number];

/** Candidates the request has not failed on yet, unless it failed on all of them. */
export function fresh(candidates: readonly Candidate[], failed: ReadonlySet<bigint>): readonly Candidate[] {
  if (failed.size === 0) return candidates;
  const left = candidates.filter((c) => !failed.has(c.instanceId));
  return left.length > 0 ? left : candidates;
}

/** Takes the instances in turn. */
export class RoundRobinRouter implements Router {
  readonly mode = 'round-robin';
  #next = 0;

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate {
    const pool = fresh(candidates, request.failed);
    const chosen = pool[this.#next % pool.length]!;
    this.#next = (this.#next + 1) % 0x4000_0000;
    return chosen;
  }
}

/** Picks an instance uniformly at random. */
export class RandomRouter implements Router {
  readonly mode = 'random';

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate {
    const pool = fresh(candidates, request.failed);
    return pool[Math.floor(Math.random() * pool.length)]!;
  }
}

/**
 * Refuses to choose: every request names its instance (`x-dynamo-worker-instance-id` or
 * `nvext.backend_instance_id`), which the pipeline honours before asking any router.
 */
export class DirectRouter implements Router {
  readonly mode = 'direct';

  select(): Candidate {
    throw new InvalidArgument(
      'router mode "direct" needs the instance in the request: the x-dynamo-worker-instance-id header or nvext.backend_instance_id',
    );
  }
}

/** The factory for a built-in mode; `kv` needs what the KV router reads events from. */
export function routerFactory(mode: RouterMode, kv?: { settings: KvRouterSettings; deps: KvRouterDeps }): RouterFactory {
  switch (mode) {
    case 'round-robin':
      return () => new RoundRobinRouter();
    case 'random':
      return () => new RandomRouter();
    case 'direct':
      return () => new DirectRouter();
    case 'kv':
      if (!kv) throw new TypeError('router mode kv needs the KV router settings and runtime');
      return (model, card) => new KvAwareRouter(model, card, kv.settings, kv.deps);
  }
}
