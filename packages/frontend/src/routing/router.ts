import type { ModelDeploymentCard } from '@dynamo/llm';
import type { Client, EventScope } from '@dynamo/runtime';

import type { EffectiveThresholds } from './busy-thresholds.js';

/** An instance that can take a request for a model now, and the client that reaches it. */
export interface Candidate {
  readonly instanceId: bigint;
  readonly client: Client;
}

/** What a router may look at to place one request. */
export interface RouteRequest {
  /** The served model name. */
  readonly model: string;
  /** The LoRA adapter the request is for (the request named it as its model); stock's KV router seeds the prompt's block hashes with it. */
  readonly loraName?: string;
  /** The request id (also the worker-side context id). */
  readonly requestId: string;
  /** The prompt's token ids (Tokens-input models), for routers that weigh prefix reuse. */
  readonly tokenIds?: readonly number[];
  /** Instances this request already failed on (during migration); avoid them when possible. */
  readonly failed: ReadonlySet<bigint>;
  /** Aborts when the client leaves: a router that queues the request drops it then. */
  readonly signal?: AbortSignal;
  /** The candidates now: a router that queues the request reads them again when it lets it go. */
  readonly current?: () => readonly Candidate[];
}

/**
 * Chooses the instance a request goes to. One router serves one model; `candidates` is never
 * empty. The KV-aware router plugs in here.
 */
export interface Router {
  /** The routing mode's name, as `--router-mode` spells it. */
  readonly mode: string;
  select(candidates: readonly Candidate[], request: RouteRequest): Candidate | Promise<Candidate>;
  /**
   * A request goes to `candidate` without a choice (it named the instance, or its session is
   * bound there): routers that weigh what is in flight count it until `finished(requestId)`.
   * May throw `WorkerOverloaded` when the router finds that worker busy (stock's kv mode).
   */
  book?(candidate: Candidate, request: RouteRequest): void;
  /** An endpoint now serves the model (routers that follow workers' events subscribe here). */
  addEndpoint?(scope: EventScope): void;
  /** An instance no longer serves the model. */
  removeInstance?(instanceId: bigint): void;
  /** The request's first output arrived (its prompt is prefilled). */
  firstOutput?(requestId: string): void;
  /** The request ended, however it ended. */
  finished?(requestId: string): void;
  /**
   * The busy thresholds changed (`/busy_threshold`): a router that applies them itself (the KV
   * router, to its own view of each worker's load) takes the new ones.
   */
  setBusyThresholds?(thresholds: EffectiveThresholds): void;
  /** The model is no longer served. */
  close?(): Promise<void>;
}

/** Builds the router of one model, from the card its first worker registered. */
export type RouterFactory = (model: string, card: ModelDeploymentCard) => Router;

/** The built-in modes. */
export const ROUTER_MODES = ['round-robin', 'random', 'power-of-two', 'least-loaded', 'kv', 'direct'] as const;
export type RouterMode = (typeof ROUTER_MODES)[number];

/** Candidates the request has not failed on yet, unless it failed on all of them. */
export function fresh(candidates: readonly Candidate[], failed: ReadonlySet<bigint>): readonly Candidate[] {
  if (failed.size === 0) return candidates;
  const left = candidates.filter((c) => !failed.has(c.instanceId));
  return left.length > 0 ? left : candidates;
}
