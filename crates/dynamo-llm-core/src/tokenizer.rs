//! A Hugging Face tokenizer loaded the way Dynamo loads one: `tokenizer.json`, with the special
//! tokens that `tokenizer_config.json` declares registered so they match atomically, and no
//! truncation or padding.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

use crate::ascii_bpe::AsciiBpe;
use crate::byte_level::ByteLevelVocab;
use crate::error::{LlmError, Result};

/// A loaded tokenizer. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Tokenizer {
    inner: HfTokenizer,
    byte_level: OnceLock<Option<ByteLevelVocab>>,
    /// Built on first use, after every added token is registered.
    ascii: OnceLock<Option<AsciiBpe>>,
}

impl Tokenizer {
    /// Loads `tokenizer.json` and, when given, the special tokens of `tokenizer_config.json`.
    pub fn from_files(tokenizer_json: &Path, tokenizer_config_json: Option<&Path>) -> Result<Self> {
        let bytes = std::fs::read(tokenizer_json).map_err(|e| LlmError::io(tokenizer_json, e))?;
        let mut tokenizer = Self::from_bytes(&bytes).map_err(|e| match e {
            LlmError::Tokenizer(msg) => LlmError::bad_file(tokenizer_json, msg),
            other => other,
        })?;
        if let Some(path) = tokenizer_config_json {
            let text = std::fs::read_to_string(path).map_err(|e| LlmError::io(path, e))?;
            let config: Value = serde_json::from_str(&text)
                .map_err(|e| LlmError::bad_file(path, format!("not valid JSON: {e}")))?;
            tokenizer
                .add_config_special_tokens(&config)
                .map_err(|msg| LlmError::bad_file(path, msg))?;
        }
        Ok(tokenizer)
    }

    /// Parses a `tokenizer.json` document.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut inner = HfTokenizer::from_bytes(bytes)
            .map_err(|e| LlmError::Tokenizer(format!("not a valid tokenizer.json: {e}")))?;
        inner
            .with_truncation(None)
            .map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        inner.with_padding(None);
        Ok(Self {
            inner,
            byte_level: OnceLock::new(),
            ascii: OnceLock::new(),
        })
    }

    /// Registers the `added_tokens_decoder` entries, as transformers does: special ones as special
    /// tokens (matched whole, skippable when decoding), the others as plain added tokens.
    fn add_config_special_tokens(&mut self, config: &Value) -> std::result::Result<(), String> {
        let Some(decoder) = config.get("added_tokens_decoder") else {
            return Ok(());
        };
        let entries = decoder
            .as_object()
            .ok_or("added_tokens_decoder must be an object")?;
        let (mut specials, mut plain) = (Vec::new(), Vec::new());
        for (id, entry) in entries {
            let content = entry
                .get("content")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("added_tokens_decoder.{id}.content must be a string"))?;
            let flag = |name: &str, default: bool| {
                entry.get(name).and_then(Value::as_bool).unwrap_or(default)
            };
            let special = flag("special", false);
            let token = AddedToken::from(content.to_owned(), special)
                .single_word(flag("single_word", false))
                .lstrip(flag("lstrip", false))
                .rstrip(flag("rstrip", false))
                .normalized(flag("normalized", !special));
            if special {
                specials.push(token)
            } else {
                plain.push(token)
            }
        }
        self.inner.add_special_tokens(&specials);
        self.inner.add_tokens(&plain);
        Ok(())
    }

    /// Token ids of `text`; `add_special_tokens` adds what the post-processor adds (BOS...).
    /// Offsets are never used, so they are not computed (`encode_fast`, same ids). ASCII text
    /// without special tokens added takes the exact fast path where the pipeline allows it.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        if !add_special_tokens && text.is_ascii() {
            if let Some(fast) = self.ascii_bpe() {
                return fast.encode(self.inner.get_model(), text);
            }
        }
        let encoding = self
            .inner
            .encode_fast(text, add_special_tokens)
            .map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids of each text, encoded in parallel.
    pub fn encode_batch(
        &self,
        texts: Vec<String>,
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .inner
            .encode_batch_fast(texts, add_special_tokens)
            .map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        Ok(encodings
            .into_iter()
            .map(|e| e.get_ids().to_vec())
            .collect())
    }

    /// The text of `ids`; `skip_special_tokens` drops special tokens from it.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| LlmError::Tokenizer(e.to_string()))
    }

    /// Each id decoded alone, as log probabilities name their tokens: a token that is part of a
    /// multi-byte character decodes lossily (U+FFFD), a skipped special token to "".
    pub fn decode_each(&self, ids: &[u32], skip_special_tokens: bool) -> Result<Vec<String>> {
        ids.iter()
            .map(|&id| self.decode(&[id], skip_special_tokens))
            .collect()
    }

    /// Whether ASCII text is encoded by the fast path (see `ascii_bpe`): true for the Qwen2 and
    /// Llama 3 families' byte-level BPE pipelines.
    pub fn has_ascii_fast_path(&self) -> bool {
        self.ascii_bpe().is_some()
    }

    /// Builds the tables the fast paths use, which are otherwise built on first use: a loader
    /// off the event loop calls this so the first request does not pay for them (about a
    /// second for a 150k vocabulary in a debug build).
    pub fn prepare(&self) {
        self.ascii_bpe();
        self.byte_level();
    }

    fn ascii_bpe(&self) -> Option<&AsciiBpe> {
        self.ascii
            .get_or_init(|| AsciiBpe::of(&self.inner))
            .as_ref()
    }

    /// Per-token bytes when the decoder is byte-level (built on first use), for fast
    /// incremental decoding.
    pub(crate) fn byte_level(&self) -> Option<&ByteLevelVocab> {
        self.byte_level
            .get_or_init(|| ByteLevelVocab::of(&self.inner))
            .as_ref()
    }

    /// Whether `id` is a SentencePiece byte-fallback token (`<0x00>` ... `<0xFF>`).
    pub(crate) fn is_byte_fallback_token(&self, id: u32) -> bool {
        self.inner.id_to_token(id).is_some_and(|t| {
            t.len() == 6
                && t.starts_with("<0x")
                && t.ends_with('>')
                && u8::from_str_radix(&t[3..5], 16).is_ok()
        })
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token string of an id, if the id is in the vocabulary.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }
}
