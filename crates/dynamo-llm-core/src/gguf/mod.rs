//! GGUF model files: the header and metadata (architecture, context length, chat template,
//! BOS/EOS ids) and a tokenizer built from the embedded vocabulary.

mod reader;
mod vocab;

use std::path::Path;

pub use reader::{read_metadata, GgufMetadata, GgufValue};

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// The tokenizer of the vocabulary embedded in the GGUF file at `path`.
pub fn tokenizer_from_file(path: &Path) -> Result<Tokenizer> {
    vocab::tokenizer_from_metadata(&read_metadata(path)?, path)
}
