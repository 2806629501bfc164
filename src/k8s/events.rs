//! Kubernetes Events joiner publishes, and how many. A decision step queues Events on a channel;
//! a publisher task sends them through kube's recorder a few at a time, so the decision thread
//! never waits for them. Pod Events are thinned the way Karpenter thins them: `Nominated` under
//! one rate limit across all pods, `FailedScheduling` once per pod and message in five minutes.
//! A large scale-up otherwise sent an Event per pod per pass.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::runtime::Handle;

/// Events a publisher task sends at once.
const EVENT_CONCURRENCY: usize = 8;

/// `Nominated` Events admitted per second, and in a burst. As in Karpenter (its
/// `PodNominationRateLimiter`), one limit across all pods, and an Event over it is dropped: a
/// pass may nominate 10,000 pods, and an Event for each loaded the API server and held 27 MB in
/// the recorder's 6-minute cache. The claim and the pod's own status say where the pod goes.
const NOMINATIONS_PER_SECOND: u32 = 5;
pub(crate) const NOMINATION_BURST: u32 = 10;

/// How long a pod's `FailedScheduling` Event stands before the same one is sent again
/// (Karpenter's dedupe timeout for it).
pub const FAILED_SCHEDULING_REPEAT: Duration = Duration::from_secs(300);

pub fn nomination_limiter() -> DefaultDirectRateLimiter {
    let per_second = NonZeroU32::new(NOMINATIONS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(NOMINATION_BURST).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst))
}

/// Starts the task that publishes Events, a few at a time. Events are informational and a pass
/// may nominate 10,000 pods: waiting for each POST before the next NodeClaim made Events most of
/// a large pass's time.
pub fn spawn_publisher(
    rt: &Handle,
    recorder: Recorder,
) -> UnboundedSender<(ObjectReference, Event)> {
    let (tx, rx) = futures::channel::mpsc::unbounded::<(ObjectReference, Event)>();
    rt.spawn(rx.for_each_concurrent(EVENT_CONCURRENCY, move |(object, event)| {
        let recorder = recorder.clone();
        async move {
            if let Err(e) = recorder.publish(&event, &object).await {
                tracing::debug!(object = ?object.name, reason = %event.reason, error = %e, "event not recorded");
            }
        }
    }));
    tx
}

/// Remembers which Events were sent, by object and message, so a repeat within `window` is
/// skipped. Entries older than the window are swept as new ones arrive, so it holds at most the
/// Events of one window.
#[derive(Debug)]
pub struct Dedupe {
    window: Duration,
    sent: HashMap<(String, String), Instant>,
    swept: Instant,
}

impl Dedupe {
    pub fn new(window: Duration, now: Instant) -> Dedupe {
        Dedupe {
            window,
            sent: HashMap::new(),
            swept: now,
        }
    }

    /// Whether the Event about `object` saying `message` should go out at `now`.
    pub fn admit(&mut self, object: &str, message: &str, now: Instant) -> bool {
        if now.duration_since(self.swept) >= self.window {
            self.sent
                .retain(|_, at| now.duration_since(*at) < self.window);
            self.swept = now;
        }
        let key = (object.to_string(), message.to_string());
        match self.sent.get(&key) {
            Some(at) if now.duration_since(*at) < self.window => false,
            _ => {
                self.sent.insert(key, now);
                true
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominations_come_in_a_burst_of_ten_then_wait_for_the_rate() {
        let limiter = nomination_limiter();
        let admitted = (0..100).filter(|_| limiter.check().is_ok()).count();
        assert_eq!(admitted, NOMINATION_BURST as usize);
    }

    #[test]
    fn the_same_failure_is_told_once_a_window_and_a_new_one_at_once() {
        let t0 = Instant::now();
        let mut d = Dedupe::new(Duration::from_secs(300), t0);
        assert!(d.admit("shop/web-1", "no offering", t0));
        assert!(!d.admit("shop/web-1", "no offering", t0 + Duration::from_secs(60)));
        assert!(
            d.admit("shop/web-1", "nodepool limit", t0 + Duration::from_secs(60)),
            "a different message is news"
        );
        assert!(
            d.admit("shop/web-2", "no offering", t0 + Duration::from_secs(60)),
            "another pod is news"
        );
        assert!(
            d.admit("shop/web-1", "no offering", t0 + Duration::from_secs(300)),
            "the window is over"
        );
    }

    #[test]
    fn entries_older_than_the_window_are_swept() {
        let t0 = Instant::now();
        let mut d = Dedupe::new(Duration::from_secs(300), t0);
        for i in 0..100 {
            d.admit(&format!("shop/web-{i}"), "no offering", t0);
        }
        assert_eq!(d.len(), 100);
        d.admit("shop/late", "no offering", t0 + Duration::from_secs(301));
        assert_eq!(d.len(), 1);
    }
}
