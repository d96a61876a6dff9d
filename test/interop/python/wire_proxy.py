#!/usr/bin/env python3
"""Logging man-in-the-middle for Dynamo's TCP request plane and the TCP
call-home response stream (stdlib only; msgpack decoded if importable).

It sits between a client and ONE worker instance:

  client --(request plane)--> proxy --> worker's TCP request-plane server
  worker --(call-home)------> proxy --> client's response-stream server

How the client is steered to the proxy: with file discovery, --file-kv DIR
publishes a copy of the worker's Endpoint record under a *fake* instance id
whose transport points at the proxy (the path part after the first "/" is
kept, so the worker still routes it; --set-field/--del-field edit the
published copy, e.g. to see what a stock client does with a record that has
no request_plane_codec). Call the fake id with
``client.py --direct <fake id>``. The proxy keeps the fake record's mtime
fresh and deletes it on exit.

How the call-home is intercepted: each request's control header
``connection_info.info.address`` is rewritten to the proxy's call-home
listener (unless --no-rewrite); original bytes are logged before rewriting.

Output: human-readable dump on stdout, and --jsonl FILE gets one JSON object
per message: {"t":..,"conn":..,"dir":..,"kind":..,"hex":..,"decoded":..}.
Once listening it prints ``PROXY <fake_id> <host:port>``.

Usage:
  wire_proxy.py --file-kv DIR --instance <worker id> [--fake-id N] [--jsonl F]
  wire_proxy.py --upstream HOST:PORT [--listen 127.0.0.1:0] [--jsonl F]
"""
import argparse
import asyncio
import itertools
import json
import os
import random
import signal
import struct
import sys
import time
import urllib.parse

try:
    import msgpack  # type: ignore
except Exception:  # noqa: BLE001
    msgpack = None

JSONL = None
CONN_IDS = itertools.count(1)
SUBJECT_TO_ADDR = {}
CALLHOME_ADDR = None
REWRITE = True


def emit(conn, direction, kind, raw: bytes, decoded):
    rec = {"t": round(time.time(), 6), "conn": conn, "dir": direction, "kind": kind,
           "len": len(raw), "hex": raw.hex(), "decoded": decoded}
    if JSONL:
        JSONL.write(json.dumps(rec) + "\n")
        JSONL.flush()
    print(f"--- [{conn}] {direction} {kind} ({len(raw)} bytes)")
    hx = raw.hex()
    for i in range(0, min(len(hx), 4096), 64):
        print("    " + " ".join(hx[j:j + 2] for j in range(i, min(i + 64, len(hx)), 2)))
    if len(hx) > 4096:
        print("    ...")
    print("    decoded: " + json.dumps(decoded, default=str))
    sys.stdout.flush()


def try_text(b: bytes):
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes_hex": b.hex()}
    try:
        return {"json_text": s, "json": json.loads(s)}
    except ValueError:
        return {"text": s}


def decode_body(b: bytes, codec):
    if not b:
        return None
    d = try_text(b)
    if "json" in d:
        return d
    if msgpack is not None:
        try:
            return {"msgpack": msgpack.unpackb(b, raw=False, strict_map_key=False)}
        except Exception:  # noqa: BLE001
            pass
    return d


def two_part_decode(buf: bytes, codec=None):
    hl, bl, ck = struct.unpack(">QQQ", buf[:24])
    h = buf[24:24 + hl]
    b = buf[24 + hl:24 + hl + bl]
    return {"header_len": hl, "body_len": bl, "checksum": ck,
            "header": try_text(h) if h else None, "body": decode_body(b, codec)}, h, b


def two_part_encode(h: bytes, b: bytes) -> bytes:
    return struct.pack(">QQQ", len(h), len(b), 0) + h + b


async def read_two_part(reader):
    pre = await reader.readexactly(24)
    hl, bl, _ = struct.unpack(">QQQ", pre)
    rest = await reader.readexactly(hl + bl)
    return pre + rest


