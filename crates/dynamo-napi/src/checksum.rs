//! BLAKE3 checksums as model deployment cards carry them.

use std::path::PathBuf;

use dynamo_llm_core::checksum::{blake3_hex, file_checksum};
use napi::bindgen_prelude::AsyncTask;
use napi_derive::napi;

use crate::work::Work;

/// The `blake3:<hex>` checksum of a file, read off the JS thread.
#[napi(ts_return_type = "Promise<string>")]
pub fn file_checksum_blake3(path: String) -> AsyncTask<Work<String, String>> {
    AsyncTask::new(Work::new(
        move || file_checksum(&PathBuf::from(path)),
        |s| s,
    ))
}

/// The lowercase hex BLAKE3 digest of `data`.
#[napi]
pub fn blake3_hex_digest(data: &[u8]) -> String {
    blake3_hex(data)
}
