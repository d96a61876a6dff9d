#!/usr/bin/env bash
# Create (or reuse) a test-only Python virtualenv holding the full stock
# NVIDIA Dynamo release (ai-dynamo + ai-dynamo-runtime, pinned version), used
# by the interop tests as the "reference peer": the runtime bindings
# (dynamo.runtime), the LLM bindings (dynamo.llm), the OpenAI frontend
# (python -m dynamo.frontend), the sample engine and the mocker.
#
# Usage:  packages/testing/stock-dynamo/setup-venv.sh [--print-python] [--force]
#
#   DYNAMO_INTEROP_VENV     venv location (default: $HOME/.cache/dynamo-ts/stock-venv-<version>)
#   DYNAMO_INTEROP_VERSION  ai-dynamo / ai-dynamo-runtime version (default: 1.6.1)
#   DYNAMO_INTEROP_EXTRA    extra pip requirements, space separated (default: none), e.g.
#                           DYNAMO_INTEROP_EXTRA="aiperf==0.13.0" for the benchmark client.
#                           An existing venv that lacks them (or TEST_PINS) gets them added
#                           (no rebuild).
#   DYNAMO_INTEROP_PYTHON   base interpreter (default: python3)
#
# Why not `pip install ai-dynamo==1.6.1`: it hard-requires aisimulate==0.13.0, a
# stub sdist that downloads its wheel from NVIDIA's own index (unreachable here;
# only dynamo.planner uses it), and pins certifi>=2026.10.19, newer than the
# registry has. So ai-dynamo goes in with --no-deps and its other requirements
# are installed explicitly (STOCK_DEPS below). `pip check` will still list
# those two; everything the tests use runs. No extras ([vllm], ...), no torch.
#
# Exit codes:
#   0  venv ready (prints "dynamo-interop-venv: ready <venv> ai-dynamo <version>")
#   3  the package registry is unreachable and no usable venv exists
#      -> callers must report the interop tests as SKIPPED, never passed
#   4  no suitable base python (needs python3 >= 3.10 with the venv module)
#   1  anything else (install ran but the import/version check failed, ...)
#
# --print-python  on success, print only the venv's python path on the last line
#                 (handy for: PY=$(setup-venv.sh --print-python | tail -n1))
# --force         rebuild the venv even if it looks fine
#
# Idempotent: when the venv already passes the check (imports + versions) it
# does nothing (no network access at all). Concurrent callers are serialised
# with flock when available.
set -u

VERSION="${DYNAMO_INTEROP_VERSION:-1.6.1}"
VENV="${DYNAMO_INTEROP_VENV:-${HOME:-/tmp}/.cache/dynamo-ts/stock-venv-$VERSION}"
# The pinned tools the test suite runs in the venv: gguf 0.19.0 for the LoRA fixture
# (packages/llama-cpp/test/fixtures/make-lora.py), the OpenAI Python SDK for the client tests.
# Checked and installed as extra requirements, so one venv check serves every test.
TEST_PINS="gguf==0.19.0 openai==3.57.0"
EXTRA="$TEST_PINS${DYNAMO_INTEROP_EXTRA:+ $DYNAMO_INTEROP_EXTRA}"
BASE_PY="${DYNAMO_INTEROP_PYTHON:-python3}"

# ai-dynamo's own requirements minus aisimulate / the certifi pin (see above),
# plus what the interop tools need: tokenizers + gguf (model files), msgpack
# (decoding request-plane bodies), jinja2 (transformers' apply_chat_template for
# the chat-template goldens and the bench). transformers comes without torch.
STOCK_DEPS=(
  "ai-dynamo-runtime==$VERSION"
  "aiohttp<4.0,>=3.14.3" certifi "kubernetes<33.0.0,>=32.0.1" "msgspec>=0.19.0"
  "prometheus-client<1.0,>=0.23.1" "pyzmq>=26.0.0" "redis<9.0.0,>=6.2.0" "tqdm>=4.0.0"
  "transformers>=4.56.0" "typing-extensions>=4.10.0" "zstandard<1.0,>=0.23.0"
  tokenizers gguf msgpack jinja2
)

PRINT_PY=0
FORCE=0
for a in "$@"; do
  case "$a" in
    --print-python) PRINT_PY=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "setup-venv.sh: unknown argument: $a" >&2; exit 1 ;;
  esac
done

log() { echo "dynamo-interop-venv: $*" >&2; }

