#!/usr/bin/env bash
# The whole test suite. First the gates (cargo fmt and clippy, Biome, no new repeated code; a
# failing gate ends the run) and the build, with what the tests fetch from the network beside them;
# then every package's vitest suite on the machine's Node (20), and on Node 22 what can differ
# between Node versions (repeat_pass below), in two lanes side by side, with the cargo tests of the
# pure crates, the type check and @dynamo/core's binary for the pack-install beside them (this
# platform's from the build, or all six release binaries when the native code or the release
# scripts changed since the last six-platform build: scripts/release/verified-inputs.mjs); then
# every public package is packed and an outside project installs them with npm, pnpm and yarn on
# Node 24. Ends with each test file's time, a table of each step's wall and CPU time, then one line
# summing every runner: "N passed, N failed[, N skipped]".
set -euo pipefail
started=$(date +%s)
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

# Sets cpu_seconds to the CPU time (user + system) of this shell's finished children so far.
# `times` is a builtin and writes to the file from this shell itself: in a subshell (a command
# substitution) its counts would start at zero.
cpu_now() {
  local file="$results/times.$BASHPID"
  times >"$file"
  cpu_seconds=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$file")
}

# Runs `step <label> <command...>` and records its wall time, the CPU time of what it ran and its
# exit status for the table.
step() {
  local label=$1 t0 cpu0 status=0
  shift
  t0=$(date +%s)
  cpu_now
  cpu0=$cpu_seconds
  "$@" || status=$?
  cpu_now
  printf '%s\t%s\t%s\t%s\n' "$label" "$(($(date +%s) - t0))" "$status" "$((cpu_seconds - cpu0))" >>"$results/steps.tsv"
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
  fetch_beside_build </dev/null >"$results/fetch.log" 2>&1 &
  fetching=$!
  gate_failures=()
  gate "cargo fmt --all --check" cargo fmt --all --check
  gate "cargo clippy --workspace --all-targets -- -D warnings" cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
  gate "biome lint (TypeScript, JavaScript)" pnpm exec biome lint --error-on-warnings .
  gate "biome format: the tree as the formatter writes it (pnpm exec biome format --write .)" pnpm exec biome format .
  gate "duplicates: no new repeats of six lines or more" node scripts/duplicates-gate.mjs
  if [ "${#gate_failures[@]}" -gt 0 ]; then
    kill "$fetching" 2>/dev/null
    printf '  failed gate: %s\n' "${gate_failures[@]}"
    echo "0 passed, ${#gate_failures[@]} failed"
    exit 1
  fi
}

