//! The Hugging Face files that describe a GGUF model to a frontend that reads only those (stock
//! Dynamo 1.6 takes `hf_tokenizer_json` and `hf_config_json` cards, not a GGUF file):
//! `tokenizer.json` (the document the GGUF tokenizer is built from, so both encode alike),
//! `tokenizer_config.json` (chat template, special tokens) and `config.json` (architecture,
//! sizes, BOS/EOS ids), all from the file's metadata.

use std::path::Path;

use serde_json::{json, Map, Value as Json};

use super::reader::{GgufMetadata, GgufValue};
use super::vocab::{flag, strings, token_id, tokenizer_document};
use crate::error::{LlmError, Result};

/// The three files' JSON text.
#[derive(Debug, Clone)]
pub struct HfFiles {
    pub tokenizer_json: String,
    pub tokenizer_config_json: String,
    pub config_json: String,
}

/// The Hugging Face files of the GGUF model whose metadata is `meta` (read from `path`).
pub fn hf_files(meta: &GgufMetadata, path: &Path) -> Result<HfFiles> {
    let bad = |message: String| LlmError::bad_file(path, message);
    let tokens = strings(meta, "tokenizer.ggml.tokens").map_err(bad)?;
    let id = |key: &str| token_id(meta, key, tokens.len()).map_err(bad);
    let (bos, eos) = (
        id("tokenizer.ggml.bos_token_id")?,
        id("tokenizer.ggml.eos_token_id")?,
    );
    // llama.cpp ends generation at EOT as well as EOS (SmolLM2, Llama 3 chat).
    let eot = id("tokenizer.ggml.eot_token_id")?;
    let (unk, pad) = (
        id("tokenizer.ggml.unknown_token_id")?,
        id("tokenizer.ggml.padding_token_id")?,
    );
    let arch = meta
        .architecture()
        .ok_or_else(|| bad("general.architecture is missing".into()))?;
    let arch_u64 = |key: &str| {
        meta.get(&format!("{arch}.{key}"))
            .and_then(GgufValue::as_u64)
    };
    let text = |id: Option<usize>| id.map(|i| Json::String(tokens[i].clone()));

    let mut eos_ids: Vec<usize> = eos.into_iter().chain(eot).collect();
    eos_ids.dedup();
    let mut config = Map::new();
    // transformers' class names are the capitalized architecture for the common decoders
    // (LlamaForCausalLM, Qwen2ForCausalLM); a frontend only reads them as labels.
    config.insert(
        "architectures".into(),
        json!([format!("{}ForCausalLM", capitalized(arch))]),
    );
    config.insert("model_type".into(), json!(arch));
    config.insert("vocab_size".into(), json!(tokens.len()));
    let sizes = [
        ("max_position_embeddings", "context_length"),
        ("num_hidden_layers", "block_count"),
        ("num_attention_heads", "attention.head_count"),
        ("num_key_value_heads", "attention.head_count_kv"),
        ("hidden_size", "embedding_length"),
        ("intermediate_size", "feed_forward_length"),
    ];
    for (name, key) in sizes {
        if let Some(value) = arch_u64(key) {
            config.insert(name.into(), json!(value));
        }
    }
    if let Some(bos) = bos {
        config.insert("bos_token_id".into(), json!(bos));
    }
    match eos_ids.as_slice() {
        [] => {}
        [one] => {
            config.insert("eos_token_id".into(), json!(one));
        }
        many => {
            config.insert("eos_token_id".into(), json!(many));
        }
    }

    let mut tokenizer_config = Map::new();
    tokenizer_config.insert("tokenizer_class".into(), json!("PreTrainedTokenizerFast"));
    tokenizer_config.insert("clean_up_tokenization_spaces".into(), json!(false));
    let default_add_bos =
        meta.get("tokenizer.ggml.model").and_then(GgufValue::as_str) == Some("llama");
    tokenizer_config.insert(
        "add_bos_token".into(),
        json!(flag(meta, "tokenizer.ggml.add_bos_token", default_add_bos)),
    );
    tokenizer_config.insert(
        "add_eos_token".into(),
        json!(flag(meta, "tokenizer.ggml.add_eos_token", false)),
    );
    for (name, id) in [
        ("bos_token", bos),
        ("eos_token", eos),
        ("unk_token", unk),
        ("pad_token", pad),
    ] {
        if let Some(token) = text(id) {
            tokenizer_config.insert(name.into(), token);
        }
    }
    if let Some(context) = arch_u64("context_length") {
        tokenizer_config.insert("model_max_length".into(), json!(context));
    }
    if let Some(template) = meta.chat_template() {
        tokenizer_config.insert("chat_template".into(), json!(template));
    }

    let to_text = |doc: &Json| serde_json::to_string_pretty(doc).map_err(|e| bad(e.to_string()));
    Ok(HfFiles {
        tokenizer_json: to_text(&tokenizer_document(meta, path)?)?,
        tokenizer_config_json: to_text(&Json::Object(tokenizer_config))?,
        config_json: to_text(&Json::Object(config))?,
    })
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
