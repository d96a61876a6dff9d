/**
 * Round-robin between a process's streams, a time slice per turn of the event loop. A stream
 * whose items come without waiting on I/O (an engine at zero delay, a backlog of frames already
 * read) would otherwise run to its end in microtasks while the loop cannot read new requests or
 * accept connections, so new requests' first tokens waited behind every running stream's last
 * ones. A stream may take its first step of a turn at once, and more while the turn is younger
 * than {@link SLICE_MS}; past that it waits for the next turn, after the loop has read its sockets.
 * (One item per stream per turn made a lone fast stream three times slower: a loop turn per item.)
 */

/** How long streams may keep going before the loop gets to read its sockets. */
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

/** One stream's place in the round: call {@link StreamTurns.take} before each step it takes. */
export class StreamTurns {
  #sentIn = -1;

  /** `undefined` when the stream may go on now, else a promise for the next turn. */
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
