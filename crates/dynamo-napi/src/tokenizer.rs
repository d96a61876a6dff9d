//! `Tokenizer`: llm-core's tokenizer. Loading and encoding run off the JS thread; the `*Sync`
//! forms are for short inputs where a thread hop costs more than the work.

use std::path::PathBuf;
use std::sync::Arc;

use dynamo_llm_core::tokenizer::Tokenizer as Core;
use napi::bindgen_prelude::{AsyncTask, Uint32Array};
use napi_derive::napi;

use crate::convert::js_error;
use crate::work::Work;

/// A Hugging Face tokenizer (`tokenizer.json`), or one built from a GGUF file's vocabulary.
#[napi]
pub struct Tokenizer {
    pub(crate) inner: Arc<Core>,
}

/// Finishes a load on the worker thread: builds the lazy tables and returns freed heap.
fn prepared(loaded: dynamo_llm_core::Result<Core>) -> dynamo_llm_core::Result<Core> {
    if let Ok(tokenizer) = &loaded {
        tokenizer.prepare();
    }
    crate::heap::release_freed();
    loaded
}

fn wrap(inner: Core) -> Tokenizer {
    Tokenizer {
        inner: Arc::new(inner),
    }
}

fn ids(v: Vec<u32>) -> Uint32Array {
    Uint32Array::new(v)
}

fn id_lists(v: Vec<Vec<u32>>) -> Vec<Uint32Array> {
    v.into_iter().map(Uint32Array::new).collect()
}

/// Loads `tokenizer.json`, registering the special tokens of `tokenizer_config.json` when given.
/// Rejects with an error naming the file that is missing or malformed.
#[napi(ts_return_type = "Promise<Tokenizer>")]
pub fn load_tokenizer(
    tokenizer_json: String,
    tokenizer_config_json: Option<String>,
) -> AsyncTask<Work<Core, Tokenizer>> {
    AsyncTask::new(Work::new(
        move || {
            prepared(Core::from_files(
                &PathBuf::from(tokenizer_json),
                tokenizer_config_json.map(PathBuf::from).as_deref(),
            ))
        },
        wrap,
    ))
}

/// Builds a tokenizer from the vocabulary embedded in a GGUF file (`gpt2` BPE or `llama`
/// SentencePiece).
#[napi(ts_return_type = "Promise<Tokenizer>")]
pub fn load_gguf_tokenizer(path: String) -> AsyncTask<Work<Core, Tokenizer>> {
    AsyncTask::new(Work::new(
        move || {
            let path = PathBuf::from(path);
            prepared(dynamo_llm_core::gguf::tokenizer_from_file(&path))
        },
        wrap,
    ))
}

#[napi]
impl Tokenizer {
    /// Token ids of `text` (special tokens are added only when `addSpecialTokens`), off the JS thread.
    #[napi(ts_return_type = "Promise<Uint32Array>")]
    pub fn encode(
        &self,
        text: String,
        add_special_tokens: Option<bool>,
    ) -> AsyncTask<Work<Vec<u32>, Uint32Array>> {
        let inner = self.inner.clone();
        AsyncTask::new(Work::new(
            move || inner.encode(&text, add_special_tokens.unwrap_or(false)),
            ids,
        ))
    }

    /// Token ids of `text` on the calling thread; for short texts.
    #[napi]
    pub fn encode_sync(
        &self,
        text: String,
        add_special_tokens: Option<bool>,
    ) -> napi::Result<Uint32Array> {
        self.inner
            .encode(&text, add_special_tokens.unwrap_or(false))
            .map(Uint32Array::new)
            .map_err(js_error)
    }

    /// Token ids of each text, encoded in parallel off the JS thread.
    #[napi(ts_return_type = "Promise<Uint32Array[]>")]
    pub fn encode_batch(
        &self,
        texts: Vec<String>,
        add_special_tokens: Option<bool>,
    ) -> AsyncTask<Work<Vec<Vec<u32>>, Vec<Uint32Array>>> {
        let inner = self.inner.clone();
        AsyncTask::new(Work::new(
            move || inner.encode_batch(texts, add_special_tokens.unwrap_or(false)),
            id_lists,
        ))
    }

    /// The text of `ids`; special tokens are left out when `skipSpecialTokens`.
    #[napi]
    pub fn decode(&self, ids: &[u32], skip_special_tokens: Option<bool>) -> napi::Result<String> {
        self.inner
            .decode(ids, skip_special_tokens.unwrap_or(false))
            .map_err(js_error)
    }

    /// Each id decoded alone (one crossing for a chunk's log-probability tokens).
    #[napi]
    pub fn decode_each(
        &self,
        ids: &[u32],
        skip_special_tokens: Option<bool>,
    ) -> napi::Result<Vec<String>> {
        self.inner
            .decode_each(ids, skip_special_tokens.unwrap_or(false))
            .map_err(js_error)
    }

    /// Vocabulary size including added tokens.
    #[napi(getter)]
    pub fn vocab_size(&self) -> u32 {
        self.inner.vocab_size() as u32
    }

    /// The id of a token string, or null.
    #[napi]
    pub fn token_to_id(&self, token: String) -> Option<u32> {
        self.inner.token_to_id(&token)
    }

    /// The token string of an id, or null.
    #[napi]
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }
}
