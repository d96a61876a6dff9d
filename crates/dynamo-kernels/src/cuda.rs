//! The backend of a CUDA build: the C ABI of `cuda/kernels.cu` (declared in
//! `cuda/dynamo_kernels.h`) and the mapping of its status codes to [`KernelError`].

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use crate::copy::CopyBatch;
use crate::layout::Conversion;
use crate::KernelError;

/// Mirrors `DkLayoutDims` in `cuda/dynamo_kernels.h`.
#[repr(C)]
struct DkLayoutDims {
    num_layers: u32,
    outer_dim: u32,
    block_size: u32,
    num_heads: u32,
    head_dim: u32,
    elem_size: u32,
}

extern "C" {
    fn dynamo_kernels_device_count(count: *mut c_int) -> c_int;
    fn dynamo_kernels_error_name(status: c_int) -> *const c_char;
    fn dynamo_kernels_error_string(status: c_int) -> *const c_char;
    #[cfg(test)]
    fn dynamo_kernels_copy_slice_bytes() -> u64;
    fn dynamo_kernels_batched_copy(
        srcs: *const u64,
        dsts: *const u64,
        sizes: *const u64,
        num_pairs: u64,
        stream: *mut c_void,
        failed_call: *mut *const c_char,
    ) -> c_int;
    fn dynamo_kernels_convert_layout(
        blocks: *const u64,
        universal: *const u64,
        num_blocks: u64,
        dims: *const DkLayoutDims,
        layout: c_int,
        direction: c_int,
        stream: *mut c_void,
        failed_call: *mut *const c_char,
    ) -> c_int;
}

// cudaError_t values meaning "no usable driver or device" rather than a failed operation.
const CUDA_ERROR_INITIALIZATION: c_int = 3;
const CUDA_ERROR_STUB_LIBRARY: c_int = 34;
const CUDA_ERROR_INSUFFICIENT_DRIVER: c_int = 35;
const CUDA_ERROR_NO_DEVICE: c_int = 100;
const CUDA_ERROR_SYSTEM_NOT_READY: c_int = 802;
const CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: c_int = 803;
const CUDA_ERROR_COMPAT_NOT_SUPPORTED: c_int = 804;

fn text(p: *const c_char, fallback: &str) -> String {
    if p.is_null() {
        return fallback.to_string();
    }
    // SAFETY: the C side returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn build_description() -> String {
    let info = crate::build_info();
    format!(
        "dynamo-kernels was built with CUDA {} for {}",
        info.cuda_version.unwrap_or("?"),
        info.targets.unwrap_or("?")
    )
}

fn check(
    operation: &'static str,
    status: c_int,
    failed_call: *const c_char,
) -> Result<(), KernelError> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: plain lookups returning static strings.
    let (name, message) = unsafe {
        (
            text(dynamo_kernels_error_name(status), "cudaErrorUnknown"),
            text(dynamo_kernels_error_string(status), "unknown CUDA error"),
        )
    };
    let call = text(failed_call, "a CUDA call");
    match status {
        CUDA_ERROR_INITIALIZATION
        | CUDA_ERROR_STUB_LIBRARY
        | CUDA_ERROR_INSUFFICIENT_DRIVER
        | CUDA_ERROR_NO_DEVICE
        | CUDA_ERROR_SYSTEM_NOT_READY
        | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | CUDA_ERROR_COMPAT_NOT_SUPPORTED => Err(KernelError::CudaUnavailable {
            reason: format!(
                "{operation}: no usable CUDA device or driver ({call} returned {name}: {message}); {}",
                build_description()
            ),
        }),
        _ => Err(KernelError::Cuda {
            operation,
            call,
            status,
            name,
            message,
        }),
    }
}

pub(crate) fn ensure_built(_operation: &str) -> Result<(), KernelError> {
    Ok(())
}

pub(crate) fn device_count() -> Result<u32, KernelError> {
    let mut count: c_int = 0;
    // SAFETY: writes one int.
    let status = unsafe { dynamo_kernels_device_count(&mut count) };
    check("device_count", status, c"cudaGetDeviceCount".as_ptr())?;
    Ok(count.max(0) as u32)
}

pub(crate) unsafe fn batched_copy(
    operation: &'static str,
    batch: &CopyBatch<'_>,
    stream: u64,
) -> Result<(), KernelError> {
    let mut failed: *const c_char = ptr::null();
    // SAFETY: the three tables have `len()` entries (validated); the caller vouches for the
    // pointers they hold and for the stream.
    let status = unsafe {
        dynamo_kernels_batched_copy(
            batch.srcs.as_ptr(),
            batch.dsts.as_ptr(),
            batch.sizes.as_ptr(),
            batch.len() as u64,
            stream as usize as *mut c_void,
            &mut failed,
        )
    };
    check(operation, status, failed)
}

