#!/usr/bin/env python3
"""Record the 1.6.x LLM binding API and the model cards register_model writes.

Run with the stock venv's python, with file discovery (DYN_DISCOVERY_BACKEND=file,
DYN_FILE_KV=<empty dir>). Writes one JSON document (--out) with:

* ``api``: signatures of dynamo.llm.register_model / unregister_model /
  compute_block_hash_for_seq (``__text_signature__``), whether ``register_llm`` is the same
  object, the members of ModelType / ModelInput / WorkerType with their str()/int() forms,
  and the default attribute values of a fresh ModelRuntimeConfig.
* ``registrations``: for each variant below, the register_model arguments and the
  resulting ``v1/mdc/...`` file name and JSON record (or the exception text). One
  endpoint per variant (``dynamo.apiprobe<i>.generate``); the endpoint is not served,
  so no frontend will route to these models. Variants cover the slug rule (odd display
  names), worker_type omitted, model_aliases / user_data / kv_cache_block_size /
  runtime_config fields, and the Chat-only / Completions-only model_type strings.

  llm_api.py --model-dir DIR --out FILE
"""
import argparse
import asyncio
import json
import os
import sys


def members(cls):
    out = {}
    for n in dir(cls):
        if n.startswith("_"):
            continue
        v = getattr(cls, n)
        if callable(v) and not isinstance(v, cls):
            continue
        rec = {"str": str(v)}
        try:
            rec["int"] = int(v)
        except (TypeError, ValueError):
            pass
        out[n] = rec
    return out


def api_facts():
    import dynamo.llm as llm

    rc = llm.ModelRuntimeConfig()
    rc_attrs = {}
    for k in dir(rc):
        if k.startswith("_") or callable(getattr(rc, k)):
            continue
        v = getattr(rc, k)
        rc_attrs[k] = sorted(v) if isinstance(v, set) else v
    return {
        "register_llm_is_register_model": llm.register_llm is llm.register_model,
        "signatures": {
            n: getattr(llm, n).__text_signature__
            for n in ("register_model", "unregister_model", "compute_block_hash_for_seq", "fetch_model")
        },
        "ModelType": members(llm.ModelType),
        "ModelType_examples": {
            "Chat|Completions": str(llm.ModelType.Chat | llm.ModelType.Completions),
            "Completions|Chat": str(llm.ModelType.Completions | llm.ModelType.Chat),
        },
        "ModelInput": members(llm.ModelInput),
        "WorkerType": members(llm.WorkerType),
        "ModelRuntimeConfig_defaults": rc_attrs,
    }


def variants(model_dir):
    return [
        {"model_name": None},
        {"model_name": "Qwen/Qwen3-0.6B"},
        {"model_name": "My Model.v2@X+y"},
        {"model_name": "__Lead-Under_score__"},
        {"model_name": "UPPER/ünïcode name"},
        {"model_name": "qwen3-types-chat", "model_type": "chat"},
        {"model_name": "qwen3-types-completions", "model_type": "completions"},
        {"model_name": "qwen3-no-worker-type", "worker_type": None},
        {"model_name": "qwen3-extras", "kv_cache_block_size": 32, "model_aliases": ["alias-a", "alias-b"],
         "user_data": {"k": "v", "n": 1},
         "runtime_config": {"context_length": 4096, "total_kv_blocks": 1000, "max_num_seqs": 8,
                            "max_num_batched_tokens": 512, "reasoning_parser": "qwen3",
                            "tool_call_parser": "hermes", "data_parallel_size": 2,
                            "runtime_data": {"engine": "x"}}},
    ]


async def register_all(model_dir, kv_dir):
    from dynamo.llm import ModelInput, ModelRuntimeConfig, ModelType, WorkerType, register_model
    from dynamo.runtime import DistributedRuntime, dynamo_worker

    results = []

    @dynamo_worker()
    async def run(runtime: DistributedRuntime):
        for i, v in enumerate(variants(model_dir)):
            ep_path = f"dynamo.apiprobe{i}.generate"
            endpoint = runtime.endpoint(ep_path)
            mt = {"chat": ModelType.Chat, "completions": ModelType.Completions}.get(
                v.get("model_type"), ModelType.Chat | ModelType.Completions)
            kwargs = {"worker_type": WorkerType.Aggregated}
            if "worker_type" in v:
                kwargs["worker_type"] = v["worker_type"]
            if v.get("kv_cache_block_size"):
                kwargs["kv_cache_block_size"] = v["kv_cache_block_size"]
            if v.get("model_aliases"):
                kwargs["model_aliases"] = v["model_aliases"]
            if v.get("user_data"):
                kwargs["user_data"] = v["user_data"]
            if v.get("runtime_config"):
                rc = ModelRuntimeConfig()
                for k, val in v["runtime_config"].items():
                    if k == "runtime_data":  # read-only; set_engine_specific(key, json_text)
                        for dk, dv in val.items():
                            rc.set_engine_specific(dk, json.dumps(dv))  # takes JSON text
                    else:
                        setattr(rc, k, val)
                kwargs["runtime_config"] = rc
            rec = {"endpoint": ep_path, "args": {"model_path": model_dir, **v}}
            try:
                await register_model(ModelInput.Tokens, mt, endpoint, model_dir, v.get("model_name"), **kwargs)
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {e}"
                results.append(rec)
                continue
            await asyncio.sleep(0.2)
            mdc_dir = os.path.join(kv_dir, "v1", "mdc")
            files = [f for f in os.listdir(mdc_dir) if f.startswith(f"dynamo%2Fapiprobe{i}%2F")]
            rec["files"] = files
            rec["records"] = [json.load(open(os.path.join(mdc_dir, f), encoding="utf-8")) for f in files]
            results.append(rec)
        runtime.shutdown()

    await run()
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    kv = os.environ.get("DYN_FILE_KV")
    if os.environ.get("DYN_DISCOVERY_BACKEND") != "file" or not kv:
        raise SystemExit("llm_api.py: needs DYN_DISCOVERY_BACKEND=file and DYN_FILE_KV")
    doc = {"api": api_facts(), "registrations": asyncio.run(register_all(a.model_dir, kv))}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"llm_api: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
