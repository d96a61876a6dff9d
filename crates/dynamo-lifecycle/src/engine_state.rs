//! Engine lifecycle: guarantees `start` runs at most once and `cleanup` at most once.
//!
//! Cleanup is owed even after a failed start (the engine may hold partial state),
//! and is never repeated once attempted — even if it errored or timed out — because
//! tearing down things like NCCL groups twice is worse than leaking them.
//!
//! Sans-IO: the host feeds [`EngineEvent`]s and performs the returned [`EngineAction`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where the engine is in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineState {
    /// `start` not called yet (it may be in progress; see [`EngineLifecycle::is_starting`]).
    #[default]
    Init,
    /// `start` succeeded; cleanup is owed.
    Running,
    /// `start` failed; cleanup is still owed, exactly once.
    StartFailed,
    /// Cleanup done (or never owed); the engine is never called again.
    Stopped,
}

impl EngineState {
    /// Stable lowercase name, identical to the serde form.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineState::Init => "init",
            EngineState::Running => "running",
            EngineState::StartFailed => "start_failed",
            EngineState::Stopped => "stopped",
        }
    }
}

impl fmt::Display for EngineState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an engine cleanup call ended. Every outcome leads to `Stopped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanupOutcome {
    /// Returned normally.
    Ok,
    /// Returned an error (logged by the host, otherwise swallowed).
    Error,
    /// Did not return within its bound and was abandoned.
    TimedOut,
}

/// Something that happened to the engine, reported by the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EngineEvent {
    /// The host wants to call `engine.start()`.
    StartRequested,
    /// `engine.start()` returned successfully.
    StartSucceeded,
    /// `engine.start()` returned an error.
    StartFailed,
    /// The host wants the engine cleaned up, bounded by `timeout_ms`.
    CleanupRequested {
        /// Bound for the engine call, if one is made.
        timeout_ms: u64,
    },
    /// The engine cleanup call made for a previous `CallCleanup` ended.
    CleanupFinished {
        /// How it ended.
        outcome: CleanupOutcome,
    },
    /// A shutdown signal was observed before `start`; `start` must never run.
    ShutdownBeforeStart,
}

impl EngineEvent {
    fn name(&self) -> &'static str {
        match self {
            EngineEvent::StartRequested => "start_requested",
            EngineEvent::StartSucceeded => "start_succeeded",
            EngineEvent::StartFailed => "start_failed",
            EngineEvent::CleanupRequested { .. } => "cleanup_requested",
            EngineEvent::CleanupFinished { .. } => "cleanup_finished",
            EngineEvent::ShutdownBeforeStart => "shutdown_before_start",
        }
    }
}

/// What the host must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EngineAction {
    /// Call `engine.start()` and report `StartSucceeded` / `StartFailed`.
    CallStart,
    /// Call `engine.cleanup()` bounded by `timeout_ms`, then report `CleanupFinished`.
    CallCleanup {
        /// Bound for the call.
        timeout_ms: u64,
    },
    /// A cleanup is already running: await that one instead of calling again.
    WaitForCleanup,
    /// `start` is still running: await it, then request cleanup again.
    WaitForStart,
    /// Nothing to do (cleanup never owed, or already done).
    Noop,
}

/// An event that is not allowed in the current state. These are host bugs (or a
/// start after shutdown), reported instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineLifecycleError {
    /// `start` was requested after a shutdown signal that arrived first.
    #[error("shutdown requested before engine start; engine.start() will not run")]
    ShutdownBeforeStart,
    /// `start` was requested while a previous `start` is still running.
    #[error("engine.start() is already in progress")]
    StartInProgress,
    /// `start` was requested outside `Init`.
    #[error("engine.start() may only be called once, from state init; state is {state}")]
    AlreadyStarted {
        /// State at the time of the request.
        state: EngineState,
    },
    /// Any other event that makes no sense in the current state.
    #[error("unexpected engine event {event} in state {state}")]
    UnexpectedEvent {
        /// The event's snake_case name.
        event: &'static str,
        /// State at the time of the event.
        state: EngineState,
    },
}

/// The engine lifecycle machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineLifecycle {
    state: EngineState,
    starting: bool,
    cleaning: bool,
    shutdown_before_start: bool,
    last_cleanup: Option<CleanupOutcome>,
}

impl EngineLifecycle {
    /// A fresh machine in `Init`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Current state.
    pub fn state(&self) -> EngineState {
        self.state
    }

    /// True between `StartRequested` and its result.
    pub fn is_starting(&self) -> bool {
        self.starting
    }

    /// True between `CallCleanup` and `CleanupFinished`.
    pub fn is_cleaning(&self) -> bool {
        self.cleaning
    }

    /// True when cleanup is owed and not yet begun.
    pub fn cleanup_owed(&self) -> bool {
        matches!(self.state, EngineState::Running | EngineState::StartFailed) && !self.cleaning
    }

    /// How the (single) cleanup call ended, once it has.
    pub fn last_cleanup(&self) -> Option<CleanupOutcome> {
        self.last_cleanup
    }

    /// Apply one event.
    pub fn on(&mut self, event: EngineEvent) -> Result<EngineAction, EngineLifecycleError> {
        use EngineAction as A;
        use EngineState as S;
        let unexpected = |ev: &EngineEvent, state| EngineLifecycleError::UnexpectedEvent {
            event: ev.name(),
            state,
        };
        match event {
            EngineEvent::StartRequested => match self.state {
                S::Init if self.starting => Err(EngineLifecycleError::StartInProgress),
                S::Init => {
                    self.starting = true;
                    Ok(A::CallStart)
                }
                S::Stopped if self.shutdown_before_start => {
                    Err(EngineLifecycleError::ShutdownBeforeStart)
                }
                state => Err(EngineLifecycleError::AlreadyStarted { state }),
            },
            EngineEvent::StartSucceeded | EngineEvent::StartFailed if self.starting => {
                self.starting = false;
                self.state = if event == EngineEvent::StartSucceeded {
                    S::Running
                } else {
                    S::StartFailed
                };
                Ok(A::Noop)
            }
            EngineEvent::StartSucceeded | EngineEvent::StartFailed => {
                Err(unexpected(&event, self.state))
            }
            EngineEvent::CleanupRequested { timeout_ms } => Ok(match self.state {
                _ if self.cleaning => A::WaitForCleanup,
                S::Init if self.starting => A::WaitForStart,
                S::Init => {
                    self.state = S::Stopped;
                    A::Noop
                }
                S::Running | S::StartFailed => {
                    self.cleaning = true;
                    A::CallCleanup { timeout_ms }
                }
                S::Stopped => A::Noop,
            }),
            EngineEvent::CleanupFinished { outcome } if self.cleaning => {
                self.cleaning = false;
                self.state = S::Stopped;
                self.last_cleanup = Some(outcome);
                Ok(A::Noop)
            }
            EngineEvent::CleanupFinished { .. } => Err(unexpected(&event, self.state)),
            EngineEvent::ShutdownBeforeStart => match self.state {
                S::Init if !self.starting => {
                    self.state = S::Stopped;
                    self.shutdown_before_start = true;
                    Ok(A::Noop)
                }
                S::Stopped => Ok(A::Noop),
                state => Err(unexpected(&event, state)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: u64 = 5_000;

    fn cleanup() -> EngineEvent {
        EngineEvent::CleanupRequested { timeout_ms: T }
    }

    fn finished(outcome: CleanupOutcome) -> EngineEvent {
        EngineEvent::CleanupFinished { outcome }
    }

    fn running() -> EngineLifecycle {
        let mut m = EngineLifecycle::new();
        assert_eq!(
            m.on(EngineEvent::StartRequested),
            Ok(EngineAction::CallStart)
        );
        assert_eq!(m.on(EngineEvent::StartSucceeded), Ok(EngineAction::Noop));
        m
    }

    fn failed() -> EngineLifecycle {
        let mut m = EngineLifecycle::new();
        m.on(EngineEvent::StartRequested).unwrap();
        m.on(EngineEvent::StartFailed).unwrap();
        m
    }

    /// Feeds `n` cleanup requests, completing each engine call, and counts engine calls.
    fn cleanup_calls(m: &mut EngineLifecycle, n: usize) -> usize {
        let mut calls = 0;
        for _ in 0..n {
            if let EngineAction::CallCleanup { .. } = m.on(cleanup()).unwrap() {
                calls += 1;
                m.on(finished(CleanupOutcome::Ok)).unwrap();
            }
        }
        calls
    }

    #[test]
    fn starts_in_init() {
        let m = EngineLifecycle::new();
        assert_eq!(m.state(), EngineState::Init);
        assert!(!m.is_starting());
        assert!(!m.cleanup_owed());
    }

    #[test]
    fn start_ok_goes_running() {
        let m = running();
        assert_eq!(m.state(), EngineState::Running);
        assert!(m.cleanup_owed());
    }

    #[test]
    fn start_err_goes_start_failed_and_still_owes_cleanup() {
        let m = failed();
        assert_eq!(m.state(), EngineState::StartFailed);
        assert!(m.cleanup_owed());
    }

    #[test]
    fn start_is_refused_outside_init() {
        let mut m = running();
        assert_eq!(
            m.on(EngineEvent::StartRequested),
            Err(EngineLifecycleError::AlreadyStarted {
                state: EngineState::Running
            })
        );
        let mut m = failed();
        assert!(matches!(
            m.on(EngineEvent::StartRequested),
            Err(EngineLifecycleError::AlreadyStarted { .. })
        ));
        cleanup_calls(&mut m, 1);
        assert_eq!(
            m.on(EngineEvent::StartRequested),
            Err(EngineLifecycleError::AlreadyStarted {
                state: EngineState::Stopped
            })
        );
    }

    #[test]
    fn second_start_while_starting_is_refused() {
        let mut m = EngineLifecycle::new();
        m.on(EngineEvent::StartRequested).unwrap();
        assert!(m.is_starting());
        assert_eq!(
            m.on(EngineEvent::StartRequested),
            Err(EngineLifecycleError::StartInProgress)
        );
    }

    #[test]
    fn start_result_without_start_is_an_error() {
        let mut m = EngineLifecycle::new();
        let err = m.on(EngineEvent::StartSucceeded).unwrap_err();
        assert_eq!(
            err,
            EngineLifecycleError::UnexpectedEvent {
                event: "start_succeeded",
                state: EngineState::Init
            }
        );
        assert!(err.to_string().contains("start_succeeded"));
        let mut m = running();
        assert!(m.on(EngineEvent::StartFailed).is_err());
        assert_eq!(m.state(), EngineState::Running);
    }

    #[test]
    fn cleanup_in_running_calls_engine_once_with_timeout() {
        let mut m = running();
        assert_eq!(
            m.on(cleanup()),
            Ok(EngineAction::CallCleanup { timeout_ms: T })
        );
        assert!(m.is_cleaning());
        assert!(!m.cleanup_owed());
        assert_eq!(m.on(finished(CleanupOutcome::Ok)), Ok(EngineAction::Noop));
        assert_eq!(m.state(), EngineState::Stopped);
        assert_eq!(m.on(cleanup()), Ok(EngineAction::Noop));
    }

    #[test]
    fn cleanup_after_failed_start_calls_engine_exactly_once() {
        let mut m = failed();
        assert_eq!(cleanup_calls(&mut m, 2), 1);
        assert_eq!(m.state(), EngineState::Stopped);
    }

    #[test]
    fn three_cleanups_one_engine_call() {
        let mut m = running();
        assert_eq!(cleanup_calls(&mut m, 3), 1);
    }

    #[test]
    fn cleanup_before_start_never_calls_engine() {
        let mut m = EngineLifecycle::new();
        assert_eq!(m.on(cleanup()), Ok(EngineAction::Noop));
        assert_eq!(m.state(), EngineState::Stopped);
        assert_eq!(cleanup_calls(&mut m, 3), 0);
    }

    #[test]
    fn concurrent_cleanup_waits_for_the_inflight_one() {
        let mut m = running();
        assert!(matches!(
            m.on(cleanup()),
            Ok(EngineAction::CallCleanup { .. })
        ));
        assert_eq!(m.on(cleanup()), Ok(EngineAction::WaitForCleanup));
        assert_eq!(m.on(cleanup()), Ok(EngineAction::WaitForCleanup));
        m.on(finished(CleanupOutcome::Ok)).unwrap();
        assert_eq!(m.on(cleanup()), Ok(EngineAction::Noop));
    }

    #[test]
    fn cleanup_error_or_timeout_still_stops() {
        for outcome in [CleanupOutcome::Error, CleanupOutcome::TimedOut] {
            let mut m = running();
            m.on(cleanup()).unwrap();
            m.on(finished(outcome)).unwrap();
            assert_eq!(m.state(), EngineState::Stopped);
            assert_eq!(m.last_cleanup(), Some(outcome));
            assert_eq!(m.on(cleanup()), Ok(EngineAction::Noop));
        }
    }

    #[test]
    fn cleanup_finished_without_call_is_an_error() {
        let mut m = running();
        assert!(m.on(finished(CleanupOutcome::Ok)).is_err());
        assert_eq!(m.state(), EngineState::Running);
        let mut m = EngineLifecycle::new();
        m.on(cleanup()).unwrap();
        assert!(m.on(finished(CleanupOutcome::Ok)).is_err());
    }

    #[test]
    fn cleanup_during_start_waits_for_start() {
        let mut m = EngineLifecycle::new();
        m.on(EngineEvent::StartRequested).unwrap();
        assert_eq!(m.on(cleanup()), Ok(EngineAction::WaitForStart));
        assert_eq!(m.state(), EngineState::Init);
        m.on(EngineEvent::StartSucceeded).unwrap();
        assert_eq!(cleanup_calls(&mut m, 1), 1);
    }

    #[test]
    fn shutdown_before_start_stops_and_refuses_later_start() {
        let mut m = EngineLifecycle::new();
        assert_eq!(
            m.on(EngineEvent::ShutdownBeforeStart),
            Ok(EngineAction::Noop)
        );
        assert_eq!(m.state(), EngineState::Stopped);
        assert_eq!(
            m.on(EngineEvent::StartRequested),
            Err(EngineLifecycleError::ShutdownBeforeStart)
        );
        assert_eq!(cleanup_calls(&mut m, 2), 0);
        // Repeating the signal is harmless.
        assert_eq!(
            m.on(EngineEvent::ShutdownBeforeStart),
            Ok(EngineAction::Noop)
        );
    }

    #[test]
    fn shutdown_before_start_is_rejected_once_started() {
        let mut m = running();
        assert!(m.on(EngineEvent::ShutdownBeforeStart).is_err());
        let mut m = EngineLifecycle::new();
        m.on(EngineEvent::StartRequested).unwrap();
        assert!(m.on(EngineEvent::ShutdownBeforeStart).is_err());
        assert!(m.is_starting());
    }

    #[test]
    fn state_names() {
        assert_eq!(EngineState::Init.as_str(), "init");
        assert_eq!(EngineState::Running.as_str(), "running");
        assert_eq!(EngineState::StartFailed.as_str(), "start_failed");
        assert_eq!(EngineState::Stopped.to_string(), "stopped");
        for s in [
            EngineState::Init,
            EngineState::Running,
            EngineState::StartFailed,
            EngineState::Stopped,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
    }

    #[test]
    fn events_and_actions_have_tagged_json_shapes() {
        let ev: EngineEvent =
            serde_json::from_value(json!({"type": "cleanup_requested", "timeout_ms": 7})).unwrap();
        assert_eq!(ev, EngineEvent::CleanupRequested { timeout_ms: 7 });
        let ev: EngineEvent =
            serde_json::from_value(json!({"type": "cleanup_finished", "outcome": "timed_out"}))
                .unwrap();
        assert_eq!(ev, finished(CleanupOutcome::TimedOut));
        let ev: EngineEvent = serde_json::from_value(json!({"type": "start_requested"})).unwrap();
        assert_eq!(ev, EngineEvent::StartRequested);
        assert_eq!(
            serde_json::to_value(EngineAction::CallCleanup { timeout_ms: 5000 }).unwrap(),
            json!({"type": "call_cleanup", "timeout_ms": 5000})
        );
        assert_eq!(
            serde_json::to_value(EngineAction::WaitForCleanup).unwrap(),
            json!({"type": "wait_for_cleanup"})
        );
        assert_eq!(
            serde_json::to_value(EngineAction::Noop).unwrap(),
            json!({"type": "noop"})
        );
    }
}
