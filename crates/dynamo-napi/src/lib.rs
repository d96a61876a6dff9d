//! Thin napi-rs binding: converts types and errors between JS and the pure crates, nothing else.
#![deny(clippy::all)]

mod conformance;
mod js_engine;
mod kernels;
mod lifecycle;
