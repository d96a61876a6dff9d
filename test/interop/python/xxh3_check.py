#!/usr/bin/env python3
"""Check fixtures/llm-1.6.1/block-hashes.json against an independent XXH3-64 implementation.

Needs only the PyPI ``xxhash`` package (use a scratch venv, not the stock test venv):

  python3 -m venv /tmp/xxh && /tmp/xxh/bin/pip install xxhash
  /tmp/xxh/bin/python test/interop/python/xxh3_check.py test/interop/fixtures/llm-1.6.1/block-hashes.json

Formula checked (u64 arithmetic wraps):
  seed   = 1337 [+ XXH3_64(utf8(lora_name), seed=0) if lora_name non-empty]
                [+ XXH3_64(utf8(cache_namespace), seed=1) if cache_namespace non-empty]
  blocks = consecutive chunks of block_size ids, trailing partial chunk dropped; with
           is_eagle a chunk is block_size+1 ids, stride block_size, count (len-1)//block_size
  block  = XXH3_64(ids as u32 little-endian ‖ sorted mm_hash values of that block as u64 LE, seed)
  seq[0] = block[0];  seq[i] = XXH3_64(LE64(seq[i-1]) ‖ LE64(block[i]), seed=1337)
Prints one line per case and exits 1 on any mismatch.
"""
import json
import struct
import sys

import xxhash

M64 = (1 << 64) - 1


def xxh3(data: bytes, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(data, seed=seed)


def block_hashes(ids, bs, args):
    seed = 1337
    if args.get("lora_name"):
        seed = (seed + xxh3(args["lora_name"].encode(), 0)) & M64
    if args.get("cache_namespace"):
        seed = (seed + xxh3(args["cache_namespace"].encode(), 1)) & M64
    eagle = bool(args.get("is_eagle"))
    n = (len(ids) - 1) // bs if eagle else len(ids) // bs
    mm = args.get("block_mm_infos") or []
    out = []
    for i in range(max(n, 0)):
        win = ids[i * bs: i * bs + bs + (1 if eagle else 0)]
        data = struct.pack(f"<{len(win)}I", *win)
        info = mm[i] if i < len(mm) else None
        if info:
            for h in sorted(o["mm_hash"] for o in info.get("mm_objects", [])):
                data += struct.pack("<Q", h)
        out.append(xxh3(data, seed))
    return out


def sequence_hashes(blocks):
    seq = []
    for i, b in enumerate(blocks):
        seq.append(b if i == 0 else xxh3(struct.pack("<QQ", seq[-1], b), 1337))
    return seq


def main(path):
    doc = json.load(open(path, encoding="utf-8"))
    bad = 0
    for c in doc["cases"]:
        mine = block_hashes(c["token_ids"], c["block_size"], c["args"])
        ok = [str(x) for x in mine] == c["block_hashes"]
        line = f"{c['name']:<28} bs={c['block_size']:<3} blocks={len(mine)} block_hashes={'match' if ok else 'MISMATCH'}"
        if "sequence_hashes" in c:
            sok = [str(x) for x in sequence_hashes(mine)] == c["sequence_hashes"]
            line += f" sequence_hashes={'match' if sok else 'MISMATCH'}"
            ok = ok and sok
        bad += not ok
        print(line)
    print("all match" if not bad else f"{bad} case(s) mismatch")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "test/interop/fixtures/llm-1.6.1/block-hashes.json"))
