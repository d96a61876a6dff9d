//! `runConformance` for JavaScript engines: the Rust kit, driving a JS engine through [`JsEngine`].

use std::time::Duration;

use dynamo_conformance::{
    run_conformance_report, run_raw_conformance_report, CheckStatus, ConformanceMode,
    ConformanceOptions,
};
use napi_derive::napi;

use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::Status;

use crate::js_engine::{Bridge, JsEngine};

/// Overrides for the kit's inputs; omitted fields keep the kit's defaults.
#[napi(object)]
pub struct ConformanceRunOptions {
    /// How long a stopped stream may take to end (default 2000 ms).
    pub cancel_deadline_ms: Option<u32>,
    /// Number of interleaved generate calls in the concurrency check (default 8).
    pub concurrency: Option<u32>,
    /// How long one check may take before it fails with `CheckTimedOut` (default unbounded).
    pub check_timeout_ms: Option<u32>,
    /// Which suite: `token` (default), `encode` (an encode worker's handoff rules) or `raw` (a
    /// raw media engine: JSON objects in and out, no `llm` registration).
    pub mode: Option<String>,
}

/// The outcome of one check of the kit.
#[napi(object)]
pub struct ConformanceCheck {
    /// Check name, one of `conformanceChecks()`.
    pub name: String,
    /// passed | failed | skipped (skipped once an earlier check failed).
    pub status: String,
    /// The failure kind (e.g. `NoTerminalChunk`) when the check failed.
    pub kind: Option<String>,
    /// What the kit observed, when the check failed.
    pub message: Option<String>,
    pub elapsed_ms: f64,
}

/// Every check of one conformance run, in the order they ran.
#[napi(object)]
pub struct ConformanceReport {
    pub passed: bool,
    pub checks: Vec<ConformanceCheck>,
}

/// Runs the conformance kit against engines produced on the JS side. `dispatch` receives one
/// JSON operation per call and resolves with the JSON reply (see `@dynamo/backend`'s bridge).
#[napi]
pub async fn run_conformance(
    // Spelled out (not the `Dispatch` alias) so the generated d.ts gets the function type.
    dispatch: ThreadsafeFunction<String, Promise<String>, String, Status, false, true>,
    options: Option<ConformanceRunOptions>,
) -> napi::Result<ConformanceReport> {
    let mut opts = ConformanceOptions::default();
    let mut raw = false;
    if let Some(o) = options {
        match o.mode.as_deref() {
            None | Some("token") => {}
            Some("encode") => opts.mode = ConformanceMode::Encode,
            Some("raw") => raw = true,
            Some(other) => {
                return Err(napi::Error::new(
                    Status::InvalidArg,
                    format!("unknown conformance mode '{other}' (expected token, encode or raw)"),
                ))
            }
        }
        if let Some(ms) = o.cancel_deadline_ms {
            opts.cancel_deadline = Duration::from_millis(ms.into());
        }
        if let Some(n) = o.concurrency {
            opts.concurrency = n as usize;
        }
        opts.check_timeout = o
            .check_timeout_ms
            .map(|ms| Duration::from_millis(ms.into()));
    }
    let bridge = Bridge::new(dispatch);
    let factory = || JsEngine::new(bridge.clone());
    let report = if raw {
        run_raw_conformance_report(factory, &opts).await
    } else {
        run_conformance_report(factory, &opts).await
    };
    Ok(ConformanceReport {
        passed: report.passed(),
        checks: report
            .checks
            .into_iter()
            .map(|c| ConformanceCheck {
                name: c.name.to_string(),
                status: match c.status {
                    CheckStatus::Passed => "passed",
                    CheckStatus::Failed => "failed",
                    CheckStatus::Skipped => "skipped",
                }
                .to_string(),
                kind: c.failure.as_ref().map(|f| f.kind().to_string()),
                message: c.failure.as_ref().map(|f| f.to_string()),
                elapsed_ms: c.elapsed.as_secs_f64() * 1000.0,
            })
            .collect(),
    })
}

/** Names of the kit's checks, in the order they run; `raw` gives the raw-engine suite's. */
#[napi]
pub fn conformance_checks(raw: Option<bool>) -> Vec<String> {
    let checks = if raw == Some(true) {
        dynamo_conformance::RAW_CHECKS
    } else {
        dynamo_conformance::CHECKS
    };
    checks.iter().map(|c| c.to_string()).collect()
}

/** Every failure kind the kit can report. */
#[napi]
pub fn conformance_failure_kinds() -> Vec<String> {
    dynamo_conformance::ALL_KINDS
        .iter()
        .map(|k| k.to_string())
        .collect()
}
