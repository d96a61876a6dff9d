import { InvalidArgument, type Log } from '@dynamo/runtime';

import { engineLog } from './logging.js';
import type { GenerateRequest } from './protocol/request.js';

/**
 * The data-parallel rank the router chose for `request` (`routing.dp_rank`), or undefined when it
 * chose none. Throws `InvalidArgument` when the hint is there but is not a non-negative integer
 * (a number or its decimal string, as Dynamo's Python helper accepts).
 */
export function forcedDpRank(request: Pick<GenerateRequest, 'routing'>): number | undefined {
  const hint = request.routing?.dp_rank;
  if (hint === undefined || hint === null) return undefined;
  const rank = typeof hint === 'string' && /^\s*\d+\s*$/.test(hint) ? Number(hint) : hint;
  if (typeof rank !== 'number' || !Number.isSafeInteger(rank) || rank < 0) {
    throw new InvalidArgument(`request.routing.dp_rank: must be a non-negative integer, got ${JSON.stringify(hint)}`);
  }
  return rank;
}

/**
 * `dpRank` if this engine owns it, else undefined so the engine picks a rank itself. An engine
 * owns the ranks `[dpStart, dpStart + dpSize)` (what it advertises as `dataParallelStartRank` and
 * `dataParallelSize`); with one rank or none there is nothing to choose. A rank outside the range
 * is logged as a warning naming `backendLabel`.
 */
export function validateGlobalDpRank(
  dpRank: number | undefined,
  dpStart: number,
  dpSize: number,
  backendLabel: string,
  log: Log = engineLog(backendLabel),
): number | undefined {
  if (dpRank === undefined || dpSize <= 1) return undefined;
  if (dpRank < dpStart || dpRank >= dpStart + dpSize) {
    log.warn(
      { dp_rank: dpRank, dp_start: dpStart, dp_size: dpSize },
      `dp_rank ${dpRank} is outside this engine's ranks [${dpStart}, ${dpStart + dpSize}); falling back to ${backendLabel} internal DP selection`,
    );
    return undefined;
  }
  return dpRank;
}
