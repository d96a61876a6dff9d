//! Thin napi-rs binding: converts types and errors between JS and the pure crates, nothing else.
#![deny(clippy::all)]

mod block_hash;
mod checksum;
mod conformance;
mod convert;
mod detokenizer;
mod gguf;
mod heap;
mod js_engine;
mod kernels;
mod kv_router;
mod lifecycle;
mod off_thread_send;
mod output_parser;
mod prompt;
mod shutdown;
#[cfg(target_os = "linux")]
mod socket_group;
mod socket_pump;
mod stream_processor;
mod tokenizer;
mod uv;
mod work;
