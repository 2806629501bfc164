//! Kubernetes Events joiner publishes, and how many. A decision step queues Events on a channel;
//! a publisher task sends them through kube's recorder a few at a time, so the decision thread
//! never waits for them. Pod Events are thinned the way Karpenter thins them: `Nominated` under
//! one rate limit across all pods, `FailedScheduling` once per pod and message in five minutes.
//! A large scale-up otherwise sent an Event per pod per pass. The queue is bounded: Events the
//! publisher cannot keep up with are dropped and counted ([`dropped`]), never held without limit.
//!
//! The controller's [`Notice`]s become Karpenter's Events here ([`notice_event`]) on the objects
//! Karpenter puts them on ([`notice_objects`]), each sent once a window ([`Notices`]), as
//! Karpenter's recorder dedupes them.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures::channel::mpsc::{Receiver, UnboundedSender};
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use tokio::runtime::Handle;

use super::caches::Caches;
use super::claims;
use crate::controller::report::{Notice, ObjectKind};

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

/// How long a Notice's Event stands before the same one is sent again: Karpenter's default dedupe
/// timeout. A disruption pass finds the same blocked nodes every few seconds.
pub const NOTICE_REPEAT: Duration = Duration::from_secs(120);
/// ...and Karpenter's for `Unconsolidatable`, which every pass repeats for most nodes.
pub const UNCONSOLIDATABLE_REPEAT: Duration = Duration::from_secs(900);

/// The Notices' Events sent lately, so that a repeat within its window is skipped.
#[derive(Debug)]
pub struct Notices {
    regular: Dedupe,
    unconsolidatable: Dedupe,
}

impl Notices {
    pub fn new(now: Instant) -> Notices {
        Notices {
            regular: Dedupe::new(NOTICE_REPEAT, now),
            unconsolidatable: Dedupe::new(UNCONSOLIDATABLE_REPEAT, now),
        }
    }

    /// Whether `notice`'s Event on `object` (kind/name) should go out at `now`.
    pub fn admit(&mut self, object: &str, notice: &Notice, now: Instant) -> bool {
        let key = format!("{}: {}", notice.reason(), notice.dedupe_key());
        match notice {
            Notice::Unconsolidatable { .. } => self.unconsolidatable.admit(object, &key, now),
            _ => self.regular.admit(object, &key, now),
        }
    }
}

/// The Event Karpenter publishes for `notice`.
pub fn notice_event(notice: &Notice) -> Event {
    let action = match notice {
        Notice::InsufficientCapacity { .. } | Notice::NoCompatibleInstanceTypes { .. } => {
            "Provisioning"
        }
        Notice::FailedDraining { .. } => "Drain",
        _ => "Disrupt",
    };
    Event {
        type_: match notice.is_warning() {
            true => EventType::Warning,
            false => EventType::Normal,
        },
        reason: notice.reason().into(),
        note: Some(notice.message()),
        action: action.into(),
        secondary: None,
    }
}

/// The objects `notice`'s Event goes on, from the caches; a NodeClaim not in them yet (created
/// this step) is named without its uid.
pub fn notice_objects(caches: &Caches, notice: &Notice) -> Vec<ObjectReference> {
    let (kind, name) = notice.object();
    let node = || {
        caches
            .nodes
            .get(&ObjectRef::new(name))
            .map(|n| n.object_ref())
    };
    let claim = |name: &str| {
        let found = caches
            .node_claims()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(name));
        karpenter_ref("NodeClaim", name, found.as_deref())
    };
    match kind {
        ObjectKind::Node => node().into_iter().collect(),
        ObjectKind::NodeClaim => vec![claim(name)],
        ObjectKind::NodeAndClaim => {
            let of_node = caches
                .node_claims()
                .into_iter()
                .find(|c| claims::node_name_of(c) == Some(name));
            let claim = of_node.map(|c| karpenter_ref("NodeClaim", name, Some(&*c)));
            node().into_iter().chain(claim).collect()
        }
        ObjectKind::NodePool => {
            let pool = caches
                .nodepools
                .state()
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(name));
            vec![karpenter_ref("NodePool", name, pool.as_deref())]
        }
    }
}

/// A reference to a `karpenter.sh/v1` object, with its uid when it is known.
fn karpenter_ref(
    kind: &str,
    name: &str,
    object: Option<&kube::api::DynamicObject>,
) -> ObjectReference {
    let meta = object.map(|o| &o.metadata);
    ObjectReference {
        api_version: Some("karpenter.sh/v1".into()),
        kind: Some(kind.into()),
        name: Some(
            meta.and_then(|m| m.name.clone())
                .unwrap_or_else(|| name.into()),
        ),
        uid: meta.and_then(|m| m.uid.clone()),
        resource_version: meta.and_then(|m| m.resource_version.clone()),
        ..Default::default()
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
    fn a_notice_is_sent_once_a_window_and_unconsolidatable_once_in_fifteen_minutes() {
        let t0 = Instant::now();
        let mut n = Notices::new(t0);
        let blocked = Notice::DisruptionBlocked {
            node: "n1".into(),
            why: "pdb shop/web allows no disruption".into(),
        };
        let unconsolidatable = Notice::Unconsolidatable {
            node: "n1".into(),
            why: "saves too little".into(),
        };
        assert!(n.admit("Node/n1", &blocked, t0));
        assert!(n.admit("Node/n1", &unconsolidatable, t0), "another reason");
        assert!(n.admit("NodeClaim/c1", &blocked, t0), "another object");
        let later = t0 + NOTICE_REPEAT;
        assert!(!n.admit("Node/n1", &blocked, later - Duration::from_secs(1)));
        assert!(n.admit("Node/n1", &blocked, later));
        assert!(!n.admit("Node/n1", &unconsolidatable, later));
        assert!(n.admit("Node/n1", &unconsolidatable, t0 + UNCONSOLIDATABLE_REPEAT));
        let event = notice_event(&Notice::FailedDraining {
            node: "n1".into(),
            error: "eviction refused".into(),
        });
        assert_eq!(
            (event.type_, event.reason.as_str()),
            (EventType::Warning, "FailedDraining")
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
