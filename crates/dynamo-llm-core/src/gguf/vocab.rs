//! A tokenizer from the vocabulary embedded in a GGUF file, built as the `tokenizer.json`
//! document that describes the same tokenizer (what `transformers` builds when it loads a GGUF
//! vocabulary), so the encoding is the one Hugging Face `tokenizers` gives.
//!
//! * `gpt2`: byte-level BPE; the pre-tokenizer regex follows `tokenizer.ggml.pre`.
//! * `llama`: SentencePiece BPE with byte fallback; merges are derived from the piece scores.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value as Json};

use super::reader::{GgufMetadata, GgufValue};
use crate::error::{LlmError, Result};
use crate::tokenizer::Tokenizer;

/// GGUF token types.
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

const GPT2_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Builds the tokenizer of a GGUF file's vocabulary.
pub fn tokenizer_from_metadata(meta: &GgufMetadata, path: &Path) -> Result<Tokenizer> {
    let bytes = serde_json::to_vec(&tokenizer_document(meta, path)?)
        .map_err(|e| LlmError::bad_file(path, e.to_string()))?;
    Tokenizer::from_bytes(&bytes)
        .map_err(|e| LlmError::bad_file(path, format!("embedded vocabulary: {e}")))
}

/// The `tokenizer.json` document of a GGUF file's vocabulary.
pub fn tokenizer_document(meta: &GgufMetadata, path: &Path) -> Result<Json> {
    let bad = |message: String| LlmError::bad_file(path, message);
    let model = meta
        .get("tokenizer.ggml.model")
        .and_then(GgufValue::as_str)
        .ok_or_else(|| {
            bad("has no embedded vocabulary (tokenizer.ggml.model is missing)".into())
        })?;
    let tokens = strings(meta, "tokenizer.ggml.tokens").map_err(bad)?;
    let types = ints(meta, "tokenizer.ggml.token_type", tokens.len()).map_err(bad)?;
    match model {
        "gpt2" => gpt2(meta, &tokens, &types).map_err(bad),
        "llama" => llama(meta, &tokens, &types).map_err(bad),
        other => Err(bad(format!(
            "tokenizer.ggml.model '{other}' is not supported (gpt2 and llama are)"
        ))),
    }
}

pub(super) fn strings(meta: &GgufMetadata, key: &str) -> std::result::Result<Vec<String>, String> {
    let items = meta
        .get(key)
        .and_then(GgufValue::as_array)
        .ok_or_else(|| format!("{key} is missing or not an array"))?;
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{key} must hold strings"))
        })
        .collect()
}

/// Token types; absent means every token is normal.
fn ints(meta: &GgufMetadata, key: &str, len: usize) -> std::result::Result<Vec<i64>, String> {
    let Some(value) = meta.get(key) else {
        return Ok(vec![1; len]);
    };
    let items = value
        .as_array()
        .ok_or_else(|| format!("{key} must be an array"))?;
    if items.len() != len {
        return Err(format!(
            "{key} has {} entries for {len} tokens",
            items.len()
        ));
    }
    items
        .iter()
        .map(|v| match v {
            GgufValue::I32(i) => Ok(i64::from(*i)),
            other => other
                .as_u64()
                .map(|u| u as i64)
                .ok_or_else(|| format!("{key} must hold integers")),
        })
        .collect()
}

pub(super) fn token_id(
    meta: &GgufMetadata,
    key: &str,
    len: usize,
) -> std::result::Result<Option<usize>, String> {
    match meta.get(key).and_then(GgufValue::as_u64) {
        None => Ok(None),
        Some(id) if (id as usize) < len => Ok(Some(id as usize)),
        Some(id) => Err(format!(
            "{key} {id} is outside the vocabulary of {len} tokens"
        )),
    }
}

