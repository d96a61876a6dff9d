#!/usr/bin/env bash
# Start a throw-away single-node etcd on free loopback ports for interop tests.
#
#   eval "$(test/interop/start-etcd.sh)"   # sets ETCD_ENDPOINTS, ETCD_PID, ETCD_DATA_DIR
#   ...; kill "$ETCD_PID"; rm -rf "$ETCD_DATA_DIR"
#
# Prints shell assignments on stdout once etcd answers. Exit 3 if no etcd
# binary is installed (callers report "skipped"; Debian: apt-get install etcd-server,
# etcdctl comes from etcd-client), 1 if it did not come up.
set -u
ETCD_BIN="${ETCD_BIN:-$(command -v etcd || true)}"
[ -n "$ETCD_BIN" ] || { echo "start-etcd: no etcd binary (SKIP)" >&2; exit 3; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
CP=$(free_port); PP=$(free_port)
DATA="$(mktemp -d /tmp/interop-etcd-XXXXXX)"
"$ETCD_BIN" --name interop --data-dir "$DATA" \
  --listen-client-urls "http://127.0.0.1:$CP" --advertise-client-urls "http://127.0.0.1:$CP" \
  --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
  --initial-cluster "interop=http://127.0.0.1:$PP" >"$DATA/etcd.log" 2>&1 </dev/null &
PID=$!
for _ in $(seq 1 100); do
  if python3 - "$CP" <<'PY' 2>/dev/null; then break; fi
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1).read()
PY
  if ! kill -0 "$PID" 2>/dev/null; then echo "start-etcd: etcd exited; see $DATA/etcd.log" >&2; exit 1; fi
  sleep 0.1
done
echo "ETCD_ENDPOINTS=http://127.0.0.1:$CP; export ETCD_ENDPOINTS"
echo "ETCD_PID=$PID"
echo "ETCD_DATA_DIR=$DATA"
