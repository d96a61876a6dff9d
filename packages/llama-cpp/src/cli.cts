#!/usr/bin/env node
// dynamo-llama-cpp: starts the worker (ESM) from the package's CommonJS bin entry.
void import('./serve.js');
