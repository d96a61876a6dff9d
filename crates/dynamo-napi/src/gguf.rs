//! GGUF metadata, read off the JS thread.

use std::path::PathBuf;

use dynamo_llm_core::gguf::read_metadata;
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
    AsyncTask::new(Work::new(move || Ok(read_metadata(&PathBuf::from(path))?.summary(MAX_ARRAY).to_string()), |s| s))
}
