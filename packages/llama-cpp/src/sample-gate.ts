import type { LlamaContext } from 'node-llama-cpp';

/** The native handle's sampling call, as node-llama-cpp 3.21.1 calls it. */
type NativeContext = { sampleToken: (...args: unknown[]) => Promise<unknown> };

/**
 * Makes `context` sample one sequence at a time.
 *
 * After a decode, the llama.cpp that node-llama-cpp 3.21.1 bundles (v0.4.0) puts the batch's
 * outputs in order lazily, on the first read of the logits, and without a lock; node-llama-cpp
 * samples each sequence of the batch as its own task on the libuv thread pool. Two samples at
 * once can each reorder the same rows, so a sequence reads another's logits. Running them one at
 * a time keeps each on its own logits, and leaves the rest of the pool to everything else: with a
 * pool of one thread instead, a long prompt's evaluation held back the runtime's file-discovery
 * touches past the TTL, and the worker's registration expired mid-request.
 *
 * node-llama-cpp offers no option for it: this wraps the context's native handle (`_ctx`), the
 * only place this package reaches into node-llama-cpp's internals. Throws when that handle is not
 * as expected (another node-llama-cpp version), so a change cannot go unnoticed.
 */
export function gateSampling(context: LlamaContext): void {
  const native = (context as unknown as { _ctx?: NativeContext })._ctx;
  if (typeof native?.sampleToken !== 'function') {
    throw new Error("node-llama-cpp's context has no native sampleToken: this engine is written for node-llama-cpp 3.21.1");
  }
  const sample = native.sampleToken.bind(native);
  let last: Promise<unknown> = Promise.resolve();
  // The native method is read-only on the prototype; an own property of the instance takes its place.
  Object.defineProperty(native, 'sampleToken', {
    value: (...args: unknown[]) => {
      const run = last.then(() => sample(...args));
      last = run.catch(() => undefined);
      return run;
    },
  });
}
