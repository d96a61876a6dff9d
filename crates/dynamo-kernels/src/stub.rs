//! The backend of a build without CUDA: every GPU entry point reports why it is unavailable.

use crate::copy::CopyBatch;
use crate::layout::Conversion;
use crate::KernelError;

fn unavailable(operation: &str) -> KernelError {
    let reason = crate::build_info()
        .stub_reason
        .unwrap_or("dynamo-kernels was built without CUDA");
    KernelError::CudaUnavailable {
        reason: format!("{operation}: {reason}"),
    }
}

pub(crate) fn ensure_built(operation: &str) -> Result<(), KernelError> {
    Err(unavailable(operation))
}

pub(crate) fn device_count() -> Result<u32, KernelError> {
    Err(unavailable("device_count"))
}

pub(crate) unsafe fn batched_copy(
    operation: &str,
    _batch: &CopyBatch<'_>,
    _stream: u64,
) -> Result<(), KernelError> {
    Err(unavailable(operation))
}

pub(crate) unsafe fn convert_layout(
    operation: &str,
    _conv: &Conversion<'_>,
    _stream: u64,
) -> Result<(), KernelError> {
    Err(unavailable(operation))
}
