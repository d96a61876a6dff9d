//! One error type for the crate; every message names the file, field or input that was wrong.

use std::path::Path;

/// What went wrong, with enough context to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A model file was read but its content is not what it must be.
    #[error("{path}: {message}")]
    BadFile { path: String, message: String },
    /// A value given by the caller is out of range or malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The tokenizer failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The chat template failed to compile or render.
    #[error("chat template: {0}")]
    Template(String),
}

impl LlmError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        LlmError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn bad_file(path: &Path, message: impl Into<String>) -> Self {
        LlmError::BadFile {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, LlmError>;
