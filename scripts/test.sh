#!/usr/bin/env bash
# The whole test suite: cargo tests of the pure crates; every package's vitest suite on the
# machine's Node (20) and again on Node 22; then the six platform binaries are cross-built, every
# public package is packed, and an outside project installs them with npm, pnpm and yarn on
# Node 24. Ends with one line summing every runner: "N passed, N failed[, N skipped]".
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
# Node 22 and 24 from the npm registry's node-<os>-<arch> packages.
node22="$(bash scripts/node-runtime.sh 22)"
node24="$(bash scripts/node-runtime.sh 24)"
set +e

results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT
gates_failed=0

echo "== cargo test"
cargo test --workspace --exclude dynamo-napi --color never 2>&1 | tee "$results/cargo.log"
cargo_status=${PIPESTATUS[0]}

echo "== typecheck (every package)"
pnpm turbo run typecheck --output-logs=errors-only </dev/null || gates_failed=$((gates_failed + 1))

# Runs a vitest command with `bin` first on PATH; its JSON reports and exit status go to
# $results/<label>/.
vitest_run() {
  local label=$1 bin=$2 status
  shift 2
  find . -name .vitest-results.json -not -path '*/node_modules/*' -delete
  echo "== $label ($(PATH="$bin:$PATH" node --version))"
  PATH="$bin:$PATH" "$@" </dev/null
  status=$?
  mkdir -p "$results/$label"
  echo "$status" >"$results/$label/exit-status"
  while IFS= read -r report; do
    cp "$report" "$results/$label/$(dirname "${report#./}" | tr / _).json"
  done < <(find . -name .vitest-results.json -not -path '*/node_modules/*')
  return $status
}
reporters=(--reporter=default --reporter=json --outputFile.json=.vitest-results.json)
vitest_run "vitest, Node $(node -p 'process.versions.node.split(".")[0]')" "$(dirname "$(command -v node)")" pnpm turbo run test --concurrency=1 --continue --output-logs=full -- "${reporters[@]}"
vitest_machine_status=$?
vitest_run "vitest, Node 22" "$node22" pnpm turbo run test --concurrency=1 --continue --output-logs=full -- "${reporters[@]}"
vitest22_status=$?

echo "== release build (six platforms) and pack"
pnpm release:build </dev/null && pnpm release:pack </dev/null || gates_failed=$((gates_failed + 1))
vitest_run "pack-install, Node 24" "$node24" pnpm --filter @dynamo/tests run test:pack-install "${reporters[@]}"
pack_install_status=$?

GATES_FAILED=$gates_failed node scripts/summarize-tests.mjs "$results/cargo.log" "$results"
summary_status=$?

[ "$cargo_status" = 0 ] && [ "$gates_failed" = 0 ] && [ "$vitest_machine_status" = 0 ] && [ "$vitest22_status" = 0 ] &&
  [ "$pack_install_status" = 0 ] && [ "$summary_status" = 0 ]
