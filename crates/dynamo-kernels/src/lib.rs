//! CUDA kernels for moving KV-cache blocks, with CPU references that define their output.
//!
//! * [`batched_copy`]: one launch copies many `(src, dst, size)` pairs, device↔device or
//!   to/from pinned host memory, each pair with the widest safe vector width
//!   ([`copy::vector_width`]).
//! * [`convert_layout`]: per-layer NHD/HND chunks ↔ the contiguous universal layout
//!   (see [`layout`]), any element size, block size, head count and head dim.
//!
//! Both take *device-accessible* pointers as `u64` (`cudaMalloc`, `cudaMallocHost`/`cudaHostAlloc`
//! or mapped registered host memory) and a CUDA stream handle (`0` = legacy default stream). They
//! validate every argument in Rust first, write the pointer tables into a pinned, device-mapped
//! buffer and enqueue the work, then return without waiting: the caller synchronises the stream.
//! A copy whose pairs all have one size reads its table there; other copies and layout
//! conversions have a small kernel move it to the device first, and a conversion of 16 blocks or
//! more goes in two pieces, the first enqueued before the host has written the rest of the table.
//! The calling thread's current device is used.
//!
//! Built without `nvcc` (see `build.rs`) the crate still validates arguments, then every GPU call
//! returns [`ErrorCode::CudaUnavailable`]; [`reference`] works either way.

pub mod copy;
mod error;
pub mod layout;
pub mod reference;

#[cfg_attr(dynamo_kernels_cuda, path = "cuda.rs")]
#[cfg_attr(not(dynamo_kernels_cuda), path = "stub.rs")]
mod backend;

pub use error::{ErrorCode, KernelError};
pub use layout::{BlockLayout, DType, Direction, LayoutSpec};

/// How this copy of the crate was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// True when the CUDA kernels were compiled in (`cfg(dynamo_kernels_cuda)`).
    pub with_cuda: bool,
    /// `nvcc` release used, e.g. `"12.4"`.
    pub cuda_version: Option<&'static str>,
    /// GPU code compiled in, e.g. `"sm_80,sm_90,compute_90"`.
    pub targets: Option<&'static str>,
    /// Why the stubs were built, when they were.
    pub stub_reason: Option<&'static str>,
}

/// How this copy of the crate was built.
pub const fn build_info() -> BuildInfo {
    BuildInfo {
        with_cuda: cfg!(dynamo_kernels_cuda),
        cuda_version: option_env!("DYNAMO_KERNELS_CUDA_VERSION"),
        targets: option_env!("DYNAMO_KERNELS_CUDA_TARGETS"),
        stub_reason: option_env!("DYNAMO_KERNELS_STUB_REASON"),
    }
}

/// Number of CUDA devices visible to this process. Errors with
/// [`ErrorCode::CudaUnavailable`] in a stub build or when no driver/device is present.
pub fn device_count() -> Result<u32, KernelError> {
    backend::device_count()
}

/// True when the kernels were compiled in and at least one CUDA device is usable.
pub fn cuda_available() -> bool {
    matches!(device_count(), Ok(n) if n > 0)
}

/// Copies `sizes[i]` bytes from `srcs[i]` to `dsts[i]` for every pair, in one kernel launch
/// enqueued on `stream`. Pairs may differ in size and alignment; empty pairs are skipped.
///
/// Errors: [`ErrorCode::InvalidArgument`] (checked before any CUDA call, see
/// [`copy::validate_batch`]), [`ErrorCode::CudaUnavailable`], [`ErrorCode::CudaError`]. A batch that
/// copies no byte returns `Ok` without touching CUDA (in a CUDA build).
///
/// # Safety
/// Every non-empty pair must name device-accessible memory valid for `sizes[i]` bytes for as
/// long as the stream runs the copy; destinations must not overlap each other or any source.
/// `stream` must be 0 or a live `cudaStream_t` of the current device.
pub unsafe fn batched_copy(
    srcs: &[u64],
    dsts: &[u64],
    sizes: &[u64],
    stream: u64,
) -> Result<(), KernelError> {
    const OP: &str = "batched_copy";
    let batch = copy::validate_batch(srcs, dsts, sizes)?;
    backend::ensure_built(OP)?;
    if batch.is_noop() {
        return Ok(());
    }
    // SAFETY: forwarded from the caller.
    unsafe { backend::batched_copy(OP, &batch, stream) }
}

/// Converts every block between its per-layer chunks (`blocks`: `num_layers × outer_dim`
/// pointers per block, ordered `[block][layer][outer]`, each a `spec.layout` chunk) and its
/// universal buffer (`universal[block]`), in the given `direction`, in one kernel launch
/// enqueued on `stream`. An empty batch (no universal buffer) returns `Ok` without touching CUDA
/// (in a CUDA build).
///
/// # Safety
/// Every pointer must name device-accessible memory of the right size (`spec.chunk_bytes()`,
/// `spec.universal_bytes()`) valid while the stream runs the conversion; destinations must not
/// overlap each other or any source. `stream` must be 0 or a live `cudaStream_t` of the current
/// device.
pub unsafe fn convert_layout(
    blocks: &[u64],
    universal: &[u64],
    spec: &LayoutSpec,
    direction: Direction,
    stream: u64,
) -> Result<(), KernelError> {
    let op = match direction {
        Direction::BlocksToUniversal => "blocks_to_universal",
        Direction::UniversalToBlocks => "universal_to_blocks",
    };
    let conv = layout::validate_conversion(blocks, universal, spec, direction)?;
    backend::ensure_built(op)?;
    if conv.num_blocks() == 0 {
        return Ok(());
    }
    // SAFETY: forwarded from the caller.
    unsafe { backend::convert_layout(op, &conv, stream) }
}
