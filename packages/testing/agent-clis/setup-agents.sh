#!/usr/bin/env bash
# Install (or reuse) the coding-agent CLIs the agent tests run: Claude Code, Codex CLI and
# OpenCode, pinned by package.json and package-lock.json beside this script. They go into a cache
# outside the workspace (about 1 GB, native binaries from the npm registry's platform packages),
# keyed by the lockfile, so `pnpm install` never carries them and a second run costs nothing.
#
# Usage:  packages/testing/agent-clis/setup-agents.sh [--print-bin]
#
#   DYNAMO_TS_AGENT_CLIS  install location (default: $HOME/.cache/dynamo-ts/agent-clis-<lock hash>)
#
# Exit codes:
#   0  ready (with --print-bin, the last line is the folder holding claude, codex and opencode)
#   3  the npm registry is unreachable and no install exists: callers report the tests SKIPPED
#   1  anything else
#
# `npm install`, not `npm ci`: opencode-ai lists platform packages with no version, which `npm ci`
# reports as missing from any lockfile. The versions are pinned exactly either way.
# The install runs with HOME and the XDG folders in a scratch folder: OpenCode's postinstall runs
# the binary, which would otherwise write its config folders into the real HOME.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-12)"
dir="${DYNAMO_TS_AGENT_CLIS:-${HOME:-/tmp}/.cache/dynamo-ts/agent-clis-$hash}"
print_bin=0
for a in "$@"; do
  case "$a" in
    --print-bin) print_bin=1 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "setup-agents.sh: unknown argument: $a" >&2; exit 1 ;;
  esac
done

log() { echo "agent-clis: $*" >&2; }
ready() {
  local bin
  for bin in claude codex opencode; do [ -x "$dir/node_modules/.bin/$bin" ] || return 1; done
  [ -f "$dir/.installed" ]
}
finish() {
  log "ready $dir"
  if [ "$print_bin" = 1 ]; then echo "$dir/node_modules/.bin"; fi
  exit 0
}

mkdir -p "$(dirname "$dir")"
# One installer at a time; the others wait and then find it ready.
exec 9>"$dir.lock"
command -v flock >/dev/null && flock 9
ready && finish

log "installing into $dir"
scratch="$(mktemp -d "$dir.tmp.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$scratch/"
mkdir -p "$scratch/.home"
if ! (cd "$scratch" && HOME="$scratch/.home" XDG_CONFIG_HOME="$scratch/.home/.config" XDG_DATA_HOME="$scratch/.home/.local/share" \
  XDG_CACHE_HOME="$scratch/.home/.cache" XDG_STATE_HOME="$scratch/.home/.local/state" \
  npm install --no-audit --no-fund --loglevel=error --cache "${npm_config_cache:-${HOME:-/tmp}/.npm}" </dev/null >&2); then
  if ! npm ping --loglevel=error >/dev/null 2>&1 </dev/null; then
    log "the npm registry is unreachable"
    exit 3
  fi
  log "npm install failed"
  exit 1
fi
rm -rf "$scratch/.home" "$dir"
touch "$scratch/.installed"
mv "$scratch" "$dir"
trap - EXIT
ready || { log "installed, but a CLI is missing from $dir/node_modules/.bin"; exit 1; }
finish
