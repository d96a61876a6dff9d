#!/usr/bin/env bash
# Re-run the wire observations behind WIRE-NOTES.md against the stock
# ai-dynamo-runtime 1.6.x and write the raw captures (JSONL, one message per
# line with exact hex + decoded form) to OUTDIR (default: a new temp dir).
#
#   test/interop/capture.sh [OUTDIR]
#
# Uses file discovery in a private temp dir; starts one stock worker per
# codec, a logging proxy (python/wire_proxy.py) in front of it, and the stock
# client (python/client.py) through the proxy. Exit 3 = venv unavailable
# (registry unreachable) -> treat as skipped.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$(mktemp -d /tmp/dynamo-wire-XXXXXX)}"
mkdir -p "$OUT"
PY="$("$HERE/../../packages/testing/stock-dynamo/setup-venv.sh" --print-python | tail -n1)" || exit $?
KV="$(mktemp -d /tmp/dynamo-wire-kv-XXXXXX)"
export DYN_DISCOVERY_BACKEND=file DYN_FILE_KV="$KV" DYN_REQUEST_PLANE=tcp DYN_LOG="${DYN_LOG:-warn}"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$KV"
}
trap cleanup EXIT

wait_line() { # file pattern timeout_s
  local i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
    if [ $i -gt $(($3 * 10)) ]; then echo "timeout waiting for $2 in $1" >&2; return 1; fi
  done
  return 0
}

start_worker() { # name codec -> sets WID
  DYN_REQUEST_PLANE_CODEC="$2" "$PY" "$HERE/python/worker.py" -c "$1" --delay-ms 200 \
    >"$OUT/worker-$1.out" 2>"$OUT/worker-$1.err" &
  PIDS+=($!)
  wait_line "$OUT/worker-$1.out" '^READY' 60 || exit 1
  WID=$(awk '/^READY/{print $2}' "$OUT/worker-$1.out")
}

# scenario name, component, worker id, fake id, client args...
scenario() {
  local name="$1" comp="$2" wid="$3" fid="$4"; shift 4
  "$PY" "$HERE/python/wire_proxy.py" --file-kv "$KV" --instance "$wid" --fake-id "$fid" \
    --jsonl "$OUT/$name.jsonl" >"$OUT/$name.txt" 2>&1 &
  local pp=$!
  wait_line "$OUT/$name.txt" '^PROXY' 20 || exit 1
  timeout 60 "$PY" "$HERE/python/client.py" -c "$comp" --direct "$fid" "$@" \
    >"$OUT/$name.client.out" 2>"$OUT/$name.client.err"
  echo "$name: client rc=$? items=$(wc -l <"$OUT/$name.client.out")"
  sleep 0.5
  kill "$pp"; wait "$pp" 2>/dev/null
}

start_worker mpw msgpack; MP=$WID
start_worker jsonw json; JS=$WID
cp "$KV"/v1/instances/* "$OUT/" 2>/dev/null
ls "$KV/v1/instances" >"$OUT/file-kv-names.txt"

scenario msgpack-basic mpw "$MP" 4242 --count 2 --context-id req-basic
scenario json-basic jsonw "$JS" 4343 --count 2 --context-id req-json
scenario msgpack-stop mpw "$MP" 4444 --count 10 --stop-after 2 --context-id req-stop
scenario msgpack-drop mpw "$MP" 4545 --count 10 --drop-after 2 --context-id req-drop
scenario json-error jsonw "$JS" 4646 --request '{"count":3,"fail_at":1}' --context-id req-err
scenario json-repeat jsonw "$JS" 4747 --count 1 --repeat 2 --context-id req-rep
echo "captures in $OUT"