# ---------------------------------------------------------------- request plane
async def handle_rp(creader, cwriter, upstream):
    conn = f"rp{next(CONN_IDS)}"
    host, port = upstream.rsplit(":", 1)
    ureader, uwriter = await asyncio.open_connection(host, int(port))

    async def c2s():
        try:
            while True:
                pl = await creader.readexactly(2)
                (path_len,) = struct.unpack(">H", pl)
                path = await creader.readexactly(path_len)
                hlb = await creader.readexactly(2)
                (hdr_len,) = struct.unpack(">H", hlb)
                hdrs = await creader.readexactly(hdr_len)
                plen_b = await creader.readexactly(4)
                (plen,) = struct.unpack(">I", plen_b)
                payload = await creader.readexactly(plen)
                raw = pl + path + hlb + hdrs + plen_b + payload
                env, h, b = two_part_decode(payload)
                ctrl = env["header"].get("json") if env["header"] else None
                codec = ctrl.get("payload_codec") if isinstance(ctrl, dict) else None
                env["body"] = decode_body(b, codec)
                info = None
                if isinstance(ctrl, dict) and isinstance(ctrl.get("connection_info"), dict):
                    try:
                        info = json.loads(ctrl["connection_info"]["info"])
                    except Exception:  # noqa: BLE001
                        info = None
                emit(conn, "client->worker", "request", raw, {
                    "path_len": path_len, "path": path.decode(), "headers_len": hdr_len,
                    "headers_text": hdrs.decode(), "payload_len": plen, "envelope": env,
                    "connection_info_parsed": info})
                if REWRITE and info and "address" in info and CALLHOME_ADDR:
                    SUBJECT_TO_ADDR[info["subject"]] = info["address"]
                    info2 = dict(info)
                    info2["address"] = CALLHOME_ADDR
                    ctrl2 = dict(ctrl)
                    ci = dict(ctrl["connection_info"])
                    ci["info"] = json.dumps(info2, separators=(",", ":"), ensure_ascii=False)
                    ctrl2["connection_info"] = ci
                    h2 = json.dumps(ctrl2, separators=(",", ":"), ensure_ascii=False).encode()
                    payload = two_part_encode(h2, b)
                    raw = pl + path + hlb + hdrs + struct.pack(">I", len(payload)) + payload
                uwriter.write(raw)
                await uwriter.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            try:
                uwriter.close()
            except Exception:  # noqa: BLE001
                pass

    async def s2c():
        try:
            while True:
                lb = await ureader.readexactly(4)
                (n,) = struct.unpack(">I", lb)
                body = await ureader.readexactly(n)
                emit(conn, "worker->client", "reply", lb + body,
                     {"len": n, "text": body.decode("utf-8", "replace"), "ack": n == 0})
                cwriter.write(lb + body)
                await cwriter.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            try:
                cwriter.close()
            except Exception:  # noqa: BLE001
                pass

    print(f"--- [{conn}] request-plane connection opened")
    await asyncio.gather(c2s(), s2c())
    print(f"--- [{conn}] request-plane connection closed")


# ---------------------------------------------------------------- call-home
async def handle_ch(wreader, wwriter):
    conn = f"ch{next(CONN_IDS)}"
    try:
        first = await read_two_part(wreader)
    except asyncio.IncompleteReadError:
        return
    dec, h, _ = two_part_decode(first)
    emit(conn, "worker->client", "handshake", first, dec)
    subject = None
    try:
        subject = json.loads(h).get("subject")
    except Exception:  # noqa: BLE001
        pass
    target = SUBJECT_TO_ADDR.get(subject)
    if not target:
        print(f"--- [{conn}] unknown subject {subject!r}; closing")
        wwriter.close()
        return
    host, port = target.rsplit(":", 1)
    creader, cwriter = await asyncio.open_connection(host, int(port))
    cwriter.write(first)
    await cwriter.drain()
    t0 = time.time()

    async def pump(src, dst, direction):
        idx = 0
        try:
            while True:
                fr = await read_two_part(src)
                dec, _, _ = two_part_decode(fr)
                kind = "header-only" if dec["body_len"] == 0 else ("data" if dec["header_len"] == 0 else "header+data")
                if direction == "worker->client" and idx == 0:
                    kind = "prologue(" + kind + ")"
                idx += 1
                dec["ms_since_handshake"] = round((time.time() - t0) * 1000, 1)
                emit(conn, direction, kind, fr, dec)
                dst.write(fr)
                await dst.drain()
        except asyncio.IncompleteReadError as e:
            emit(conn, direction, "EOF", e.partial, {"partial_bytes": len(e.partial),
                 "ms_since_handshake": round((time.time() - t0) * 1000, 1)})
        except ConnectionError as e:
            emit(conn, direction, "conn-error", b"", {"error": repr(e)})
        finally:
            try:
                dst.write_eof()
            except Exception:  # noqa: BLE001
                try:
                    dst.close()
                except Exception:  # noqa: BLE001
                    pass

    await asyncio.gather(pump(wreader, cwriter, "worker->client"), pump(creader, wwriter, "client->worker"))
    for w in (cwriter, wwriter):
        try:
            w.close()
        except Exception:  # noqa: BLE001
            pass
    print(f"--- [{conn}] call-home closed")


