//! GGUF model files: the header and metadata (architecture, context length, chat template,
//! BOS/EOS ids), a tokenizer built from the embedded vocabulary, and the Hugging Face files that
//! describe the same model.

mod hf_files;
mod reader;
mod vocab;

use std::path::Path;

pub use hf_files::HfFiles;
pub use reader::{read_metadata, GgufMetadata, GgufValue};

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// The tokenizer of the vocabulary embedded in the GGUF file at `path`.
pub fn tokenizer_from_file(path: &Path) -> Result<Tokenizer> {
    vocab::tokenizer_from_metadata(&read_metadata(path)?, path)
}

/// `tokenizer.json`, `tokenizer_config.json` and `config.json` of the GGUF file at `path`.
pub fn hf_files_from_file(path: &Path) -> Result<HfFiles> {
    hf_files::hf_files(&read_metadata(path)?, path)
}
