//! Budget arithmetic: one deadline shared by every stage, with a floor for cleanup.

use serde::Serialize;

use super::Stage;
use crate::config::{ShutdownSettings, CLEANUP_RESERVE_MS};

/// The time granted to engine cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CleanupBound {
    /// Bound for the cleanup call.
    pub timeout_ms: u64,
    /// The budget was already spent and only the [`CLEANUP_RESERVE_MS`] floor is
    /// granted; the caller should warn about it.
    pub reserve_granted: bool,
}

/// The single shutdown budget. Armed once on first entry and never reset, so a
/// second signal or a nested shutdown path cannot extend the process's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownBudget {
    pub(crate) settings: ShutdownSettings,
    /// `None`: unbounded (a reversible admin drain, never used on SIGTERM).
    total_ms: Option<u64>,
    armed_at_ms: Option<u64>,
}

impl ShutdownBudget {
    /// A bounded budget of `settings.total_ms`.
    pub fn new(settings: &ShutdownSettings) -> Self {
        ShutdownBudget {
            settings: settings.clone(),
            total_ms: Some(settings.total_ms),
            armed_at_ms: None,
        }
    }

    /// A budget without a deadline: every allowance is `None`.
    pub fn unbounded(settings: &ShutdownSettings) -> Self {
        ShutdownBudget {
            total_ms: None,
            ..ShutdownBudget::new(settings)
        }
    }

    /// Starts the clock at `now_ms`. Returns false (and changes nothing) if already armed.
    pub fn arm(&mut self, now_ms: u64) -> bool {
        if self.armed_at_ms.is_some() {
            return false;
        }
        self.armed_at_ms = Some(now_ms);
        true
    }

    /// Whether [`arm`](Self::arm) has been called.
    pub fn is_armed(&self) -> bool {
        self.armed_at_ms.is_some()
    }

    /// Whether this budget has no deadline.
    pub fn is_unbounded(&self) -> bool {
        self.total_ms.is_none()
    }

    /// The whole budget; `None` when unbounded.
    pub fn total_ms(&self) -> Option<u64> {
        self.total_ms
    }

    /// When the budget runs out, once armed (and bounded).
    pub fn deadline_ms(&self) -> Option<u64> {
        Some(self.armed_at_ms?.saturating_add(self.total_ms?))
    }

    /// Time left at `now_ms`: the full total before arming, `None` when unbounded.
    pub fn remaining(&self, now_ms: u64) -> Option<u64> {
        let total = self.total_ms?;
        Some(match self.deadline_ms() {
            Some(deadline) => deadline.saturating_sub(now_ms),
            None => total,
        })
    }

    /// The configured cap of a stage; `None` for stages that are not time-bounded.
    pub fn stage_cap(&self, stage: Stage) -> Option<u64> {
        let s = &self.settings;
        match stage {
            Stage::Unregister | Stage::StopAdmission => None,
            Stage::RouterGrace => Some(s.router_grace_ms),
            Stage::Inflight => Some(s.inflight_timeout_ms),
            Stage::KvTransfer => Some(s.kv_transfer_timeout_ms),
            Stage::Cleanup => Some(s.cleanup_timeout_ms),
        }
    }

    /// `min(stage cap, remaining)`; `None` when the budget is unbounded. Nothing is
    /// held back for cleanup: cleanup has its own reserve floor instead.
    pub fn allowance(&self, stage: Stage, now_ms: u64) -> Option<u64> {
        let remaining = self.remaining(now_ms)?;
        Some(match self.stage_cap(stage) {
            Some(cap) => cap.min(remaining),
            None => remaining,
        })
    }

