//! GGUF metadata, read off the JS thread.

use std::path::PathBuf;

use dynamo_llm_core::gguf::{hf_files_from_file, read_metadata, HfFiles};
use napi::bindgen_prelude::AsyncTask;
use napi_derive::napi;

use crate::work::Work;

/// Arrays longer than this (the vocabulary) are summarized by their length.
const MAX_ARRAY: usize = 64;

/// The header and metadata of a GGUF file as JSON text: `version`, `tensor_count`,
/// `architecture`, `context_length`, `chat_template`, `bos_token_id`, `eos_token_id`, `name`,
/// every key in `metadata` (long arrays only by length, in `array_lengths`). Rejects naming the
/// file and what is wrong with it.
#[napi(ts_return_type = "Promise<string>")]
pub fn read_gguf_metadata_json(path: String) -> AsyncTask<Work<String, String>> {
    AsyncTask::new(Work::new(
        move || {
            Ok(read_metadata(&PathBuf::from(path))?
                .summary(MAX_ARRAY)
                .to_string())
        },
        |s| s,
    ))
}

/// The Hugging Face files that describe a GGUF model, as JSON text.
#[napi(object)]
pub struct GgufHfFiles {
    /// `tokenizer.json`: the document the GGUF tokenizer is built from.
    pub tokenizer_json: String,
    /// `tokenizer_config.json`: chat template and special tokens.
    pub tokenizer_config_json: String,
    /// `config.json`: architecture, sizes, BOS/EOS ids.
    pub config_json: String,
}

/// `tokenizer.json`, `tokenizer_config.json` and `config.json` for the GGUF file at `path`, for
/// frontends that read only Hugging Face files. Rejects naming the file and what is wrong with it.
#[napi(ts_return_type = "Promise<GgufHfFiles>")]
pub fn gguf_hf_files(path: String) -> AsyncTask<Work<HfFiles, GgufHfFiles>> {
    AsyncTask::new(Work::new(
        move || hf_files_from_file(&PathBuf::from(path)),
        |f| GgufHfFiles {
            tokenizer_json: f.tokenizer_json,
            tokenizer_config_json: f.tokenizer_config_json,
            config_json: f.config_json,
        },
    ))
}
