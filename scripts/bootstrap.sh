#!/usr/bin/env bash
# Installs what the repository needs on a machine that has only node, npm and cargo:
# pnpm (pinned, into .tools/ so no root is needed), the workspace's npm packages, and the build
# (the napi addon and every TypeScript package). Sourced by demo.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# test.sh times each step; on its own a step just runs.
type -t step >/dev/null || step() { shift; "$@"; }

for tool in node npm cargo; do
  command -v "$tool" >/dev/null || { echo "bootstrap: '$tool' is required but not on PATH" >&2; exit 1; }
done

pnpm_version="$(node -p "require('./package.json').packageManager.split('@')[1]")"
export PATH="$root/.tools/node_modules/.bin:$PATH"
if [ "$(pnpm --version 2>/dev/null || true)" != "$pnpm_version" ]; then
  echo "bootstrap: installing pnpm $pnpm_version into .tools/"
  step "install pnpm" npm install --prefix "$root/.tools" --no-audit --no-fund --silent "pnpm@$pnpm_version"
fi

export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
step "install packages (pnpm install)" pnpm install --frozen-lockfile --reporter=append-only </dev/null
# test.sh runs its fast gates here, before the build they do not need.
if type -t after_install >/dev/null; then after_install; fi
step "build (native addon, packages)" pnpm turbo run build --output-logs=errors-only </dev/null