# check_venv: prints the installed ai-dynamo version on success.
# Returns 0 = usable; 2 = base usable but DYNAMO_INTEROP_EXTRA not satisfied;
# anything else = unusable (rebuild).
check_venv() {
  [ -x "$VENV/bin/python" ] || return 1
  # HF_HUB_OFFLINE: importing transformers must never touch the network here.
  HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error "$VENV/bin/python" - "$VERSION" $EXTRA <<'PY' 2>/dev/null
import sys, importlib.metadata as md
want, extra = sys.argv[1], sys.argv[2:]
import dynamo.runtime  # noqa: F401  (native extension present)
from dynamo.runtime import DistributedRuntime, dynamo_worker  # noqa: F401
import dynamo.llm  # noqa: F401
import dynamo.frontend  # noqa: F401
import transformers, tokenizers, gguf, msgpack, jinja2  # noqa: F401,E401
for dist in ("ai-dynamo", "ai-dynamo-runtime"):
    if md.version(dist) != want:
        sys.exit(1)
if extra:
    from packaging.requirements import Requirement
    for spec in extra:
        r = Requirement(spec)
        try:
            v = md.version(r.name)
        except md.PackageNotFoundError:
            print(want); sys.exit(2)
        if r.specifier and not r.specifier.contains(v, prereleases=True):
            print(want); sys.exit(2)
print(want)
PY
}

finish_ok() {
  local v="$1"
  echo "dynamo-interop-venv: ready $VENV ai-dynamo $v${EXTRA:+ (+ $EXTRA)}"
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

cr=1
if [ "$FORCE" = 0 ]; then
  v="$(check_venv)"; cr=$?
  [ $cr = 0 ] && finish_ok "$v"
fi

# --- need network from here on ---------------------------------------------
if ! command -v "$BASE_PY" >/dev/null 2>&1; then
  log "base interpreter '$BASE_PY' not found"; exit 4
fi
if ! "$BASE_PY" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  log "'$BASE_PY' is older than 3.10 or lacks the venv module"; exit 4
fi

# Probe the registry before touching an existing (possibly half-good) venv.
# Uses pip's own configured index (PIP_INDEX_URL etc. are honoured).
# returns 0 reachable + package listed, 1 unreachable, 2 reachable but package missing
probe_registry() {
  local out rc
  out="$(PIP_DISABLE_PIP_VERSION_CHECK=1 timeout 60 "$BASE_PY" -m pip index versions ai-dynamo \
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

# pip_or_fail DESCRIPTION ARGS...: runs pip in the venv; on failure exits 3 if
# the registry went away (removing the venv when RM_ON_SKIP=1), else 1.
pip_or_fail() {
  local what="$1"; shift
  if ! "$VENV/bin/python" -m pip install --retries 2 --timeout 30 -q "$@" >&2; then
    probe_registry; local pr=$?
    if [ $pr = 1 ]; then
      [ "${RM_ON_SKIP:-1}" = 1 ] && rm -rf -- "$VENV"
      log "SKIP: package registry unreachable while installing $what"; exit 3
    fi
    log "pip install of $what failed"; exit 1
  fi
}

probe_registry; pr=$?
if [ $pr = 1 ]; then
  log "SKIP: package registry unreachable; cannot install ai-dynamo==$VERSION into $VENV"
  exit 3
elif [ $pr = 2 ]; then
  log "registry reachable but 'ai-dynamo' not found there"
  exit 1
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ $cr = 2 ]; then
  # Base release is fine; only DYNAMO_INTEROP_EXTRA is missing: add it in place.
  log "adding '$EXTRA' to $VENV"
  # shellcheck disable=SC2086
  RM_ON_SKIP=0 pip_or_fail "'$EXTRA'" $EXTRA
  if v="$(check_venv)"; then finish_ok "$v"; fi
  log "installed '$EXTRA', but the check still fails"; exit 1
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
log "installing ai-dynamo==$VERSION (--no-deps), its requirements${EXTRA:+ and '$EXTRA'}"
pip_or_fail "ai-dynamo==$VERSION" --no-deps "ai-dynamo==$VERSION"
# shellcheck disable=SC2086
pip_or_fail "the ai-dynamo requirements" "${STOCK_DEPS[@]}" $EXTRA

if v="$(check_venv)"; then
  finish_ok "$v"
fi
log "installed, but the import/version check failed:"
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c 'import dynamo.runtime, dynamo.llm, dynamo.frontend, transformers, gguf' >&2 || true
exit 1
