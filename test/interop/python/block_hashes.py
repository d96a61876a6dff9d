#!/usr/bin/env python3
"""Pin the stock KV block hashes (and, via the mocker, sequence hashes) of Dynamo 1.6.x.

Run with the stock venv's python (packages/testing/stock-dynamo/setup-venv.sh). Writes fixtures/llm-1.6.1/block-hashes.json:

  {"function": "dynamo.llm.compute_block_hash_for_seq", "cases": [
     {"name", "block_size", "token_ids", "args": {lora_name?, cache_namespace?, is_eagle?,
      block_mm_infos?}, "block_hashes": ["<u64 decimal>", ...],
      "sequence_hashes"?: ["<u64 decimal>", ...]}, ...],
   "mocker_indexer_dump"?: [...]}

block_hashes come from ``compute_block_hash_for_seq`` (the only hashing entry point the
1.6.1 bindings expose; it returns the per-block "local"/tokens hashes). sequence_hashes
are not exposed by any binding, so with ``--mocker-endpoint`` the script sends every
block-size-16 case without LoRA/namespace/MM/eagle (max_tokens 1) through a
``dynamo.llm.KvRouter`` to a running stock mocker (``python -m dynamo.mocker --block-size
16``), dumps the router's indexer (``KvRouter.dump_events()``) and reads the sequence
hashes back from the mocker's KV "stored" events (``block_hash`` per ``tokens_hash``,
chained by ``parent_hash``). The raw dump is kept in the fixture.

  block_hashes.py --model-dir DIR --out FILE [--mocker-endpoint dynamo.mocker.generate
                  --mocker-model NAME]

The independent check of these values against XXH3-64 is python/xxh3_check.py.
"""
import argparse
import asyncio
import json
import sys

PARAGRAPH = (
    "Dynamo is a distributed inference serving framework. It splits a deployment into a frontend "
    "that speaks the OpenAI protocol, a router that decides which worker should run each request, "
    "and workers that hold the model weights and the key-value cache. Requests that share a long "
    "prefix can reuse cached blocks, so the router hashes the prompt in fixed-size blocks of tokens "
    "and sends each request to the worker that already holds most of those blocks. This paragraph "
    "exists only to produce a realistic sequence of more than one hundred token ids."
)


def cases(model_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    para = tok.encode(PARAGRAPH, add_special_tokens=False).ids[:100]
    if len(para) < 100:
        raise SystemExit(f"paragraph has only {len(para)} tokens")
    r64 = list(range(64))
    mm = [{"mm_objects": [{"mm_hash": 0xDEADBEEF, "offsets": [[0, 4]]}, {"mm_hash": 5, "offsets": [[4, 8]]}]}, None]
    return [
        ("ids-0-63", 16, r64, {}),
        ("qwen3-paragraph-100", 16, para, {}),
        ("len-47-partial-block", 16, list(range(1000, 1047)), {}),
        ("large-ids-151000", 16, list(range(151000, 151064)), {}),
        ("eos-and-special-ids", 16, [151643, 151644, 151645, 151667, 151668, 0, 1, 2] * 4, {}),
        ("shorter-than-block", 16, list(range(15)), {}),
        ("ids-0-63-bs32", 32, r64, {}),
        ("qwen3-paragraph-100-bs32", 32, para, {}),
        ("qwen3-paragraph-100-bs64", 64, para, {}),
        ("lora", 16, r64, {"lora_name": "my-lora"}),
        ("lora-empty-string", 16, r64, {"lora_name": ""}),
        ("cache-namespace", 16, r64, {"cache_namespace": "tenant-a"}),
        ("lora-and-cache-namespace", 16, r64, {"lora_name": "my-lora", "cache_namespace": "tenant-a"}),
        ("eagle-65", 16, list(range(65)), {"is_eagle": True}),
        ("eagle-64", 16, r64, {"is_eagle": True}),
        ("mm-block0", 16, list(range(32)), {"block_mm_infos": mm}),
    ]


def local_hashes(all_cases):
    from dynamo.llm import compute_block_hash_for_seq

    out = []
    for name, bs, ids, args in all_cases:
        h = compute_block_hash_for_seq(ids, bs, **args)
        out.append({"name": name, "block_size": bs, "token_ids": ids, "args": args,
                    "block_hashes": [str(x) for x in h]})
    return out


async def mocker_sequence_hashes(a, recs):
    from dynamo.llm import KvRouter, KvRouterConfig
    from dynamo.runtime import DistributedRuntime, dynamo_worker

    result = {}

    @dynamo_worker()
    async def run(runtime: DistributedRuntime):
        ep = runtime.endpoint(a.mocker_endpoint)
        router = KvRouter(ep, 16, KvRouterConfig())
        client = await ep.client()
        await client.wait_for_instances()
        await asyncio.sleep(1.0)
        for rec in recs:
            async for _ in await router.generate(rec["token_ids"], a.mocker_model,
                                                 stop_conditions={"max_tokens": 1, "ignore_eos": True}):
                pass
        await asyncio.sleep(1.5)
        result["dump"] = json.loads(await router.dump_events())
        runtime.shutdown()

    await run()
    chain = {}
    for ev in result["dump"]:
        stored = ev["event"]["data"].get("stored")
        if not stored:
            continue
        parent = stored.get("parent_hash")
        for blk in stored["blocks"]:
            chain[(parent, blk["tokens_hash"])] = blk["block_hash"]
            parent = blk["block_hash"]
    for rec in recs:
        seq, parent = [], None
        for th in rec["block_hashes"]:
            bh = chain.get((parent, int(th)))
            if bh is None:
                print(f"block_hashes: no stored block for {rec['name']} tokens_hash {th}", file=sys.stderr)
                seq = None
                break
            seq.append(str(bh))
            parent = bh
        if seq is not None:
            rec["sequence_hashes"] = seq
            rec["sequence_hashes_source"] = "mocker KV stored events (block_hash)"
    return result["dump"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--mocker-endpoint")
    p.add_argument("--mocker-model")
    a = p.parse_args()
    recs = local_hashes(cases(a.model_dir))
    doc = {"function": "dynamo.llm.compute_block_hash_for_seq(tokens, kv_block_size, block_mm_infos=None, "
                       "lora_name=None, is_eagle=None, cache_namespace=None) -> list[int] (u64)",
           "cases": recs}
    if a.mocker_endpoint:
        plain = [r for r in recs if r["block_size"] == 16 and not r["args"] and r["block_hashes"]]
        doc["mocker_indexer_dump"] = asyncio.run(mocker_sequence_hashes(a, plain))
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"block_hashes: {len(recs)} cases -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