    /// Bound for engine cleanup. Cleanup is never skipped: if the budget is spent,
    /// it still gets [`CLEANUP_RESERVE_MS`].
    pub fn cleanup_bound(&self, now_ms: u64) -> CleanupBound {
        let cap = self.settings.cleanup_timeout_ms;
        let timeout_ms = match (self.is_armed(), self.remaining(now_ms)) {
            (true, Some(0)) => {
                return CleanupBound {
                    timeout_ms: CLEANUP_RESERVE_MS,
                    reserve_granted: true,
                }
            }
            (true, Some(remaining)) => remaining.min(cap),
            _ => cap,
        };
        CleanupBound {
            timeout_ms,
            reserve_granted: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// graceful 30s, grace 5s, inflight 900s, kv 30s, cleanup 20s, total 35s.
    fn settings() -> ShutdownSettings {
        ShutdownSettings {
            cleanup_timeout_ms: 20_000,
            ..ShutdownSettings::default()
        }
    }

    #[test]
    fn arms_once_and_never_resets() {
        let mut b = ShutdownBudget::new(&settings());
        assert!(!b.is_armed());
        assert_eq!(b.deadline_ms(), None);
        assert!(b.arm(1_000));
        assert_eq!(b.deadline_ms(), Some(36_000));
        assert!(!b.arm(9_000));
        assert_eq!(b.deadline_ms(), Some(36_000));
    }

    #[test]
    fn remaining_counts_down_and_saturates() {
        let mut b = ShutdownBudget::new(&settings());
        assert_eq!(b.remaining(123), Some(35_000), "full budget before arming");
        b.arm(1_000);
        assert_eq!(b.remaining(1_000), Some(35_000));
        assert_eq!(b.remaining(11_000), Some(25_000));
        assert_eq!(b.remaining(36_000), Some(0));
        assert_eq!(b.remaining(99_000), Some(0));
        // A clock reading before arming does not grow the budget past its deadline.
        assert_eq!(b.remaining(0), Some(36_000));
    }

    #[test]
    fn stage_caps() {
        let b = ShutdownBudget::new(&settings());
        assert_eq!(b.stage_cap(Stage::Unregister), None);
        assert_eq!(b.stage_cap(Stage::StopAdmission), None);
        assert_eq!(b.stage_cap(Stage::RouterGrace), Some(5_000));
        assert_eq!(b.stage_cap(Stage::Inflight), Some(900_000));
        assert_eq!(b.stage_cap(Stage::KvTransfer), Some(30_000));
        assert_eq!(b.stage_cap(Stage::Cleanup), Some(20_000));
    }

    #[test]
    fn allowance_is_min_of_cap_and_remaining() {
        let mut b = ShutdownBudget::new(&settings());
        b.arm(0);
        assert_eq!(b.allowance(Stage::RouterGrace, 0), Some(5_000));
        assert_eq!(b.allowance(Stage::Inflight, 0), Some(35_000));
        assert_eq!(b.allowance(Stage::KvTransfer, 0), Some(30_000));
        assert_eq!(b.allowance(Stage::KvTransfer, 10_000), Some(25_000));
        assert_eq!(b.allowance(Stage::RouterGrace, 32_000), Some(3_000));
        assert_eq!(b.allowance(Stage::Cleanup, 0), Some(20_000));
        // Uncapped stages get whatever is left.
        assert_eq!(b.allowance(Stage::Unregister, 30_000), Some(5_000));
        assert_eq!(b.allowance(Stage::StopAdmission, 40_000), Some(0));
    }

    #[test]
    fn unbounded_budget_has_no_allowances() {
        let mut b = ShutdownBudget::unbounded(&settings());
        assert!(b.is_unbounded());
        assert!(b.arm(0));
        assert_eq!(b.total_ms(), None);
        assert_eq!(b.deadline_ms(), None);
        assert_eq!(b.remaining(1_000_000), None);
        for s in Stage::ALL {
            assert_eq!(b.allowance(s, 1_000_000), None, "{s}");
        }
    }

    #[test]
    fn cleanup_bound_when_never_armed_is_the_cleanup_timeout() {
        let b = ShutdownBudget::new(&settings());
        assert_eq!(
            b.cleanup_bound(1_000_000),
            CleanupBound {
                timeout_ms: 20_000,
                reserve_granted: false
            }
        );
    }

    #[test]
    fn cleanup_bound_when_unbounded_is_the_cleanup_timeout() {
        let mut b = ShutdownBudget::unbounded(&settings());
        b.arm(0);
        assert_eq!(b.cleanup_bound(1_000_000).timeout_ms, 20_000);
        assert!(!b.cleanup_bound(1_000_000).reserve_granted);
    }

    #[test]
    fn cleanup_bound_is_remaining_capped_by_cleanup_timeout() {
        let mut b = ShutdownBudget::new(&settings());
        b.arm(0);
        assert_eq!(b.cleanup_bound(0).timeout_ms, 20_000);
        assert_eq!(b.cleanup_bound(25_000).timeout_ms, 10_000);
        assert_eq!(b.cleanup_bound(34_999).timeout_ms, 1);
        assert!(!b.cleanup_bound(34_999).reserve_granted);
    }

    #[test]
    fn cleanup_bound_grants_reserve_when_budget_is_spent() {
        let mut b = ShutdownBudget::new(&settings());
        b.arm(0);
        for now in [35_000, 50_000] {
            assert_eq!(
                b.cleanup_bound(now),
                CleanupBound {
                    timeout_ms: CLEANUP_RESERVE_MS,
                    reserve_granted: true
                }
            );
        }
        assert_eq!(CLEANUP_RESERVE_MS, 5_000);
    }

    #[test]
    fn zero_total_budget_goes_straight_to_the_reserve() {
        let s = ShutdownSettings {
            total_ms: 0,
            ..settings()
        };
        let mut b = ShutdownBudget::new(&s);
        b.arm(7);
        assert_eq!(b.allowance(Stage::RouterGrace, 7), Some(0));
        assert!(b.cleanup_bound(7).reserve_granted);
    }
}
