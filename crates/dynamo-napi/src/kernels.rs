//! `kernels` namespace: the dynamo-kernels CUDA entry points. Pointers, sizes and streams cross
//! as bigint; errors cross as JS errors whose `code` is the crate's `ErrorCode`
//! (`CUDA_UNAVAILABLE`, `INVALID_ARGUMENT`, `CUDA_ERROR`).

use dynamo_kernels::{self as dk, BlockLayout, DType, Direction, ErrorCode};
use napi::bindgen_prelude::{BigInt, Unknown};
use napi::ValueType;
use napi_derive::napi;

use crate::convert::{bigint_to_u64, invalid_argument, js_error, NotU64};

type Result<T> = napi::Result<T, ErrorCode>;

fn to_u64(argument: &str, value: &Unknown<'_>) -> Result<u64> {
    let kind = value
        .get_type()
        .map_err(|e| invalid_argument(argument, e.reason))?;
    if kind != ValueType::BigInt {
        let kind = format!("{kind:?}").to_lowercase();
        return Err(invalid_argument(
            argument,
            format!("must be a bigint, got a {kind}"),
        ));
    }
    // SAFETY: the value was just checked to be a bigint.
    let value: BigInt =
        unsafe { value.cast() }.map_err(|e| invalid_argument(argument, e.reason))?;
    bigint_to_u64(&value).map_err(|why| match why {
        NotU64::Negative => invalid_argument(
            argument,
            "must be a non-negative bigint, got a negative one",
        ),
        NotU64::TooLarge => invalid_argument(argument, "must fit in 64 bits (below 2n ** 64n)"),
    })
}

fn to_u64s(argument: &str, values: &[Unknown<'_>]) -> Result<Vec<u64>> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| to_u64(&format!("{argument}[{i}]"), v))
        .collect()
}

/// `undefined`/`null` mean the legacy default stream (0).
fn stream_handle(stream: Option<Unknown<'_>>) -> Result<u64> {
    match stream {
        None => Ok(0),
        Some(s) if matches!(s.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => Ok(0),
        Some(s) if matches!(s.get_type(), Ok(ValueType::Number)) => Err(invalid_argument(
            "stream",
            "must be a bigint cudaStream_t (0n for the default stream), got a number",
        )),
        Some(s) => to_u64("stream", &s),
    }
}

fn to_u32(argument: &str, value: f64) -> Result<u32> {
    if value.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&value) {
        return Err(invalid_argument(
            argument,
            format!("must be an integer from 0 to {}, got {value}", u32::MAX),
        ));
    }
    Ok(value as u32)
}

/// How `@dynamo/core` was built: with the CUDA kernels, or with CPU-only stubs.
#[napi(object, namespace = "kernels")]
pub struct BuildInfo {
    pub with_cuda: bool,
    /// nvcc release the kernels were compiled with, e.g. "12.4".
    pub cuda_version: Option<String>,
    /// GPU code compiled in, e.g. "sm_80,sm_90,compute_90".
    pub targets: Option<String>,
    /// Why the stubs were built, when they were.
    pub stub_reason: Option<String>,
}

/// How the addon was built (with the CUDA kernels or CPU-only stubs).
#[napi(namespace = "kernels")]
pub fn build_info() -> BuildInfo {
    let info = dk::build_info();
    BuildInfo {
        with_cuda: info.with_cuda,
        cuda_version: info.cuda_version.map(str::to_string),
        targets: info.targets.map(str::to_string),
        stub_reason: info.stub_reason.map(str::to_string),
    }
}

/// True when the addon was built with the CUDA kernels and a CUDA device is usable.
#[napi(namespace = "kernels")]
pub fn cuda_available() -> bool {
    dk::cuda_available()
}

/// Copies `sizes[i]` bytes from `srcs[i]` to `dsts[i]` for every pair in one kernel launch
/// enqueued on `stream` (a `cudaStream_t` as bigint; omitted or `0n` = default stream), and
/// returns without waiting: synchronise the stream before using the data. Pointers are
/// device-accessible addresses (device memory or pinned host memory) of the current device.
/// Throws `INVALID_ARGUMENT` (before any CUDA call), `CUDA_UNAVAILABLE` or `CUDA_ERROR`.
#[napi(
    namespace = "kernels",
    ts_args_type = "srcs: Array<bigint>, dsts: Array<bigint>, sizes: Array<bigint>, stream?: bigint | null"
)]
pub fn batched_copy(
    srcs: Vec<Unknown<'_>>,
    dsts: Vec<Unknown<'_>>,
    sizes: Vec<Unknown<'_>>,
    stream: Option<Unknown<'_>>,
) -> Result<()> {
    let srcs = to_u64s("srcs", &srcs)?;
    let dsts = to_u64s("dsts", &dsts)?;
    let sizes = to_u64s("sizes", &sizes)?;
    let stream = stream_handle(stream)?;
    // SAFETY: JS hands over raw device pointers by design; the crate validates everything it
    // can (counts, nulls, overflow, overlap) and the caller owns the memory they name.
    unsafe { dk::batched_copy(&srcs, &dsts, &sizes, stream) }.map_err(js_error)
}

