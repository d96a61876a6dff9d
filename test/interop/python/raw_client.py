#!/usr/bin/env python3
"""Hand-rolled Dynamo TCP request-plane caller (stdlib only; msgpack optional).

Lets a test send byte-level variations that the stock client never sends
(no payload_codec, JSON body, bad path, stop/kill at chosen points) to a
*stock* worker and see exactly what comes back. Written from the observed
wire format in ../WIRE-NOTES.md, not from Dynamo sources.

  raw_client.py --address HOST:PORT --path <id_hex>/ns/comp/generate [opts]
  raw_client.py --file-kv DIR [--instance ID] [opts]     (address/path from the record)

Options:
  --body JSON              request object (default {"count": 3})
  --payload-codec C        json|msgpack|omit (default omit: no payload_codec key)
  --body-codec C           how to encode the body (default: json unless payload-codec=msgpack)
  --headers JSON           request-plane headers object (default {})
  --id ID                  control header id / context (default random uuid4)
  --stop-after N / --kill-after N   send a "stop"/"kill" control frame after N data items
  --close-after N          just close the call-home socket after N data items
  --checksum N             value for the envelope checksum field (default 0)
  --timeout S
  --wait-close             after "sentinel" keep reading until the worker closes (it waits
                           ~10 s for the caller to close first); default: close at once

Output: one JSON line per event on stdout:
  {"ev":"ack"} | {"ev":"reply_error","text":..}
  {"ev":"handshake","header":..} {"ev":"prologue","header":..}
  {"ev":"data","codec":"json"|"msgpack","body":..,"body_text":..?}
  {"ev":"control","header":..}  (header-only frames after the prologue, e.g. "sentinel")
  {"ev":"sent","what":"stop"|"kill"}  {"ev":"closed"}  {"ev":"eof"}  {"ev":"timeout"}
"""
import argparse
import json
import os
import socket
import struct
import sys
import time
import uuid

try:
    import msgpack  # type: ignore
except Exception:  # noqa: BLE001
    msgpack = None


def ev(**kw):
    print(json.dumps(kw), flush=True)


def two_part(h: bytes, b: bytes, checksum: int = 0) -> bytes:
    return struct.pack(">QQQ", len(h), len(b), checksum) + h + b


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError(buf)
        buf += chunk
    return buf


def read_frame(s):
    pre = recv_exact(s, 24)
    hl, bl, _ = struct.unpack(">QQQ", pre)
    return recv_exact(s, hl), recv_exact(s, bl)


def local_ip_towards(host):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.connect((host, 9))
        return u.getsockname()[0]
    finally:
        u.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--address")
    p.add_argument("--path")
    p.add_argument("--file-kv")
    p.add_argument("--instance")
    p.add_argument("--body", default='{"count": 3}')
    p.add_argument("--payload-codec", default="omit", choices=["json", "msgpack", "omit"])
    p.add_argument("--body-codec", choices=["json", "msgpack"])
    p.add_argument("--headers", default="{}")
    p.add_argument("--id")
    p.add_argument("--stop-after", type=int)
    p.add_argument("--kill-after", type=int)
    p.add_argument("--close-after", type=int)
    p.add_argument("--checksum", type=lambda x: int(x, 0), default=0,
                   help="checksum field of the request envelope (stock senders write 0)")
    p.add_argument("--timeout", type=float, default=15.0)
    p.add_argument("--wait-close", action="store_true",
                   help="after the sentinel, wait for the worker to close instead of closing first")
    a = p.parse_args()

    if a.file_kv:
        d = os.path.join(a.file_kv, "v1", "instances")
        recs = []
        for name in sorted(os.listdir(d)):
            if name.startswith("."):
                continue
            with open(os.path.join(d, name)) as f:
                r = json.loads(f.read())
            if a.instance is None or r["instance_id"] == int(a.instance, 0):
                recs.append(r)
        if not recs:
            sys.exit("no matching record")
        addr, path = recs[0]["transport"]["tcp"].split("/", 1)
    else:
        addr, path = a.address, a.path
    host, port = addr.rsplit(":", 1)

    body_codec = a.body_codec or ("msgpack" if a.payload_codec == "msgpack" else "json")
    obj = json.loads(a.body)
    if body_codec == "msgpack":
        body = msgpack.packb(obj, use_bin_type=True)
    else:
        body = json.dumps(obj, separators=(",", ":")).encode()

    rid = a.id or str(uuid.uuid4())
    subject = str(uuid.uuid4())
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((local_ip_towards(host), 0))
    lst.listen(1)
    lst.settimeout(a.timeout)
    cb = "%s:%d" % lst.getsockname()[:2]

    ctrl = {"id": rid, "request_type": "single_in", "response_type": "many_out"}
    if a.payload_codec != "omit":
        ctrl["payload_codec"] = a.payload_codec
    ctrl["connection_info"] = {"transport": "tcp_server", "info": json.dumps(
        {"address": cb, "subject": subject, "context": rid, "stream_type": "response"},
        separators=(",", ":"))}
    env = two_part(json.dumps(ctrl, separators=(",", ":")).encode(), body, a.checksum)
    pb = path.encode()
    hb = json.dumps(json.loads(a.headers), separators=(",", ":")).encode()
    msg = struct.pack(">H", len(pb)) + pb + struct.pack(">H", len(hb)) + hb + struct.pack(">I", len(env)) + env

    s = socket.create_connection((host, int(port)), timeout=a.timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(msg)
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    reply = recv_exact(s, n)
    if n:
        ev(ev="reply_error", text=reply.decode("utf-8", "replace"))
        s.close()
        return 0
    ev(ev="ack")
    try:
        c, _ = lst.accept()
    except socket.timeout:
        ev(ev="timeout", waiting_for="call-home connect")
        return 1
    c.settimeout(a.timeout)
    ndata = 0
    idx = 0
    try:
        while True:
            h, b = read_frame(c)
            if idx == 0:
                ev(ev="handshake", header=json.loads(h))
            elif idx == 1:
                ev(ev="prologue", header=json.loads(h))
            elif b:
                try:
                    ev(ev="data", codec="json", body=json.loads(b), body_text=b.decode())
                except (UnicodeDecodeError, ValueError):
                    ev(ev="data", codec="msgpack", body=msgpack.unpackb(b, raw=False) if msgpack else None,
                       body_hex=b.hex())
                ndata += 1
            else:
                hj = json.loads(h)
                ev(ev="control", header=hj)
                if hj == "sentinel" and not a.wait_close:
                    # the stock caller closes right after the sentinel; the worker
                    # otherwise waits ~10 s for that close
                    c.close()
                    ev(ev="closed")
                    s.close()
                    return 0
            idx += 1
            for lim, word in ((a.stop_after, "stop"), (a.kill_after, "kill")):
                if lim is not None and b and ndata == lim:
                    c.sendall(two_part(json.dumps(word).encode(), b""))
                    ev(ev="sent", what=word)
            if a.close_after is not None and b and ndata == a.close_after:
                c.close()
                ev(ev="closed")
                return 0
    except EOFError:
        ev(ev="eof")
    except socket.timeout:
        ev(ev="timeout", waiting_for="frame")
    c.close()
    s.close()
    return 0


if __name__ == "__main__":
    t = time.time()
    rc = main()
    sys.exit(rc)
