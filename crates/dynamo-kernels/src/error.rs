//! The one error type of the crate, with a stable machine-readable [`ErrorCode`].

use std::fmt;

/// Stable, machine-readable error codes (the `code` of the JS error thrown by `@dynamo/core`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The crate was built without CUDA, or no usable CUDA device/driver is present.
    CudaUnavailable,
    /// An argument was rejected before any CUDA call was made.
    InvalidArgument,
    /// A CUDA runtime call failed.
    CudaError,
}

impl ErrorCode {
    /// `CUDA_UNAVAILABLE`, `INVALID_ARGUMENT` or `CUDA_ERROR`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::CudaUnavailable => "CUDA_UNAVAILABLE",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::CudaError => "CUDA_ERROR",
        }
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a kernel call was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelError {
    /// Built without CUDA (`reason` says why the build chose stubs), or no device/driver at run time.
    CudaUnavailable { reason: String },
    /// `argument` names the offending input as the caller spelled it (`srcs[3]`,
    /// `spec.head_dim`); `problem` says what is wrong with it.
    InvalidArgument { argument: String, problem: String },
    /// `call` is the CUDA runtime function that failed; `name`/`message` come from the runtime.
    Cuda {
        operation: &'static str,
        call: String,
        status: i32,
        name: String,
        message: String,
    },
}

impl KernelError {
    pub fn code(&self) -> ErrorCode {
        match self {
            KernelError::CudaUnavailable { .. } => ErrorCode::CudaUnavailable,
            KernelError::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            KernelError::Cuda { .. } => ErrorCode::CudaError,
        }
    }

    pub(crate) fn invalid(argument: impl Into<String>, problem: impl Into<String>) -> Self {
        KernelError::InvalidArgument {
            argument: argument.into(),
            problem: problem.into(),
        }
    }

    /// The argument an `InvalidArgument` error names.
    pub fn argument(&self) -> Option<&str> {
        match self {
            KernelError::InvalidArgument { argument, .. } => Some(argument),
            _ => None,
        }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::CudaUnavailable { reason } => f.write_str(reason),
            KernelError::InvalidArgument { argument, problem } => {
                write!(f, "invalid argument {argument}: {problem}")
            }
            KernelError::Cuda {
                operation,
                call,
                status,
                name,
                message,
            } => write!(
                f,
                "{operation}: {call} failed with {name} ({status}): {message}"
            ),
        }
    }
}

impl std::error::Error for KernelError {}
