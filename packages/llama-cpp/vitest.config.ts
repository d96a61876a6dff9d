import { testConfig } from '@dynamo/testing/vitest-config';

// llama.cpp reads a batch's logits lazily and without a lock, and node-llama-cpp samples each
// sequence on its own libuv thread: parallel sequences only get their own logits with one pool
// thread. The pool reads this when first used, so it must be in the test processes' environment
// from their start (they inherit it from here).
process.env.UV_THREADPOOL_SIZE = '1';

export default testConfig({
  test: {
    // Each file runs SmolLM2 on every core llama.cpp is given; two at once would only slow both.
    fileParallelism: false,
  },
});
