#!/usr/bin/env node
// dynamo-llama-cpp. A CommonJS entry so that this line runs before Node first uses its libuv
// thread pool, which reads UV_THREADPOOL_SIZE then: llama.cpp reads a batch's logits lazily and
// without a lock, and node-llama-cpp samples each sequence on its own pool thread, so parallel
// sequences only get their own logits with one pool thread. The worker itself is ESM.
process.env.UV_THREADPOOL_SIZE = '1';
void import('./serve.js');
