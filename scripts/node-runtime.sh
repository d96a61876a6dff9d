#!/usr/bin/env bash
# Prints the bin folder of a pinned Node.js release, installing it first into .tools/node<major>/
# from the npm registry's node-<os>-<arch> package (the official build, nothing downloaded from
# elsewhere). Usage: bash scripts/node-runtime.sh 22|24
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
  22) version=22.23.3 ;;
  24) version=24.21.0 ;;
  *) echo "usage: scripts/node-runtime.sh 22|24" >&2; exit 2 ;;
esac
pkg="node-$(node -p 'process.platform')-$(node -p 'process.arch')"
prefix="$root/.tools/node$1"
bin="$prefix/node_modules/$pkg/bin"
if [ "$("$bin/node" --version 2>/dev/null || true)" != "v$version" ]; then
  echo "node-runtime: installing Node $version ($pkg) from the npm registry into .tools/node$1/" >&2
  npm install --prefix "$prefix" --no-audit --no-fund --no-save --silent "$pkg@$version" >&2
fi
"$bin/node" --version >/dev/null
echo "$bin"