install_servers() {
  if command -v nats-server >/dev/null && command -v etcd >/dev/null && command -v nft >/dev/null; then return 0; fi
  if ! command -v apt-get >/dev/null; then
    echo "test: nats-server and etcd are needed by the runtime tests, nft by the cluster suite; install them (Debian: apt-get install nats-server etcd-server nftables)" >&2
    return 0
  fi
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "test: installing nats-server, etcd-server and nftables with apt-get"
  $sudo apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server etcd-server nftables </dev/null >/dev/null
}
# The stock Dynamo venv (created on first use, then only checked), once for every test that
# runs stock processes: they get its python in DYNAMO_TS_STOCK_PYTHON. Without PyPI (exit 3) the
# tests check again themselves and report skipped.
stock_venv() {
  local out status=0
  out="$(bash packages/testing/stock-dynamo/setup-venv.sh --print-python)" || status=$?
  if [ "$status" = 0 ]; then echo "${out##*$'\n'}" >"$results/stock-python"; fi
  [ "$status" = 0 ] || [ "$status" = 3 ]
}
# The coding-agent CLIs (cached outside the workspace, then only checked), once for the agent
# tests: they get the folder in DYNAMO_TS_AGENT_CLIS_BIN. Without the npm registry (exit 3) the
# tests check again themselves and report skipped.
agent_clis() {
  local out status=0
  out="$(bash packages/testing/agent-clis/setup-agents.sh --print-bin)" || status=$?
  if [ "$status" = 0 ]; then echo "${out##*$'\n'}" >"$results/agent-clis-bin"; fi
  [ "$status" = 0 ] || [ "$status" = 3 ]
}
# Toxiproxy for the cluster suite (built from the Go module proxy once, then cached outside the
# workspace), handed to the tests in DYNAMO_TS_TOXIPROXY_BIN. Without the proxy (exit 3) the suite
# checks again itself and reports skipped.
toxiproxy() {
  local out status=0
  out="$(bash packages/testing/toxiproxy/setup-toxiproxy.sh --print-bin)" || status=$?
  if [ "$status" = 0 ]; then echo "${out##*$'\n'}" >"$results/toxiproxy-bin"; fi
  [ "$status" = 0 ] || [ "$status" = 3 ]
}
# What the tests need from the network, fetched beside the gates and the build, which wait on the
# CPU: the servers the runtime's integration tests start (Debian's nats-server and etcd), Node 22
# and 24 (the npm registry's node-<os>-<arch> packages), the SmolLM2 test model, the stock venv,
# the coding-agent CLIs and Toxiproxy.
fetch_beside_build() {
  step "install nats-server and etcd (apt-get; beside the gates and build)" install_servers
  step "install Node 22 and 24 (beside the gates and build)" bash scripts/node-runtime.sh 22 >"$results/node22"
  step "install Node 22 and 24 (beside the gates and build)" bash scripts/node-runtime.sh 24 >"$results/node24"
  step "fetch the SmolLM2 test model (beside the gates and build)" node scripts/test-model.mjs
  step "stock Dynamo venv (beside the gates and build)" stock_venv
  step "coding-agent CLIs (beside the gates and build)" agent_clis
  step "Toxiproxy for the cluster suite (beside the gates and build)" toxiproxy
}
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

echo "== fetched beside the gates and the build"
step "waiting for what was fetched beside the build" wait "$fetching" || { cat "$results/fetch.log"; exit 1; }
cat "$results/fetch.log"
if [ -f "$results/stock-python" ]; then export DYNAMO_TS_STOCK_PYTHON="$(cat "$results/stock-python")"; fi
if [ -f "$results/agent-clis-bin" ]; then export DYNAMO_TS_AGENT_CLIS_BIN="$(cat "$results/agent-clis-bin")"; fi
if [ -f "$results/toxiproxy-bin" ]; then export DYNAMO_TS_TOXIPROXY_BIN="$(cat "$results/toxiproxy-bin")"; fi
node22="$(cat "$results/node22")"
node24="$(cat "$results/node24")"
set +e

# The six-platform cross build runs when its inputs changed since the last one. Otherwise these
# very inputs are on record as built for all six, and a release binary of this platform would add
# minutes of compiling that only a release needs: the pack-install test packs the build's binary
# (its debug info stripped) in this platform's package instead, which is all it installs.
this_platform="$(node --input-type=module -e "import { currentPlatform } from './packages/core/platforms.js'; console.log(currentPlatform())")"
if node scripts/release/verified-inputs.mjs --check; then
  release_targets=(--target "$this_platform")
  release_what="$this_platform, the build's binary; the six-platform build of these inputs is on record"
  release_build() {
    local binary="dynamo-core.$this_platform.node"
    mkdir -p "packages/core/npm/$this_platform"
    strip --strip-debug -o "packages/core/npm/$this_platform/$binary" "packages/core/$binary" 2>/dev/null ||
      cp "packages/core/$binary" "packages/core/npm/$this_platform/$binary"
  }
else
  release_targets=()
  release_what="six platforms: crates/, Cargo.*, packages/core or scripts/release changed since the last six-platform build"
  release_build() { pnpm release:build; }
fi

