//! Running llm-core work off the JS thread.

use dynamo_llm_core::LlmError;
use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Task};

use crate::convert::{failure, js_error};

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
        let job = self.job.take().ok_or_else(|| failure("work already ran"))?;
        job().map_err(js_error)
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<J> {
        Ok((self.to_js)(output))
    }
}
