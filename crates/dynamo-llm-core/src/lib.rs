//! Pure Rust preprocessing for Dynamo for TypeScript, exported to JavaScript through
//! `dynamo-napi`: the tokenizer, chat templates, incremental detokenization with stop handling,
//! KV block hashing and GGUF metadata. No I/O beyond reading the model files it is pointed at.

mod ascii_bpe;
pub mod block_hash;
mod byte_level;
pub mod checksum;
pub mod detokenizer;
pub mod error;
pub mod gguf;
pub mod parsers;
pub mod prompt;
pub mod response;
pub mod template;
pub mod tokenizer;

pub use error::{LlmError, Result};
