#!/usr/bin/env bash
# The whole test suite. First the gates (cargo fmt and clippy, Biome, no new repeated code; a
# failing gate ends the run), then every package's vitest suite on the machine's Node (20) and again on
# Node 22, with the cargo tests of the pure crates, the type check and the release build of
# @dynamo/core's binary beside them (for this platform, or all six when the native code or the
# release scripts changed since the last six-platform build: scripts/release/verified-inputs.mjs);
# then every public package is packed and an outside project installs them with npm, pnpm and yarn
# on Node 24. Ends with a table of each step's wall time, then one line summing every runner:
# "N passed, N failed[, N skipped]".
set -euo pipefail
started=$(date +%s)
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

# Runs `step <label> <command...>` and records its wall time and exit status for the table.
step() {
  local label=$1 t0 status=0
  shift
  t0=$(date +%s)
  "$@" || status=$?
  printf '%s\t%s\t%s\n' "$label" "$(($(date +%s) - t0))" "$status" >>"$results/steps.tsv"
  return "$status"
}

# Gates, fast and first (after the package install, before the build): formatting and lints of
# both languages and repeated code. A failing gate ends the run here, so its finding comes in
# about two minutes instead of after the whole suite.
gate() {
  local label=$1
  shift
  echo "== gate: $label"
  if step "gate: $label" "$@" </dev/null; then return 0; fi
  echo "gate failed: $label" >&2
  gate_failures+=("$label")
}
after_install() {
  gate_failures=()
  gate "cargo fmt --all --check" cargo fmt --all --check
  gate "cargo clippy --workspace --all-targets -- -D warnings" cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
  gate "biome lint (TypeScript, JavaScript)" pnpm exec biome lint --error-on-warnings .
  gate "duplicates: no new repeats of six lines or more" node scripts/duplicates-gate.mjs
  if [ "${#gate_failures[@]}" -gt 0 ]; then
    printf '  failed gate: %s\n' "${gate_failures[@]}"
    echo "0 passed, ${#gate_failures[@]} failed"
    exit 1
  fi
}
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

install_servers() {
  if command -v nats-server >/dev/null && command -v etcd >/dev/null; then return 0; fi
  if ! command -v apt-get >/dev/null; then
    echo "test: nats-server and etcd are needed by the runtime tests; install them (Debian: apt-get install nats-server etcd-server)" >&2
    return 0
  fi
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "test: installing nats-server and etcd-server with apt-get"
  $sudo apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server etcd-server </dev/null >/dev/null
}
# The runtime's integration tests start real servers: Debian's nats-server and etcd.
step "install nats-server and etcd (apt-get)" install_servers
# Node 22 and 24 from the npm registry's node-<os>-<arch> packages.
step "install Node 22 and 24" bash scripts/node-runtime.sh 22 >"$results/node22"
step "install Node 22 and 24" bash scripts/node-runtime.sh 24 >"$results/node24"
node22="$(cat "$results/node22")"
node24="$(cat "$results/node24")"
set +e

# The six-platform cross build runs when its inputs changed since the last one; otherwise this
# platform's binary is built and packed alone, which is all the install test below uses.
if node scripts/release/verified-inputs.mjs --check; then
  this_platform="$(node --input-type=module -e "import { currentPlatform } from './packages/core/platforms.js'; console.log(currentPlatform())")"
  release_targets=(--target "$this_platform")
  release_what="$this_platform; the six-platform build is current"
else
  release_targets=()
  release_what="six platforms: crates/, Cargo.*, packages/core or scripts/release changed since the last six-platform build"
fi

