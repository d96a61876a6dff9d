import { InvalidArgument } from '@dynamo/runtime';

import { Occupancy } from './occupancy.js';
import { type Candidate, fresh, type RouteRequest, type Router } from './router.js';

/** Candidates by ascending instance id, the order stock's round-robin cycles through. */
function byId(candidates: readonly Candidate[]): Candidate[] {
  return [...candidates].sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
}

/** Takes the instances in turn, by ascending instance id. */
export class RoundRobinRouter implements Router {
  readonly mode = 'round-robin';
  #next = 0;

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate {
    const pool = byId(fresh(candidates, request.failed));
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

/** The base of the modes that weigh the requests this frontend has in flight on each instance. */
abstract class OccupancyRouter implements Router {
  abstract readonly mode: string;
  protected readonly occupancy = new Occupancy();

  select(candidates: readonly Candidate[], request: RouteRequest): Candidate {
    const chosen = this.choose(fresh(candidates, request.failed));
    this.occupancy.book(chosen.instanceId, request.requestId);
    return chosen;
  }

  protected abstract choose(pool: readonly Candidate[]): Candidate;

  book(candidate: Candidate, request: RouteRequest): void {
    this.occupancy.book(candidate.instanceId, request.requestId);
  }

  finished(requestId: string): void {
    this.occupancy.release(requestId);
  }
}

/**
 * Stock's `power-of-two`: two distinct instances drawn at random, the one with fewer requests in
 * flight wins (the first drawn on a tie). With two instances the draw is always both, so the
 * less loaded one is always chosen.
 */
export class PowerOfTwoRouter extends OccupancyRouter {
  readonly mode = 'power-of-two';

  protected choose(pool: readonly Candidate[]): Candidate {
    const first = Math.floor(Math.random() * pool.length);
    if (pool.length === 1) return pool[first]!;
    const second = (first + 1 + Math.floor(Math.random() * (pool.length - 1))) % pool.length;
    const [a, b] = [pool[first]!, pool[second]!];
    return this.occupancy.of(a.instanceId) <= this.occupancy.of(b.instanceId) ? a : b;
  }
}

/** Stock's `least-loaded`: the instance with the fewest requests in flight, a tie broken at random. */
export class LeastLoadedRouter extends OccupancyRouter {
  readonly mode = 'least-loaded';

  protected choose(pool: readonly Candidate[]): Candidate {
    let best = pool[0]!;
    let bestLoad = this.occupancy.of(best.instanceId);
    let ties = 1;
    for (const candidate of pool.slice(1)) {
      const load = this.occupancy.of(candidate.instanceId);
      if (load < bestLoad) {
        [best, bestLoad, ties] = [candidate, load, 1];
      } else if (load === bestLoad) {
        // Reservoir sampling: each of the k tied instances ends up chosen with chance 1/k.
        ties += 1;
        if (Math.random() * ties < 1) best = candidate;
      }
    }
    return best;
  }
}

/**
 * Refuses to choose: every request names its instance (`x-dynamo-worker-instance-id` or
 * `nvext.backend_instance_id`) or belongs to a session already bound to one, which the frontend
 * honours before asking any router.
 */
export class DirectRouter implements Router {
  readonly mode = 'direct';

  select(): Candidate {
    throw new InvalidArgument(
      'router mode "direct" needs the instance in the request: the x-dynamo-worker-instance-id header or nvext.backend_instance_id (or a session already bound to one)',
    );
  }
}
