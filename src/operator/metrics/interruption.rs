//! Karpenter's interruption-queue series: messages received by type, messages deleted, and how
//! long a message waited between the event and its handling. The queue reader in
//! [`crate::operator::aws`] counts into them as it reads, records and deletes messages.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MessageLabels {
    /// Karpenter's message types (`spot_interrupted`, `rebalance_recommendation`,
    /// `scheduled_change`, `instance_stopped`, `instance_terminated`), `noop` for a message joiner
    /// does not act on.
    pub message_type: &'static str,
}

pub struct Interruption {
    pub received: Family<MessageLabels, Counter>,
    pub deleted: Counter,
    pub queue_duration: Histogram,
}

impl Interruption {
    /// The families, registered in `r` (the `karpenter` prefix).
    pub fn register(r: &mut Registry) -> Interruption {
        let i = Interruption {
            received: Family::default(),
            deleted: Counter::default(),
            // a message is handled within seconds of its event, or after its visibility timeout
            // when a first try failed: 0.1 s to about 7 minutes
            queue_duration: Histogram::new(exponential_buckets(0.1, 2.0, 13)),
        };
        r.register(
            "interruption_received_messages",
            "Count of messages received from the interruption queue, by message type",
            i.received.clone(),
        );
        r.register(
            "interruption_deleted_messages",
            "Count of messages deleted from the interruption queue",
            i.deleted.clone(),
        );
        r.register(
            "interruption_message_queue_duration_seconds",
            "Time between an interruption event and its message's handling, in seconds",
            i.queue_duration.clone(),
        );
        i
    }

    /// One message read off the queue: its type, and when its event happened (None when the
    /// message carried no readable time, or was not an event at all).
    pub fn received(
        &self,
        message_type: &'static str,
        event_time: Option<chrono::DateTime<chrono::Utc>>,
    ) {
        self.received
            .get_or_create(&MessageLabels { message_type })
            .inc();
        if let Some(t) = event_time {
            // a clock behind the event's is no negative wait
            let waited = (chrono::Utc::now() - t).num_milliseconds().max(0) as f64 / 1000.0;
            self.queue_duration.observe(waited);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_by_type_and_their_wait_observed() {
        let mut r = Registry::with_prefix("karpenter");
        let i = Interruption::register(&mut r);
        let ten_s_ago = chrono::Utc::now() - chrono::Duration::seconds(10);
        i.received("spot_interrupted", Some(ten_s_ago));
        i.received("noop", None);
        i.deleted.inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).expect("encode");
        let line = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|v| v.trim().to_string())
        };
        let received = "karpenter_interruption_received_messages_total{message_type=";
        let wait = "karpenter_interruption_message_queue_duration_seconds";
        // one observation, about ten seconds: in the 6.4-12.8 s bucket, not the one below
        for (series, want) in [
            (format!("{received}\"spot_interrupted\"}}"), "1"),
            (format!("{received}\"noop\"}}"), "1"),
            ("karpenter_interruption_deleted_messages_total".into(), "1"),
            (format!("{wait}_count"), "1"),
            (format!("{wait}_bucket{{le=\"6.4\"}}"), "0"),
            (format!("{wait}_bucket{{le=\"12.8\"}}"), "1"),
        ] {
            assert_eq!(line(&series).as_deref(), Some(want), "{series}\n{text}");
        }
    }
}