pub(crate) unsafe fn convert_layout(
    operation: &'static str,
    conv: &Conversion<'_>,
    stream: u64,
) -> Result<(), KernelError> {
    let spec = &conv.spec;
    let dims = DkLayoutDims {
        num_layers: spec.num_layers,
        outer_dim: spec.outer_dim,
        block_size: spec.block_size,
        num_heads: spec.num_heads,
        head_dim: spec.head_dim,
        elem_size: spec.dtype.size(),
    };
    let mut failed: *const c_char = ptr::null();
    // SAFETY: table lengths validated against `num_blocks` and the spec; the caller vouches for
    // the pointers and the stream.
    let status = unsafe {
        dynamo_kernels_convert_layout(
            conv.blocks.as_ptr(),
            conv.universal.as_ptr(),
            conv.num_blocks() as u64,
            &dims,
            spec.layout.abi(),
            conv.direction.abi(),
            stream as usize as *mut c_void,
            &mut failed,
        )
    };
    check(operation, status, failed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernels_and_rust_agree_on_the_slice_size() {
        // SAFETY: returns a constant.
        let compiled = unsafe { super::dynamo_kernels_copy_slice_bytes() };
        assert_eq!(compiled, crate::copy::COPY_SLICE_BYTES);
    }

    /// The C side's own argument checks run before any CUDA call, so they exercise the ABI
    /// (argument order, `DkLayoutDims` layout, `failed_call`) without a device.
    #[test]
    fn the_c_abi_reports_bad_arguments_and_the_failing_step() {
        use super::*;
        let name = |p: *const c_char| text(p, "");
        let table = [0x1000u64];
        let mut failed: *const c_char = ptr::null();
        let status = unsafe {
            dynamo_kernels_batched_copy(
                table.as_ptr(),
                ptr::null(),
                table.as_ptr(),
                1,
                ptr::null_mut(),
                &mut failed,
            )
        };
        assert_eq!(status, 1, "cudaErrorInvalidValue");
        assert!(
            name(failed).contains("null pointer table"),
            "{}",
            name(failed)
        );

        let mut dims = DkLayoutDims {
            num_layers: 1,
            outer_dim: 1,
            block_size: 1,
            num_heads: 1,
            head_dim: 1,
            elem_size: 0,
        };
        let convert = |dims: &DkLayoutDims, layout: c_int, failed: &mut *const c_char| unsafe {
            dynamo_kernels_convert_layout(
                table.as_ptr(),
                table.as_ptr(),
                1,
                dims,
                layout,
                0,
                ptr::null_mut(),
                failed,
            )
        };
        assert_eq!(convert(&dims, 0, &mut failed), 1);
        assert!(name(failed).contains("invalid layout, direction or dimension"));
        dims.elem_size = 4;
        assert_eq!(convert(&dims, 2, &mut failed), 1, "layout 2 does not exist");
        // 65536 tokens x 128 heads x 256 dims x 4 bytes: a chunk over 4 GiB.
        dims.block_size = 65536;
        dims.num_heads = 128;
        dims.head_dim = 256;
        assert_eq!(convert(&dims, 1, &mut failed), 1);
        assert!(
            name(failed).contains("larger than 4 GiB"),
            "{}",
            name(failed)
        );
        // Nothing to do: success without touching CUDA.
        let status = unsafe {
            dynamo_kernels_convert_layout(
                ptr::null(),
                ptr::null(),
                0,
                &dims,
                0,
                0,
                ptr::null_mut(),
                &mut failed,
            )
        };
        assert_eq!(status, 0);
    }

    #[test]
    fn a_missing_device_is_unavailability_not_failure() {
        let err = super::check(
            "batched_copy",
            super::CUDA_ERROR_NO_DEVICE,
            c"cudaGetDevice".as_ptr(),
        )
        .unwrap_err();
        assert_eq!(err.code(), crate::ErrorCode::CudaUnavailable);
        assert!(err.to_string().contains("cudaErrorNoDevice"), "{err}");
        assert!(err.to_string().contains("built with CUDA"), "{err}");
        let err = super::check("batched_copy", 700, c"cudaMemcpyAsync".as_ptr()).unwrap_err();
        assert_eq!(err.code(), crate::ErrorCode::CudaError);
        assert!(
            err.to_string()
                .contains("cudaMemcpyAsync failed with cudaErrorIllegalAddress (700)"),
            "{err}"
        );
    }
}
