//! Kubernetes Events joiner publishes, and how many. A decision step queues Events on a channel;
//! a publisher task sends them through kube's recorder a few at a time, so the decision thread
//! never waits for them. Pod Events are thinned the way Karpenter thins them: `Nominated` under
//! one rate limit across all pods, `FailedScheduling` once per pod and message in five minutes.
//! A large scale-up otherwise sent an Event per pod per pass. The queue is bounded: Events the
//! publisher cannot keep up with are dropped and counted ([`dropped`]), never held without limit.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures::channel::mpsc::{Receiver, UnboundedSender};
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::runtime::Handle;

/// Events a publisher task sends at once.
const EVENT_CONCURRENCY: usize = 8;

/// Events waiting to be sent at most; more are dropped. At eight in flight and a few milliseconds
/// each, a full queue is a second or two of the API server's time.
pub const EVENT_QUEUE: usize = 1024;

static DROPPED: LazyLock<prometheus_client::metrics::counter::Counter> =
    LazyLock::new(Default::default);

/// Events dropped because the queue was full, since the process started (one publisher queue
/// per process, so one count).
pub fn dropped() -> prometheus_client::metrics::counter::Counter {
    DROPPED.clone()
}

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
    let (tx, queue) = bounded(rt, EVENT_QUEUE, dropped());
    rt.spawn(queue.for_each_concurrent(EVENT_CONCURRENCY, move |(object, event)| {
        let recorder = recorder.clone();
        async move {
            if let Err(e) = recorder.publish(&event, &object).await {
                tracing::debug!(object = ?object.name, reason = %event.reason, error = %e, "event not recorded");
            }
        }
    }));
    tx
}

/// A queue of at most `capacity` items behind a sender that never blocks: a relay task moves
/// each item sent into the bounded queue at once, or drops it and counts it in `dropped` when the
/// queue is full. The decision thread sends without waiting, and what waits is bounded.
fn bounded<T: Send + 'static>(
    rt: &Handle,
    capacity: usize,
    dropped: prometheus_client::metrics::counter::Counter,
) -> (UnboundedSender<T>, Receiver<T>) {
    let (tx, mut incoming) = futures::channel::mpsc::unbounded::<T>();
    // a futures channel holds its buffer plus one slot per sender
    let (mut queue, out) = futures::channel::mpsc::channel::<T>(capacity.saturating_sub(1));
    rt.spawn(async move {
        while let Some(item) = incoming.next().await {
            if queue.try_send(item).is_err() {
                dropped.inc();
            }
        }
    });
    (tx, out)
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
    fn a_queue_nobody_drains_holds_its_capacity_and_counts_the_rest() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let dropped = prometheus_client::metrics::counter::Counter::default();
        let (tx, mut out) = bounded::<usize>(rt.handle(), 100, dropped.clone());
        for i in 0..10_000 {
            tx.unbounded_send(i).unwrap();
        }
        rt.block_on(async {
            while dropped.get() < 9_900 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert_eq!(dropped.get(), 9_900);
        let mut kept = Vec::new();
        while let Ok(i) = out.try_recv() {
            kept.push(i);
        }
        assert_eq!(
            kept,
            (0..100).collect::<Vec<_>>(),
            "the first ones, in order"
        );
        // once drained, the queue takes Events again
        tx.unbounded_send(7).unwrap();
        let next = rt.block_on(out.next());
        assert_eq!(next, Some(7));
    }

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
