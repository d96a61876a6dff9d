//! The conversions every binding file shares, each written once: crate errors into the JS
//! errors they throw, and JS bigints, numbers and JSON values checked into Rust ones, with
//! messages that name the argument as JS spells it.

use std::fmt::Display;

use dynamo_kernels::{ErrorCode, KernelError};
use dynamo_kv_router::InvalidOption;
use dynamo_llm_core::LlmError;
use napi::bindgen_prelude::BigInt;
use napi::{Error, Result, Status};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// An `InvalidArg` error: the caller passed something it should not have.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, message.into())
}

/// A `GenericFailure` error with `e`'s message: nothing the arguments could have avoided.
pub fn failure(e: impl Display) -> Error {
    Error::new(Status::GenericFailure, e.to_string())
}

/// A crate's error as the JS error it becomes: its status (or code) and message.
pub trait ToJsError {
    type Code: AsRef<str>;
    fn to_js_error(self) -> Error<Self::Code>;
}

/// `e` as a JS error; `map_err(js_error)` for any crate error.
pub fn js_error<E: ToJsError>(e: E) -> Error<E::Code> {
    e.to_js_error()
}

/// Bad input and bad files are `InvalidArg`.
impl ToJsError for LlmError {
    type Code = Status;
    fn to_js_error(self) -> Error {
        let status = match self {
            LlmError::Io { .. }
            | LlmError::BadFile { .. }
            | LlmError::InvalidArgument(_)
            | LlmError::Template(_) => Status::InvalidArg,
            LlmError::Tokenizer(_) => Status::GenericFailure,
        };
        Error::new(status, self.to_string())
    }
}

/// The kernels' errors keep their own code (`CUDA_UNAVAILABLE`, `INVALID_ARGUMENT`,
/// `CUDA_ERROR`); the crate's snake_case names in the message read as JS writes them.
impl ToJsError for KernelError {
    type Code = ErrorCode;
    fn to_js_error(self) -> Error<ErrorCode> {
        let message = [
            ("num_layers", "numLayers"),
            ("outer_dim", "outerDim"),
            ("block_size", "blockSize"),
            ("num_heads", "numHeads"),
            ("head_dim", "headDim"),
        ]
        .iter()
        .fold(self.to_string(), |t, (rust, js)| t.replace(rust, js));
        Error::new(self.code(), message)
    }
}

/// A kernels `INVALID_ARGUMENT` error about `argument`, found before calling the crate.
pub fn invalid_argument(argument: &str, problem: impl Into<String>) -> Error<ErrorCode> {
    js_error(KernelError::InvalidArgument {
        argument: argument.into(),
        problem: problem.into(),
    })
}

/// An option out of range, named as the JS option (`overlap_score_weight` →
/// `overlapScoreWeight`).
impl ToJsError for InvalidOption {
    type Code = Status;
    fn to_js_error(self) -> Error {
        invalid(format!("{} {}", camel_case(self.option), self.problem))
    }
}

fn camel_case(snake: &str) -> String {
    let mut parts = snake.split('_');
    let first = parts.next().unwrap_or_default().to_owned();
    parts.fold(first, |mut name, part| {
        let mut chars = part.chars();
        if let Some(c) = chars.next() {
            name.extend(c.to_uppercase());
            name.push_str(chars.as_str());
        }
        name
    })
}

/// Why a bigint is not a u64.
pub enum NotU64 {
    Negative,
    /// 2n ** 64n or more.
    TooLarge,
}

/// A bigint's value, when it is a u64.
pub fn bigint_to_u64(value: &BigInt) -> std::result::Result<u64, NotU64> {
    if value.sign_bit && value.words.iter().any(|&w| w != 0) {
        return Err(NotU64::Negative);
    }
    if value.words.iter().skip(1).any(|&w| w != 0) {
        return Err(NotU64::TooLarge);
    }
    Ok(value.words.first().copied().unwrap_or(0))
}

/// The bigint argument `name` as a u64 (an id, a sequence number).
pub fn u64_of(name: &str, value: &BigInt) -> Result<u64> {
    bigint_to_u64(value).map_err(|_| invalid(format!("{name} must be a bigint in 0..2n ** 64n")))
}

/// The number argument `name` as a u64: a whole number JS holds exactly (up to 2 ** 53 - 1).
pub fn whole(name: &str, value: f64) -> Result<u64> {
    if !(value.is_finite()
        && value >= 0.0
        && value.fract() == 0.0
        && value <= 9_007_199_254_740_991.0)
    {
        return Err(invalid(format!(
            "{name} must be a non-negative integer, got {value}"
        )));
    }
    Ok(value as u64)
}

/// A JSON value from JS as a crate type; the error starts with `what`.
pub fn decode<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| invalid(format!("{what}: {e}")))
}

/// A crate value as JSON for JS.
pub fn encode<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(failure)
}
