#!/usr/bin/env python3
"""Recompute the ``mdc_sum`` the stock frontend puts in every PreprocessedRequest from the card.

Needs only the PyPI ``blake3`` package (scratch venv, not the stock test venv):

  /tmp/x/bin/python test/interop/python/mdcsum_check.py test/interop/fixtures/llm-1.6.1

Reads DIR/mdc-records.llm-workers.json ({v1/mdc file name: exact file text} of the stock
workers) and DIR/preprocessed-requests.json; for each model name seen in a received request
it recomputes lowercase-hex BLAKE3 over, in order:
  display_name ‖ source_path (if set) ‖ the "blake3:<hex>" checksum strings of model_info,
  tokenizer, prompt_formatter, chat_template_file, gen_config (those present)
  ‖ u32 BE context_length ‖ u32 BE kv_cache_block_size ‖ worker_type byte
  (prefill 1, decode 2, encode 3, aggregated 4) ‖ u32 BE len(needs) (the fixture cards all
  have needs == []; the per-alternative layout used here for non-empty needs is a guess)
Only the fields the fixture cards use are covered (no extra_files, prompt_context,
router_config, aliases). Exits 1 on a mismatch.
"""
import json
import os
import struct
import sys

import blake3

WORKER_TYPE = {"prefill": 1, "decode": 2, "encode": 3, "aggregated": 4}


def checksum(slot):
    """The checksum of the one CheckedFile inside a card slot (chat template slots nest it)."""
    (inner,) = slot.values()
    return (inner.get("file") or inner)["checksum"]


def mdcsum(card):
    unsupported = [k for k in ("extra_files", "prompt_context", "router_config", "aliases") if card.get(k)]
    if unsupported:
        raise ValueError(f"card uses {unsupported}; not covered by this check")
    h = blake3.blake3()
    h.update(card["display_name"].encode())
    if card.get("source_path"):
        h.update(card["source_path"].encode())
    for slot in ("model_info", "tokenizer", "prompt_formatter", "chat_template_file", "gen_config"):
        if card.get(slot):
            h.update(checksum(card[slot]).encode())
    h.update(struct.pack(">I", card["context_length"]))
    h.update(struct.pack(">I", card["kv_cache_block_size"]))
    h.update(bytes([WORKER_TYPE[card["worker_type"]]]) if card.get("worker_type") else b"\0")
    needs = card.get("needs") or []
    h.update(struct.pack(">I", len(needs)))
    for alt in needs:
        h.update(struct.pack(">I", len(alt)))
        for name in alt:
            h.update(struct.pack(">I", len(name)) + name.encode())
    return h.hexdigest()


def main(d):
    raw = json.load(open(os.path.join(d, "mdc-records.llm-workers.json"), encoding="utf-8"))
    cards = {c["display_name"]: c for c in (json.loads(t)["card_json"] for t in raw.values())}
    seen = {}
    for case in json.load(open(os.path.join(d, "preprocessed-requests.json"), encoding="utf-8")):
        rec = case["received"]
        seen.setdefault(rec["model"], set()).add(rec["mdc_sum"])
    bad = 0
    for model, sums in sorted(seen.items()):
        mine = mdcsum(cards[model])
        ok = sums == {mine}
        bad += not ok
        print(f"{model}: frontend {sorted(sums)} recomputed {mine} {'match' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "test/interop/fixtures/llm-1.6.1"))
