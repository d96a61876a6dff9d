/** Passes `batches` through, calling `onFirst` when the first one arrives. */
export async function* onFirstOutput<T>(batches: AsyncIterable<T>, onFirst: () => void): AsyncGenerator<T> {
  let first = true;
  for await (const batch of batches) {
    if (first) {
      first = false;
      onFirst();
    }
    yield batch;
  }
}