/// Shape of a KV block (see `blocksToUniversal`).
#[napi(object, js_name = "LayoutSpec", namespace = "kernels")]
pub struct JsLayoutSpec {
    /// Order of each per-(layer, outer) chunk: NHD = [tokens][heads][headDim], HND = [heads][tokens][headDim].
    #[napi(ts_type = "'NHD' | 'HND'")]
    pub layout: String,
    /// Element type (only its size matters: fp8 = 1 byte, f16/bf16 = 2, f32 = 4).
    #[napi(ts_type = "'f16' | 'bf16' | 'f32' | 'fp8'")]
    pub dtype: String,
    pub num_layers: f64,
    /// 2 for separate K and V, 1 for MLA.
    pub outer_dim: f64,
    /// Tokens per block.
    pub block_size: f64,
    pub num_heads: f64,
    pub head_dim: f64,
}

fn layout_spec(spec: &JsLayoutSpec) -> Result<dk::LayoutSpec> {
    Ok(dk::LayoutSpec {
        layout: BlockLayout::parse(&spec.layout, "spec.layout").map_err(js_error)?,
        dtype: DType::parse(&spec.dtype, "spec.dtype").map_err(js_error)?,
        num_layers: to_u32("spec.numLayers", spec.num_layers)?,
        outer_dim: to_u32("spec.outerDim", spec.outer_dim)?,
        block_size: to_u32("spec.blockSize", spec.block_size)?,
        num_heads: to_u32("spec.numHeads", spec.num_heads)?,
        head_dim: to_u32("spec.headDim", spec.head_dim)?,
    })
}

fn convert(
    blocks: &[Unknown<'_>],
    universal: &[Unknown<'_>],
    spec: &JsLayoutSpec,
    direction: Direction,
    stream: Option<Unknown<'_>>,
) -> Result<()> {
    let blocks = to_u64s("blocks", blocks)?;
    let universal = to_u64s("universal", universal)?;
    let spec = layout_spec(spec)?;
    let stream = stream_handle(stream)?;
    // SAFETY: as for `batched_copy`.
    unsafe { dk::convert_layout(&blocks, &universal, &spec, direction, stream) }.map_err(js_error)
}

/// Gathers each block's per-layer chunks into its contiguous universal buffer
/// (`[numHeads][numLayers][outerDim][blockSize][headDim]`), in one kernel launch enqueued on
/// `stream`. `blocks` holds `numLayers × outerDim` chunk pointers per block, ordered
/// [block][layer][outer]; `universal` one pointer per block. Returns without waiting.
#[napi(
    namespace = "kernels",
    ts_args_type = "blocks: Array<bigint>, universal: Array<bigint>, spec: LayoutSpec, stream?: bigint | null"
)]
pub fn blocks_to_universal(
    blocks: Vec<Unknown<'_>>,
    universal: Vec<Unknown<'_>>,
    spec: JsLayoutSpec,
    stream: Option<Unknown<'_>>,
) -> Result<()> {
    convert(
        &blocks,
        &universal,
        &spec,
        Direction::BlocksToUniversal,
        stream,
    )
}

/// Scatters each universal buffer back into the block's per-layer chunks (the inverse of
/// `blocksToUniversal`), in one kernel launch enqueued on `stream`. Returns without waiting.
#[napi(
    namespace = "kernels",
    ts_args_type = "universal: Array<bigint>, blocks: Array<bigint>, spec: LayoutSpec, stream?: bigint | null"
)]
pub fn universal_to_blocks(
    universal: Vec<Unknown<'_>>,
    blocks: Vec<Unknown<'_>>,
    spec: JsLayoutSpec,
    stream: Option<Unknown<'_>>,
) -> Result<()> {
    convert(
        &blocks,
        &universal,
        &spec,
        Direction::UniversalToBlocks,
        stream,
    )
}
