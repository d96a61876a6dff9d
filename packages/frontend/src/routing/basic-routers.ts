import { InvalidArgument } from '@dynamo/runtime';
import { type Candidate, fresh, type RouteRequest, type Router } from './router.js';

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