# The CPU-bound steps that time nothing (cargo test, the type check, the release build) run at
# idle priority beside the vitest runs, which mostly wait on processes, sockets and timers: they
# use the CPU those leave idle instead of adding their own time to the run. Neither side touches
# what the other reads: turbo runs the type check alone (--only: no build outputs restored), and
# cargo writes only target/.
cargo_test() { cargo test --workspace --exclude dynamo-napi --color never >"$results/cargo.log" 2>&1; }
typecheck() { pnpm turbo run typecheck --only --output-logs=errors-only; }
release_build() { pnpm release:build "${release_targets[@]}"; }
beside_vitest() {
  renice -n 19 -p "$BASHPID" >/dev/null
  step "cargo test (idle priority, beside vitest)" cargo_test; echo $? >"$results/cargo.status"
  step "typecheck (idle priority, beside vitest)" typecheck; echo $? >"$results/typecheck.status"
  step "release build, $release_what (idle priority, beside vitest)" release_build; echo $? >"$results/release.status"
}
beside_vitest </dev/null >"$results/beside.log" 2>&1 &
beside=$!

# Runs a vitest command with `bin` first on PATH; its JSON reports and exit status go to
# $results/<label>/.
vitest_run() {
  local label=$1 bin=$2 status
  shift 2
  find . -name .vitest-results.json -not -path '*/node_modules/*' -delete
  echo "== $label ($(PATH="$bin:$PATH" node --version))"
  PATH="$bin:$PATH" step "$label" "$@" </dev/null
  status=$?
  mkdir -p "$results/$label"
  echo "$status" >"$results/$label/exit-status"
  while IFS= read -r report; do
    cp "$report" "$results/$label/$(dirname "${report#./}" | tr / _).json"
  done < <(find . -name .vitest-results.json -not -path '*/node_modules/*')
  return $status
}
reporters=(--reporter=default --reporter=json --outputFile.json=.vitest-results.json)
# --only: the packages were built above; the reporter flags would make turbo rebuild them.
vitest_all=(pnpm turbo run test --only --concurrency=1 --continue --output-logs=full -- "${reporters[@]}")
vitest_run "vitest, Node $(node -p 'process.versions.node.split(".")[0]')" "$(dirname "$(command -v node)")" "${vitest_all[@]}"
vitest_machine_status=$?
# The repeat pass checks our code on Node 22; tests of a real model's text through both frontends
# (minutes of CPU-bound generation, and nothing in them depends on the Node version) skip there,
# saying so (DYNAMO_TS_REPEAT_PASS).
DYNAMO_TS_REPEAT_PASS=1 vitest_run "vitest, Node 22" "$node22" "${vitest_all[@]}"
vitest22_status=$?

step "waiting for the steps beside vitest" wait "$beside"
echo "== cargo test, typecheck and release build (they ran beside the vitest runs)"
cat "$results/cargo.log" "$results/beside.log"
cargo_status=$(cat "$results/cargo.status" 2>/dev/null || echo 1)
gates_failed=0
[ "$(cat "$results/typecheck.status" 2>/dev/null)" = 0 ] || gates_failed=$((gates_failed + 1))
release_status=$(cat "$results/release.status" 2>/dev/null || echo 1)

echo "== release pack ($release_what)"
if [ "$release_status" = 0 ]; then
  step "release pack" pnpm release:pack "${release_targets[@]}" </dev/null || gates_failed=$((gates_failed + 1))
else
  gates_failed=$((gates_failed + 1))
fi
vitest_run "pack-install, Node 24" "$node24" pnpm --filter @dynamo/tests run test:pack-install "${reporters[@]}"
pack_install_status=$?

echo "== steps (wall-clock time)"
awk -F'\t' -v total="$(($(date +%s) - started))" '
  { secs[$1] += $2; if ($3 != 0) failed[$1] = $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  END {
    for (i = 0; i < n; i++) printf "  %-72s %4d:%02d%s\n", order[i], secs[order[i]] / 60, secs[order[i]] % 60, (order[i] in failed) ? "  (exit " failed[order[i]] ")" : ""
    printf "  %-72s %4d:%02d\n", "total", total / 60, total % 60
  }' "$results/steps.tsv"

GATES_FAILED=$gates_failed node scripts/summarize-tests.mjs "$results/cargo.log" "$results"
summary_status=$?

[ "$cargo_status" = 0 ] && [ "$gates_failed" = 0 ] && [ "$vitest_machine_status" = 0 ] && [ "$vitest22_status" = 0 ] &&
  [ "$pack_install_status" = 0 ] && [ "$summary_status" = 0 ]
