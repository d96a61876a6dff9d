/** What a source's pending `next()` settled with. */
type Settled<T> = { at: number; result?: IteratorResult<T>; error?: unknown };

/**
 * The items of several async streams as they arrive, whichever stream they come from. An error
 * of any stream ends the merge with that error; when the merge ends early (an error, or the
 * consumer leaves), every stream not finished yet is closed, so its producer is told to stop.
 */
export async function* mergeStreams<T>(sources: ReadonlyArray<AsyncIterable<T>>): AsyncGenerator<T> {
  if (sources.length === 1) {
    yield* sources[0]!;
    return;
  }
  const iterators = sources.map((source) => source[Symbol.asyncIterator]());
  const pending = new Map<number, Promise<Settled<T>>>();
  // A pull never rejects: a failed stream is reported as data, so no rejection is left unheard.
  const pull = (at: number) =>
    pending.set(
      at,
      iterators[at]!.next().then(
        (result) => ({ at, result }),
        (error: unknown) => ({ at, error }),
      ),
    );
  for (let at = 0; at < iterators.length; at++) pull(at);
  try {
    while (pending.size > 0) {
      const { at, result, error } = await Promise.race(pending.values());
      pending.delete(at);
      if (error !== undefined || !result) throw error;
      if (result.done) continue;
      pull(at);
      yield result.value;
    }
  } finally {
    // Not awaited: a stream blocked in next() finishes its close once that settles.
    for (const at of pending.keys()) void iterators[at]!.return?.(undefined).catch(() => {});
  }
}
