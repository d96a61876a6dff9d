/**
 * Round-robin between a worker's response streams, a time slice per turn of the event loop. A
 * handler whose items come without waiting on I/O (an engine at zero delay, a batch of ready
 * tokens) would otherwise run to its end in microtasks while the loop cannot read new requests,
 * so their first tokens waited behind every running stream's last ones. A stream may send its
 * first item of a turn at once, and more while the turn is younger than {@link SLICE_MS}; past
 * that it waits for the next turn, after the loop has read its sockets. (One item per stream per
 * turn made a lone fast stream three times slower: a loop turn per item.)
 */

/** How long streams may keep sending before the loop gets to read new requests. */
const SLICE_MS = 1;

/** Turns of the event loop in which some stream sent, counted at the check phase that ends each. */
let turn = 0;
let turnStarted = performance.now();
let turnEnd: Promise<void> | undefined;

/** The end of the current turn: one `setImmediate` shared by every stream that waits for it. */
function endOfTurn(): Promise<void> {
  turnEnd ??= new Promise((resolve) =>
    setImmediate(() => {
      turn += 1;
      turnStarted = performance.now();
      turnEnd = undefined;
      resolve();
    }),
  );
  return turnEnd;
}

/** One stream's place in the round: call {@link StreamTurns.take} before each item it sends. */
export class StreamTurns {
  #sentIn = -1;

  /** `undefined` when the stream may send now, else a promise for the next turn. */
  take(): Promise<void> | undefined {
    if (this.#sentIn !== turn) {
      this.#sentIn = turn;
      void endOfTurn();
      return undefined;
    }
    if (performance.now() - turnStarted < SLICE_MS) return undefined;
    return endOfTurn().then(() => {
      this.#sentIn = turn;
      void endOfTurn();
    });
  }
}
