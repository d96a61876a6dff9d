/**
 * Requests in flight per instance, as this frontend placed them: what stock's power-of-two and
 * least-loaded modes weigh (not the workers' load reports). A request is counted from its
 * placement to its end; placed again (a migration), it moves.
 */
export class Occupancy {
  readonly #counts = new Map<bigint, number>();
  readonly #placed = new Map<string, bigint>();

  /** Requests in flight on `instanceId`. */
  of(instanceId: bigint): number {
    return this.#counts.get(instanceId) ?? 0;
  }

  /** Counts `requestId` on `instanceId` (moving it there if it was elsewhere). */
  book(instanceId: bigint, requestId: string): void {
    this.release(requestId);
    this.#placed.set(requestId, instanceId);
    this.#counts.set(instanceId, this.of(instanceId) + 1);
  }

  /** The request ended. */
  release(requestId: string): void {
    const at = this.#placed.get(requestId);
    if (at === undefined) return;
    this.#placed.delete(requestId);
    const left = this.of(at) - 1;
    if (left > 0) this.#counts.set(at, left);
    else this.#counts.delete(at);
  }
}