# The steps that time nothing (cargo test, the type check, the release binary) run beside the
# vitest runs, which mostly wait on processes, sockets and timers, one job at a time so that the
# tests keep a core. At the normal priority: a lower one would starve them whenever another busy
# process shares the machine (tests must pass beside one), and the run would wait on them at its
# end. Neither side touches what the other reads: turbo runs the type check alone (--only: no build
# outputs restored), and cargo writes only target/.
cargo_test() { cargo test --jobs 1 --workspace --exclude dynamo-napi --color never >"$results/cargo.log" 2>&1; }
typecheck() { pnpm turbo run typecheck --only --concurrency=1 --output-logs=errors-only; }
beside_vitest() {
  step "cargo test (beside vitest)" cargo_test; echo $? >"$results/cargo.status"
  step "typecheck (beside vitest)" typecheck; echo $? >"$results/typecheck.status"
  step "release binary: $release_what (beside vitest)" release_build; echo $? >"$results/release.status"
}
beside_vitest </dev/null >"$results/beside.log" 2>&1 &
beside=$!

# `vitest_run <label> <slug> <bin> <command...>` runs a vitest command with `bin` first on PATH:
# @RUN@ in its arguments becomes the slug, which names its report files (.vitest-results.<slug>.json and, from
# scripts/vitest-file-times.mjs, .vitest-times.<slug>.json), so runs side by side keep theirs
# apart. The reports, the per-file times and the exit status go to $results/<label>/.
vitest_run() {
  local label=$1 slug=$2 bin=$3 status
  shift 3
  find . \( -name ".vitest-results.$slug.json" -o -name ".vitest-times.$slug.json" \) -not -path '*/node_modules/*' -delete
  echo "== $label ($(PATH="$bin:$PATH" node --version))"
  DYNAMO_TS_TIMES_FILE=".vitest-times.$slug.json" PATH="$bin:$PATH" step "$label" "${@//@RUN@/$slug}" </dev/null
  status=$?
  mkdir -p "$results/$label"
  echo "$status" >"$results/$label/exit-status"
  while IFS= read -r report; do
    cp "$report" "$results/$label/$(dirname "${report#./}" | tr / _).json"
  done < <(find . -name ".vitest-results.$slug.json" -not -path '*/node_modules/*')
  while IFS= read -r times; do
    cp "$times" "$results/$label/$(dirname "${times#./}" | tr / _).times.json"
  done < <(find . -name ".vitest-times.$slug.json" -not -path '*/node_modules/*')
  return $status
}
reporters=(--reporter=default --reporter=json --outputFile.json=.vitest-results.@RUN@.json "--reporter=$PWD/scripts/vitest-file-times.mjs")
# --only: the packages were built above; the reporter flags would make turbo rebuild them.
turbo_test=(pnpm turbo run test --only --concurrency=1 --continue --output-logs=full)
node20="$(dirname "$(command -v node)")"
v20="Node $(node -p 'process.versions.node.split(".")[0]')"

# The repeat pass, on Node 22, runs only what can differ between Node versions: loading native
# addons, the runtime's sockets, timers and child processes, and the CLIs' start and shutdown
# (signals, drains, exit codes). Everything else is our JavaScript on the same language and the
# same npm packages, checked once on the first pass: parsing, preprocessing, routing decisions,
# HTTP shapes, the interop matrix and clients (wire bytes), a real model's text. The pack-install
# below runs the released packages on Node 24. A package and the files to run there ("" = all):
repeat_pass=(
  "@dynamo/core|"                                   # the native addon loads and every export is there
  "@dynamo/runtime|"                                # sockets, timers, child processes, etcd, NATS, ZMQ (a native addon)
  "@dynamo/backend|test/lifecycle.test.ts"          # a worker's signals, graceful drain, exit codes
  "@dynamo/sample-engine|test/cli.test.ts"          # dynamo-sample-engine: start, --help, bad flags, exit codes
  "@dynamo/frontend|test/lifecycle.test.ts"         # dynamo-frontend: start, TLS, SIGTERM drain, exit 0
  "@dynamo/sdk|test/dynamo-serve.test.ts"           # dynamo-serve: a process tree, restarts, SIGTERM
  "@dynamo/llama-cpp|test/engine.test.ts"           # node-llama-cpp's native binding running SmolLM2
)
repeat_pass_run() {
  local entry status=0
  for entry in "${repeat_pass[@]}"; do
    # shellcheck disable=SC2086 # the file list splits on purpose
    pnpm --filter "${entry%%|*}" exec vitest run ${entry#*|} "$@" || status=1
  done
  return $status
}

# Two lanes side by side (and the cluster lane below), each running one test file at a time: the cross-package tests (test/:
# the interop matrix, clients, SmolLM2 through both frontends, chaos, the main job) and then the
# repeat pass in one, every package and example in the other (about as long). The vitest runs
# wait on processes far more than they compute (one lane leaves a core idle most of the time), and
# the tests' bounds are made for a busy machine. Each lane's exit status goes to
# $results/lane-<name>.
lane() {
  local name=$1 status=0
  shift
  "$@" || status=$?
  echo "$status" >"$results/lane-$name"
}
cross_package_lane() {
  local status=0
  vitest_run "vitest, $v20: test/" node20-test "$node20" "${turbo_test[@]}" --filter=@dynamo/tests -- --exclude 'cluster/**' "${reporters[@]}" || status=1
  vitest_run "vitest, Node 22: what can differ between Node versions" node22 "$node22" repeat_pass_run "${reporters[@]}" || status=1
  return $status
}
packages_lane() {
  vitest_run "vitest, $v20: packages and examples" node20 "$node20" "${turbo_test[@]}" --filter='!@dynamo/tests' -- "${reporters[@]}"
}
# The cluster suite (test/cluster/) is a third lane: it mostly waits out network timeouts (a lost
# host's keep-alive, an etcd lease), so beside the other two it costs little and keeps it off theirs.
cluster_lane() {
  vitest_run "vitest, $v20: the cluster suite (hosts on a bridge)" node20-cluster "$node20" pnpm --filter @dynamo/tests exec vitest run cluster/ "${reporters[@]}"
}
lane test cross_package_lane &
lane_test=$!
lane cluster cluster_lane &
lane_cluster=$!
lane packages packages_lane
wait "$lane_test" "$lane_cluster"
vitest_status=$(( $(cat "$results/lane-test" 2>/dev/null || echo 1) + $(cat "$results/lane-cluster" 2>/dev/null || echo 1) + $(cat "$results/lane-packages" 2>/dev/null || echo 1) ))

step "waiting for the steps beside vitest" wait "$beside"
echo "== cargo test, typecheck and the release binary (they ran beside the vitest runs)"
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
vitest_run "pack-install, Node 24" node24 "$node24" pnpm --filter @dynamo/tests run test:pack-install "${reporters[@]}"
pack_install_status=$?

echo "== test files (wall time in each vitest run, with the tests that ran; files under 3 s summed per package)"
node scripts/test-times.mjs "$results"

echo "== steps (wall-clock time; CPU time of what the step ran, on all cores)"
cpu_now
awk -F'\t' -v total="$(($(date +%s) - started))" -v cpu="$cpu_seconds" '
  function mmss(t) { return sprintf("%d:%02d", t / 60, t % 60) }
  { secs[$1] += $2; cpus[$1] += $4; if ($3 != 0) failed[$1] = $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  END {
    printf "  %-80s %7s %7s\n", "", "wall", "CPU"
    for (i = 0; i < n; i++) printf "  %-80s %7s %7s%s\n", order[i], mmss(secs[order[i]]), mmss(cpus[order[i]]), (order[i] in failed) ? "  (exit " failed[order[i]] ")" : ""
    printf "  %-80s %7s %7s\n", "total", mmss(total), mmss(cpu)
  }' "$results/steps.tsv"

GATES_FAILED=$gates_failed node scripts/summarize-tests.mjs "$results/cargo.log" "$results"
summary_status=$?

[ "$cargo_status" = 0 ] && [ "$gates_failed" = 0 ] && [ "$vitest_status" = 0 ] &&
  [ "$pack_install_status" = 0 ] && [ "$summary_status" = 0 ]