# ---------------------------------------------------------------- fake record
def kv_name(key: str) -> str:
    # same naming the stock file store uses (see WIRE-NOTES.md): percent-encoding
    return urllib.parse.quote(key, safe="")


def find_record(file_kv: str, instance_hex: str):
    d = os.path.join(file_kv, "v1", "instances")
    for name in os.listdir(d):
        if name.lower().endswith(instance_hex.lower()) and not name.startswith("."):
            with open(os.path.join(d, name), "rb") as f:
                return name, f.read().decode()
    return None, None


async def main(a):
    global JSONL, CALLHOME_ADDR, REWRITE
    REWRITE = not a.no_rewrite
    if a.jsonl:
        JSONL = open(a.jsonl, "a")
    rec_text = None
    upstream = a.upstream
    if a.file_kv:
        iid = int(a.instance, 0)
        for _ in range(200):
            name, rec_text = find_record(a.file_kv, f"{iid:x}")
            if rec_text:
                break
            await asyncio.sleep(0.1)
        if not rec_text:
            sys.exit(f"no record for instance {iid:x} under {a.file_kv}")
        rec = json.loads(rec_text)
        addr = rec["transport"]["tcp"]
        upstream = addr.split("/", 1)[0]
    lh, lp = a.listen.rsplit(":", 1)
    rp_server = await asyncio.start_server(lambda r, w: handle_rp(r, w, upstream), lh, int(lp))
    ch_server = await asyncio.start_server(handle_ch, lh, 0)
    rp_addr = "%s:%d" % rp_server.sockets[0].getsockname()[:2]
    CALLHOME_ADDR = "%s:%d" % ch_server.sockets[0].getsockname()[:2]
    fake_path = None
    fake_id = 0
    if a.file_kv:
        fake_id = int(a.fake_id, 0) if a.fake_id else random.getrandbits(63) | 1
        fake = json.loads(rec_text)  # key order is preserved
        fake["instance_id"] = fake_id
        fake["transport"] = {"tcp": rp_addr + "/" + addr.split("/", 1)[1]}
        for kv in a.set_field or []:
            k, v = kv.split("=", 1)
            fake[k] = json.loads(v)
        for k in a.del_field or []:
            fake.pop(k, None)
        text = json.dumps(fake, separators=(",", ":"), ensure_ascii=False)
        key = f"{rec['namespace']}/{rec['component']}/{rec['endpoint']}/{fake_id:x}"
        fake_path = os.path.join(a.file_kv, "v1", "instances", kv_name(key))
        tmp = fake_path + ".proxytmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, fake_path)
    print(f"PROXY {fake_id} {rp_addr} upstream={upstream} callhome={CALLHOME_ADDR}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, stop.set)
    try:
        while not stop.is_set():
            if fake_path and os.path.exists(fake_path):
                os.utime(fake_path)
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
    finally:
        if fake_path and os.path.exists(fake_path):
            os.unlink(fake_path)
        rp_server.close()
        ch_server.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream")
    p.add_argument("--file-kv")
    p.add_argument("--instance")
    p.add_argument("--fake-id")
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--jsonl")
    p.add_argument("--no-rewrite", action="store_true")
    p.add_argument("--set-field", action="append", metavar="KEY=JSON",
                   help="override a field of the published fake record, e.g. request_plane_codec='\"json\"'")
    p.add_argument("--del-field", action="append", metavar="KEY",
                   help="drop a field from the fake record, e.g. request_plane_codec or device_type")
    args = p.parse_args()
    if not args.upstream and not (args.file_kv and args.instance):
        p.error("need --upstream or --file-kv + --instance")
    asyncio.run(main(args))
