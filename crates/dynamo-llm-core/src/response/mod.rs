//! The response side of the frontend's per-token path, sans I/O: call-home socket bytes in,
//! server-sent events out ([`StreamProcessor`]).

pub mod call_home;
pub mod chunks;
pub mod engine_output;
pub mod frames;
pub mod processor;

pub use chunks::Surface;
pub use processor::{flags, OutputError, ProcessorConfig, StreamProcessor};
