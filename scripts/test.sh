#!/usr/bin/env bash
# The whole test suite: cargo tests of the pure crates, then every package's vitest suite.
# Ends with one line summing every runner: "N passed, N failed[, N skipped]".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

# The runtime's integration tests start real servers: Debian's nats-server and etcd.
if ! command -v nats-server >/dev/null || ! command -v etcd >/dev/null; then
  if command -v apt-get >/dev/null; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "test: installing nats-server and etcd-server with apt-get"
    $sudo apt-get update -qq </dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server etcd-server </dev/null >/dev/null
  else
    echo "test: nats-server and etcd are needed by the runtime tests; install them (Debian: apt-get install nats-server etcd-server)" >&2
  fi
fi
set +e

results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

echo "== cargo test"
cargo test --workspace --exclude dynamo-napi --color never 2>&1 | tee "$results/cargo.log"
cargo_status=${PIPESTATUS[0]}

echo "== typecheck (every package)"
pnpm turbo run typecheck --output-logs=errors-only </dev/null
typecheck_status=$?

echo "== vitest (every package)"
find . -name .vitest-results.json -not -path '*/node_modules/*' -delete
pnpm turbo run test --concurrency=1 --continue --output-logs=full -- \
  --reporter=default --reporter=json --outputFile.json=.vitest-results.json </dev/null
vitest_status=$?

TYPECHECK_FAILED=$([ "$typecheck_status" = 0 ] && echo 0 || echo 1) \
  node scripts/summarize-tests.mjs "$results/cargo.log" $(find . -name .vitest-results.json -not -path '*/node_modules/*')
summary_status=$?

[ "$cargo_status" = 0 ] && [ "$typecheck_status" = 0 ] && [ "$vitest_status" = 0 ] && [ "$summary_status" = 0 ]
