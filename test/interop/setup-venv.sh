#!/usr/bin/env bash
# Create (or reuse) a test-only Python virtualenv holding the stock Dynamo
# runtime bindings (ai-dynamo-runtime 1.6.x), used by the interop tests as
# the "reference peer".
#
# Usage:  test/interop/setup-venv.sh [--print-python] [--force]
#
#   DYNAMO_INTEROP_VENV   venv location (default: $HOME/.cache/dynamo-ts/interop-venv-1.6)
#   DYNAMO_INTEROP_SPEC   pip requirement (default: ai-dynamo-runtime==1.6.*)
#   DYNAMO_INTEROP_PYTHON base interpreter (default: python3)
#
# Exit codes:
#   0  venv ready (prints "dynamo-interop-venv: ready <venv> ai-dynamo-runtime <version>")
#   3  the package registry is unreachable and no usable venv exists
#      -> callers must report the interop tests as SKIPPED, never passed
#   4  no suitable base python (needs python3 >= 3.10 with the venv module)
#   1  anything else (install ran but the import/version check failed, ...)
#
# --print-python  on success, print only the venv's python path on the last line
#                 (handy for: PY=$(setup-venv.sh --print-python | tail -n1))
# --force         rebuild the venv even if it looks fine
#
# Idempotent: when the venv already imports dynamo.runtime at the wanted
# version it does nothing (no network access at all). Concurrent callers are
# serialised with flock when available.
set -u

VENV="${DYNAMO_INTEROP_VENV:-${HOME:-/tmp}/.cache/dynamo-ts/interop-venv-1.6}"
SPEC="${DYNAMO_INTEROP_SPEC:-ai-dynamo-runtime==1.6.*}"
BASE_PY="${DYNAMO_INTEROP_PYTHON:-python3}"
# version prefix the installed distribution must match (derived from SPEC "==X.Y.*")
WANT_PREFIX="$(printf '%s' "$SPEC" | sed -n 's/.*==\([0-9][0-9.]*\)\*\{0,1\}$/\1/p')"
WANT_PREFIX="${WANT_PREFIX%.}"

PRINT_PY=0
FORCE=0
for a in "$@"; do
  case "$a" in
    --print-python) PRINT_PY=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "setup-venv.sh: unknown argument: $a" >&2; exit 1 ;;
  esac
done

log() { echo "dynamo-interop-venv: $*" >&2; }

# Prints the installed version and returns 0 if the venv is usable.
check_venv() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - "$WANT_PREFIX" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
want = sys.argv[1]
import dynamo.runtime  # noqa: F401  (must import: native extension present)
from dynamo.runtime import DistributedRuntime, dynamo_worker  # noqa: F401
v = md.version("ai-dynamo-runtime")
if want and not (v == want or v.startswith(want + ".")):
    sys.exit(1)
print(v)
PY
}

finish_ok() {
  local v="$1"
  echo "dynamo-interop-venv: ready $VENV ai-dynamo-runtime $v"
  if [ "$PRINT_PY" = 1 ]; then echo "$VENV/bin/python"; fi
  exit 0
}

mkdir -p "$(dirname "$VENV")" || { log "cannot create parent of $VENV"; exit 1; }

# Serialise concurrent setups (e.g. parallel test workers).
LOCK="$VENV.lock"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$LOCK"
  flock -w 900 9 || { log "timed out waiting for $LOCK"; exit 1; }
fi

if [ "$FORCE" = 0 ] && v="$(check_venv)"; then
  finish_ok "$v"
fi

# --- need to (re)build ---------------------------------------------------
if ! command -v "$BASE_PY" >/dev/null 2>&1; then
  log "base interpreter '$BASE_PY' not found"; exit 4
fi
if ! "$BASE_PY" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  log "'$BASE_PY' is older than 3.10 or lacks the venv module"; exit 4
fi

# Probe the registry before touching an existing (possibly half-good) venv.
# Uses pip's own configured index (PIP_INDEX_URL etc. are honoured).
PKG_NAME="${SPEC%%[=<>!~ ]*}"
# returns 0 reachable + package listed, 1 unreachable, 2 reachable but package missing
probe_registry() {
  local out rc
  out="$(PIP_DISABLE_PIP_VERSION_CHECK=1 timeout 60 "$BASE_PY" -m pip index versions "$PKG_NAME" \
          --retries 1 --timeout 15 2>&1)"
  rc=$?
  [ $rc = 0 ] && return 0
  log "registry probe failed: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
  [ $rc = 124 ] && return 1
  if printf '%s' "$out" | grep -Eqi 'NewConnectionError|ConnectTimeout|ReadTimeout|Max retries|name resolution|Network is unreachable|Connection refused|ProxyError|SSLError|timed out'; then
    return 1
  fi
  return 2
}
probe_registry; pr=$?
if [ $pr = 1 ]; then
  log "SKIP: package registry unreachable; cannot install '$SPEC' into $VENV"
  exit 3
elif [ $pr = 2 ]; then
  log "registry reachable but '$PKG_NAME' not found there"
  exit 1
fi

if [ -e "$VENV" ]; then
  # Only remove something that is recognisably a venv we may own.
  if [ -f "$VENV/pyvenv.cfg" ]; then
    log "removing stale venv $VENV"
    rm -rf -- "$VENV"
  else
    log "$VENV exists and is not a virtualenv; refusing to touch it"; exit 1
  fi
fi

log "creating venv $VENV"
"$BASE_PY" -m venv "$VENV" || { log "venv creation failed"; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1
log "installing '$SPEC'"
if ! "$VENV/bin/python" -m pip install --retries 2 --timeout 30 -q "$SPEC" >&2; then
  # Distinguish "network went away" from a genuine install failure.
  probe_registry; pr=$?
  if [ $pr = 1 ]; then
    rm -rf -- "$VENV"
    log "SKIP: package registry unreachable during install"; exit 3
  fi
  log "pip install '$SPEC' failed"; exit 1
fi
# msgpack is used by the capture tools to decode msgpack bodies (optional).
"$VENV/bin/python" -m pip install -q msgpack >&2 || log "note: msgpack not installed (optional)"

if v="$(check_venv)"; then
  finish_ok "$v"
fi
log "installed, but 'import dynamo.runtime' or the version check failed"
"$VENV/bin/python" -c 'import dynamo.runtime' >&2 || true
exit 1
