//! The right to act: a [`LeaderToken`] is shared by everything that writes to the cluster or the
//! cloud, and every write asks it first. With leader election the host extends the token after
//! each successful renewal of its Lease, only until the renew deadline counted from when that
//! renewal was sent, so a token whose holder stopped renewing (a hung request, a starved task)
//! lapses by itself, before any standby may take the Lease over. Without leader election the
//! token never lapses.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A write was refused: this replica does not lead (or no longer does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: writes are refused")]
pub struct NotLeader;

/// Whether this replica may act now. Cloning shares the state: the renewing side extends or
/// revokes it, every writer checks it.
#[derive(Debug, Clone)]
pub struct LeaderToken(Arc<State>);

#[derive(Debug)]
struct State {
    base: Instant,
    /// Nanoseconds after `base` until which the token is valid; 0: never granted.
    until: AtomicU64,
    revoked: AtomicBool,
}

impl LeaderToken {
    /// A token nobody has granted yet: not the leader until [`LeaderToken::extend`].
    pub fn pending() -> LeaderToken {
        LeaderToken(Arc::new(State {
            base: Instant::now(),
            until: AtomicU64::new(0),
            revoked: AtomicBool::new(false),
        }))
    }

    /// A token that never lapses: one replica without leader election, and the simulator.
    pub fn always() -> LeaderToken {
        let t = LeaderToken::pending();
        t.0.until.store(u64::MAX, Ordering::SeqCst);
        t
    }

    /// Leads until `until`, unless revoked. An earlier instant than the current one is ignored:
    /// a late answer to an old renewal must not shorten a newer grant.
    pub fn extend(&self, until: Instant) {
        let nanos = self.nanos(until).max(1);
        self.0.until.fetch_max(nanos, Ordering::SeqCst);
    }

    /// Ends leadership for good: the Lease was lost, the decision loop hung, or the process stops.
    pub fn revoke(&self) {
        self.0.revoked.store(true, Ordering::SeqCst);
    }

    pub fn is_leader(&self) -> bool {
        self.is_leader_at(Instant::now())
    }

    /// [`LeaderToken::is_leader`] at a given instant (tests use a fake clock).
    pub fn is_leader_at(&self, now: Instant) -> bool {
        !self.0.revoked.load(Ordering::SeqCst)
            && self.nanos(now) < self.0.until.load(Ordering::SeqCst)
    }

    /// Ok while this replica leads; for `?` before a write.
    pub fn check(&self) -> Result<(), NotLeader> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(NotLeader)
        }
    }

    /// How long the token stays valid without another extension (zero when it is not).
    pub fn remaining(&self) -> Duration {
        if self.0.revoked.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        let until = self.0.until.load(Ordering::SeqCst);
        Duration::from_nanos(until.saturating_sub(self.nanos(Instant::now())))
    }

    fn nanos(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.0.base).as_nanos();
        u64::try_from(d).unwrap_or(u64::MAX)
    }
}

impl Default for LeaderToken {
    fn default() -> Self {
        LeaderToken::always()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_leads_only_between_its_grant_and_its_deadline() {
        let t = LeaderToken::pending();
        let t0 = Instant::now();
        assert!(!t.is_leader_at(t0), "nothing granted yet");
        t.extend(t0 + Duration::from_secs(10));
        let shared = t.clone();
        assert!(shared.is_leader_at(t0 + Duration::from_secs(9)));
        assert!(!shared.is_leader_at(t0 + Duration::from_secs(10)));
        // a late answer to an older renewal does not shorten the grant
        t.extend(t0 + Duration::from_secs(2));
        assert!(shared.is_leader_at(t0 + Duration::from_secs(9)));
    }

    #[test]
    fn a_revoked_token_never_leads_again() {
        let t = LeaderToken::pending();
        let t0 = Instant::now();
        t.extend(t0 + Duration::from_secs(60));
        t.clone().revoke();
        assert!(!t.is_leader_at(t0));
        t.extend(t0 + Duration::from_secs(120));
        assert_eq!(t.check(), Err(NotLeader));
        assert_eq!(t.remaining(), Duration::ZERO);
    }

    #[test]
    fn without_election_the_token_always_leads() {
        let t = LeaderToken::always();
        assert!(t.is_leader_at(Instant::now() + Duration::from_secs(10 * 365 * 86_400)));
        assert_eq!(t.check(), Ok(()));
    }
}