/// Control, unknown and user-defined tokens match whole; the first two are special.
fn added_tokens(tokens: &[String], types: &[i64], also_special: &[Option<usize>]) -> Json {
    let mut added = Vec::new();
    for (id, (token, &kind)) in tokens.iter().zip(types).enumerate() {
        let special =
            kind == TYPE_CONTROL || kind == TYPE_UNKNOWN || also_special.contains(&Some(id));
        if special || kind == TYPE_USER_DEFINED {
            added.push(json!({"id": id, "content": token, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": special}));
        }
    }
    Json::Array(added)
}

/// A post-processor that adds BOS (and EOS) when asked to add special tokens.
fn template_processing(
    tokens: &[String],
    bos: Option<usize>,
    eos: Option<usize>,
    add_bos: bool,
    add_eos: bool,
) -> Json {
    let mut single = Vec::new();
    let mut pair = Vec::new();
    let mut specials = serde_json::Map::new();
    let mut special = |id: Option<usize>, list: &mut Vec<Json>| {
        if let Some(id) = id {
            let token = &tokens[id];
            list.push(json!({"SpecialToken": {"id": token, "type_id": 0}}));
            specials.insert(
                token.clone(),
                json!({"id": token, "ids": [id], "tokens": [token]}),
            );
        }
    };
    if add_bos {
        special(bos, &mut single);
        special(bos, &mut pair);
    }
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    pair.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    if add_eos {
        special(eos, &mut single);
        special(eos, &mut pair);
    }
    if add_bos {
        special(bos, &mut pair);
    }
    pair.push(json!({"Sequence": {"id": "B", "type_id": 1}}));
    if add_eos {
        special(eos, &mut pair);
    }
    json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials})
}

pub(super) fn flag(meta: &GgufMetadata, key: &str, default: bool) -> bool {
    meta.get(key)
        .and_then(GgufValue::as_bool)
        .unwrap_or(default)
}

fn gpt2(
    meta: &GgufMetadata,
    tokens: &[String],
    types: &[i64],
) -> std::result::Result<Json, String> {
    let merges = strings(meta, "tokenizer.ggml.merges")?;
    let bos = token_id(meta, "tokenizer.ggml.bos_token_id", tokens.len())?;
    let eos = token_id(meta, "tokenizer.ggml.eos_token_id", tokens.len())?;
    let pre = meta
        .get("tokenizer.ggml.pre")
        .and_then(GgufValue::as_str)
        .unwrap_or("default");
    // No normalizer: transformers' GGUF conversion adds none, and that is the reference.
    let (regex, normalizer) = match pre {
        "qwen2" | "deepseek-r1-qwen" => (QWEN2_REGEX, Json::Null),
        "llama3" | "llama-bpe" | "llama-v3" | "smaug-bpe" => (LLAMA3_REGEX, Json::Null),
        _ => (GPT2_REGEX, Json::Null),
    };
    let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
    // These vocabularies isolate every numeric character before the regex (llama.cpp splits on
    // \p{N} first; the Hugging Face originals have a `Digits` pre-tokenizer): "½ ¼" must not
    // merge " ¼" into one piece.
    let digits_first = matches!(
        pre,
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b"
    );
    let mut pretokenizers = if digits_first {
        vec![split(r"\p{N}")]
    } else {
        vec![]
    };
    pretokenizers.extend([split(regex), byte_level.clone()]);
    let vocab: serde_json::Map<String, Json> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let merges: Vec<Json> = merges.iter().map(|m| json!(m)).collect();
    let add_bos = flag(meta, "tokenizer.ggml.add_bos_token", false);
    let add_eos = flag(meta, "tokenizer.ggml.add_eos_token", false);
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens(tokens, types, &[bos, eos]),
        "normalizer": normalizer,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pretokenizers},
        "post_processor": if add_bos || add_eos { template_processing(tokens, bos, eos, add_bos, add_eos) } else { byte_level.clone() },
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges},
    }))
}

fn llama(
    meta: &GgufMetadata,
    tokens: &[String],
    types: &[i64],
) -> std::result::Result<Json, String> {
    let scores: Vec<f64> = match meta
        .get("tokenizer.ggml.scores")
        .and_then(GgufValue::as_array)
    {
        Some(items) if items.len() == tokens.len() => {
            items.iter().map(|v| v.as_f64().unwrap_or(0.0)).collect()
        }
        Some(items) => {
            return Err(format!(
                "tokenizer.ggml.scores has {} entries for {} tokens",
                items.len(),
                tokens.len()
            ))
        }
        None => {
            return Err(
                "tokenizer.ggml.scores is missing (a llama vocabulary needs piece scores)".into(),
            )
        }
    };
    let bos = token_id(meta, "tokenizer.ggml.bos_token_id", tokens.len())?;
    let eos = token_id(meta, "tokenizer.ggml.eos_token_id", tokens.len())?;
    // Unknown characters fall back to byte tokens, so the model needs no unk token.
    token_id(meta, "tokenizer.ggml.unknown_token_id", tokens.len())?;
    let add_prefix_space = flag(meta, "tokenizer.ggml.add_space_prefix", true);
    let add_bos = flag(meta, "tokenizer.ggml.add_bos_token", true);
    let add_eos = flag(meta, "tokenizer.ggml.add_eos_token", false);

    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let merges = sentencepiece_merges(tokens, &scores, &ids);

    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if add_prefix_space {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    let vocab: serde_json::Map<String, Json> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens(tokens, types, &[bos, eos]),
        "normalizer": null,
        // "first": only the text before the first added token gets the leading "▁".
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": if add_prefix_space { "first" } else { "never" }, "split": false},
        "post_processor": template_processing(tokens, bos, eos, add_bos, add_eos),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                  "vocab": vocab, "merges": merges},
    }))
}

/// SentencePiece BPE merges from piece scores: every split of a piece into two known pieces is
/// a merge ranked by the merged piece's score (higher first), ties broken by the parts' ids.
fn sentencepiece_merges(
    tokens: &[String],
    scores: &[f64],
    ids: &HashMap<&str, usize>,
) -> Vec<Json> {
    let mut merges: Vec<(f64, usize, usize)> = Vec::new();
    for (piece, &score) in tokens.iter().zip(scores) {
        let mut local: Vec<(f64, usize, usize)> = piece
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| {
                let (l, r) = piece.split_at(at);
                Some((score, *ids.get(l)?, *ids.get(r)?))
            })
            .collect();
        local.sort_by_key(|&(_, l, r)| (l, r));
        merges.extend(local);
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0));
    merges
        .into_iter()
        .map(|(_, l, r)| json!([tokens[l], tokens[r]]))
        .collect()
}
