#!/usr/bin/env bash
# Builds (or reuses) the Toxiproxy server the cluster harness puts between hosts for per-link
# latency, bandwidth, cuts and resets (Shopify/toxiproxy, pinned), cached outside the workspace.
#
# Usage:  packages/testing/toxiproxy/setup-toxiproxy.sh [--print-bin]
#
#   DYNAMO_TS_TOXIPROXY_DIR  cache folder (default: $HOME/.cache/dynamo-ts/toxiproxy-<version>)
#
# It needs Go: the machine's `go`, else Debian's golang-go from apt-get (Go 1.19 builds it).
#
# Exit codes:
#   0  ready (prints "toxiproxy: ready <binary>"; with --print-bin, the binary's path on the last line)
#   3  the Go module proxy (or apt-get, for Go) cannot be reached and no binary is cached:
#      callers must report the cluster tests as SKIPPED, never passed
#   1  anything else
set -u
VERSION="v2.5.0"
DIR="${DYNAMO_TS_TOXIPROXY_DIR:-${HOME:-/tmp}/.cache/dynamo-ts/toxiproxy-$VERSION}"
BIN="$DIR/toxiproxy-server"
log() { echo "toxiproxy: $*" >&2; }
PRINT=0
[ "${1:-}" = --print-bin ] && PRINT=1 && shift
[ "${1:-}" = -h ] || [ "${1:-}" = --help ] && { sed -n '2,16p' "$0"; exit 0; }
[ $# -eq 0 ] || { log "unknown argument: $1 (usage: setup-toxiproxy.sh [--print-bin])"; exit 1; }
ready() {
  log "ready $BIN"
  [ "$PRINT" = 1 ] && echo "$BIN"
  exit 0
}
[ -x "$BIN" ] && "$BIN" -version >/dev/null 2>&1 && ready

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
command -v flock >/dev/null && flock 9
[ -x "$BIN" ] && "$BIN" -version >/dev/null 2>&1 && ready

if ! command -v go >/dev/null; then
  if ! command -v apt-get >/dev/null; then log "no go on PATH and no apt-get to install it"; exit 3; fi
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  log "installing Debian's golang-go with apt-get"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go; } </dev/null >"$DIR/apt.log" 2>&1 || {
    log "apt-get could not install golang-go:"; tail -5 "$DIR/apt.log" >&2; exit 3
  }
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "building github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION"
if ! GOBIN="$work" GOFLAGS=-buildvcs=false go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION" >"$work/build.log" 2>&1; then
  tail -20 "$work/build.log" >&2
  if grep -qiE 'dial tcp|no such host|connection refused|i/o timeout|proxyconnect' "$work/build.log"; then exit 3; fi
  exit 1
fi
mv "$work/server" "$BIN"
ready
