"""Python baseline for the @dynamo/llm benchmark, run in the same session as the TypeScript side.

Reads a JSON job on stdin: {"tokenizer_json", "model_dir", "texts": {name: text}, "min_seconds",
"conversation"} and prints one JSON line: Hugging Face `tokenizers` encode throughput per text
(add_special_tokens=False, as Dynamo encodes prompts) and transformers' apply_chat_template time.
"""
import json
import sys
import time

from tokenizers import Tokenizer


def timed(fn, min_seconds):
    """Calls fn until min_seconds have passed; returns seconds per call (best of 3 rounds)."""
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds / 3:
                break
        best = min(best, elapsed / n)
    return best


def main():
    job = json.load(sys.stdin)
    tok = Tokenizer.from_file(job["tokenizer_json"])
    out = {"encode": {}}
    for name, text in job["texts"].items():
        ids = tok.encode(text, add_special_tokens=False).ids
        secs = timed(lambda: tok.encode(text, add_special_tokens=False), job["min_seconds"])
        out["encode"][name] = {"seconds": secs, "tokens": len(ids), "bytes": len(text.encode())}
    from transformers import AutoTokenizer  # after the encode timings: its import is slow

    hf = AutoTokenizer.from_pretrained(job["model_dir"])
    conv = job["conversation"]
    render = lambda: hf.apply_chat_template(conv["messages"], tools=conv.get("tools"), add_generation_prompt=True, tokenize=False)
    out["render_seconds"] = timed(render, job["min_seconds"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
