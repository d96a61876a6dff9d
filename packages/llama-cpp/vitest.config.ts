import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig({
  test: {
    // Each file runs SmolLM2 on every core llama.cpp is given; two at once would only slow both.
    fileParallelism: false,
  },
});
