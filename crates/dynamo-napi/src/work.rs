//! Running llm-core work off the JS thread, and its errors as JS errors.

use dynamo_llm_core::LlmError;
use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Error, Status, Task};

/// An llm-core error as a JS error: bad input and bad files are `InvalidArg`.
pub fn js_error(e: LlmError) -> Error {
    let status = match e {
        LlmError::Io { .. }
        | LlmError::BadFile { .. }
        | LlmError::InvalidArgument(_)
        | LlmError::Template(_) => Status::InvalidArg,
        LlmError::Tokenizer(_) => Status::GenericFailure,
    };
    Error::new(status, e.to_string())
}

/// A closure run on the libuv pool whose result is converted to JS on the JS thread.
pub struct Work<T: Send + 'static, J> {
    job: Option<Box<dyn FnOnce() -> Result<T, LlmError> + Send>>,
    to_js: fn(T) -> J,
}

impl<T: Send + 'static, J> Work<T, J> {
    pub fn new(
        job: impl FnOnce() -> Result<T, LlmError> + Send + 'static,
        to_js: fn(T) -> J,
    ) -> Self {
        Self {
            job: Some(Box::new(job)),
            to_js,
        }
    }
}

impl<T: Send + 'static, J: ToNapiValue + TypeName> Task for Work<T, J> {
    type Output = T;
    type JsValue = J;

    fn compute(&mut self) -> napi::Result<T> {
        let job = self
            .job
            .take()
            .ok_or_else(|| Error::from_reason("work already ran"))?;
        job().map_err(js_error)
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<J> {
        Ok((self.to_js)(output))
    }
}
