//! Per-request cancellation handle shared by the caller and the engine.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// The cancellation side of a request: the caller stops or kills it, the engine
/// polls [`Context::is_stopped`] between tokens or awaits [`Context::stopped`].
///
/// Cloning is cheap and every clone observes the same state, so the engine's
/// stream body can own one while the caller keeps another.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    stopped: AtomicBool,
    killed: AtomicBool,
    changed: Notify,
}

impl Context {
    /// A fresh, running context for the request `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Context {
            inner: Arc::new(Inner {
                id: id.into(),
                stopped: AtomicBool::new(false),
                killed: AtomicBool::new(false),
                changed: Notify::new(),
            }),
        }
    }

    /// The request id, for logs and for engines that key per-request state on it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// True once the request was stopped or killed: the engine should finish with
    /// a `cancelled` terminal at its next opportunity.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// True once the request was killed: nobody reads the stream any more.
    pub fn is_killed(&self) -> bool {
        self.inner.killed.load(Ordering::Acquire)
    }

    /// Asks the engine to stop generating and end the stream gracefully.
    pub fn stop_generating(&self) {
        self.inner.stopped.store(true, Ordering::Release);
        self.inner.changed.notify_waiters();
    }

    /// Stops the request without expecting a graceful end; implies stopped.
    pub fn kill(&self) {
        self.inner.killed.store(true, Ordering::Release);
        self.stop_generating();
    }

    /// Resolves once the request is stopped or killed, immediately if it already is.
    pub async fn stopped(&self) {
        loop {
            let notified = self.inner.changed.notified();
            let mut notified = std::pin::pin!(notified);
            // Register interest before reading the flag, so a stop that lands
            // between the check and the await still wakes us.
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.id())
            .field("stopped", &self.is_stopped())
            .field("killed", &self.is_killed())
            .finish()
    }
}
