//! The interruption queue: EventBridge rules forward EC2 spot interruption warnings, rebalance
//! recommendations, instance state changes and AWS Health scheduled changes to an SQS queue
//! (Karpenter's `INTERRUPTION_QUEUE`), and joiner reads them from there.
//!
//! Data flow: [`queue_url`] resolves the queue name once (GetQueueUrl). Each poll, [`receive`]
//! long-polls up to 10 messages and runs the pure [`parse`] on every body, giving either an
//! [`InterruptionEvent`] (kind, instance ids, time) or an [`Ignored`] saying why the message needs
//! nothing. The caller maps each event to an [`InterruptionAction`] with
//! [`InterruptionEvent::action`], applies it to the nodes of those instances, then [`delete`]s the
//! message. Garbled messages are deleted too (counted, never retried: a body that does not parse
//! now never will); a message whose handling failed is left in the queue and comes back after the
//! visibility timeout.

use aws_sdk_sqs::types::QueueAttributeName;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{AwsClients, AwsError};
use crate::catalog::CapacityType;
use crate::cloud::OfferingKey;

/// SQS's maximum batch, as Karpenter asks for.
pub const MAX_MESSAGES: i32 = 10;
/// SQS's longest long poll: an empty queue costs one request per 20 s.
pub const WAIT_SECONDS: i32 = 20;
/// How long a received message stays hidden from other receivers while it is handled; one not
/// deleted by then (its handling failed) is delivered again.
pub const VISIBILITY_SECONDS: i32 = 20;

/// What happened to the instances an event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// EC2 reclaims a spot instance in about two minutes.
    SpotInterruption,
    /// A spot instance is at elevated risk of interruption.
    RebalanceRecommendation,
    /// An instance is stopping or terminating (by a user, EC2, or a spot interruption).
    StateChange(Stopping),
    /// AWS Health announced maintenance or retirement of the instances.
    ScheduledChange,
}

/// The instance states of a state-change event that take the instance away; `pending` and
/// `running` need nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stopping {
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
}

impl EventKind {
    /// A metric label, with Karpenter's names.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SpotInterruption => "spot_interrupted",
            EventKind::RebalanceRecommendation => "rebalance_recommendation",
            EventKind::StateChange(Stopping::Stopping | Stopping::Stopped) => "instance_stopped",
            EventKind::StateChange(_) => "instance_terminated",
            EventKind::ScheduledChange => "scheduled_change",
        }
    }
}

/// One event the queue delivered that joiner acts on (or records).
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptionEvent {
    pub kind: EventKind,
    /// The EC2 instances concerned; never empty.
    pub instance_ids: Vec<String>,
    /// When EventBridge saw the event (for the message-latency metric); None when the field is
    /// missing or unreadable, which is no reason to drop a two-minute warning.
    pub event_time: Option<DateTime<Utc>>,
    /// The EventBridge event id.
    pub id: String,
}

/// What to do about an event, as Karpenter's interruption controller does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptionAction {
    /// Cordon and drain the nodes (delete their NodeClaims gracefully) and mark each instance's
    /// (type, zone, spot) offering unavailable, so replacements avoid the pool being reclaimed.
    CordonAndDrainMarkUnavailable,
    /// Cordon and drain the nodes; the replacement is planned as for any disrupted node.
    CordonAndDrain,
    /// Only recorded (event and metric): a rebalance recommendation is advice, not a deadline.
    NoAction,
}

impl InterruptionEvent {
    pub fn action(&self) -> InterruptionAction {
        match self.kind {
            EventKind::SpotInterruption => InterruptionAction::CordonAndDrainMarkUnavailable,
            EventKind::StateChange(_) | EventKind::ScheduledChange => {
                InterruptionAction::CordonAndDrain
            }
            EventKind::RebalanceRecommendation => InterruptionAction::NoAction,
        }
    }
}

impl InterruptionAction {
    pub fn drains(self) -> bool {
        !matches!(self, InterruptionAction::NoAction)
    }

    /// The offering to mark unavailable for an interrupted node of `instance_type` in `zone`, if
    /// this action marks one. The event names only the instance: its type and zone come from the
    /// node (labels) or the instance (DescribeInstances).
    pub fn unavailable_offering(self, instance_type: &str, zone: &str) -> Option<OfferingKey> {
        (self == InterruptionAction::CordonAndDrainMarkUnavailable).then(|| OfferingKey {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: CapacityType::Spot,
        })
    }
}

/// Why a message needs no action. `Empty`, `NotJson` and `Malformed` are garbled messages; the
/// others are well-formed events joiner does not act on (a rule that forwards more than it needs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    #[error("empty message body")]
    Empty,
    #[error("body is not a JSON event: {0}")]
    NotJson(String),
    #[error("{detail_type} event: {why}")]
    Malformed { detail_type: String, why: String },
    // not named `source`: thiserror would take that field for the error's cause
    #[error(
        "event '{detail_type}' from '{event_source}' version '{version}' is not one joiner handles"
    )]
    Unhandled {
        event_source: String,
        detail_type: String,
        version: String,
    },
    #[error("state change to '{0}' needs no action")]
    State(String),
    #[error(
        "health event of service '{service}', category '{category}' is not an EC2 scheduled change"
    )]
    NotEc2ScheduledChange { service: String, category: String },
    #[error("{0} event names no EC2 instance")]
    NoInstance(String),
}

impl Ignored {
    /// A body that cannot be read as the event it claims to be.
    pub fn is_garbled(&self) -> bool {
        matches!(
            self,
            Ignored::Empty | Ignored::NotJson(_) | Ignored::Malformed { .. }
        )
    }

    /// A metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Ignored::Empty => "empty",
            Ignored::NotJson(_) => "not_json",
            Ignored::Malformed { .. } => "malformed",
            Ignored::Unhandled { .. } => "unhandled",
            Ignored::State(_) => "state",
            Ignored::NotEc2ScheduledChange { .. } => "not_ec2_scheduled_change",
            Ignored::NoInstance(_) => "no_instance",
        }
    }
}

const SPOT: &str = "EC2 Spot Instance Interruption Warning";
const REBALANCE: &str = "EC2 Instance Rebalance Recommendation";
const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
const HEALTH: &str = "AWS Health Event";

/// The envelope every EventBridge event shares. Fields default so a missing one is reported as
/// "not handled" or "malformed" by what follows rather than as a JSON error.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    version: String,
    #[serde(default)]
    id: String,
    #[serde(default, rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    detail: serde_json::Value,
}

#[derive(Deserialize)]
struct Ec2Detail {
    #[serde(default, rename = "instance-id")]
    instance_id: Option<String>,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
struct HealthDetail {
    #[serde(default)]
    service: String,
    #[serde(default, rename = "eventTypeCategory")]
    category: String,
    #[serde(default, rename = "affectedEntities")]
    affected: Vec<Entity>,
}

#[derive(Deserialize)]
struct Entity {
    #[serde(default, rename = "entityValue")]
    value: Option<String>,
}

/// Reads one SQS message body. Events are matched on (version, source, detail-type) as Karpenter
/// matches them; anything else is [`Ignored`], never a panic.
pub fn parse(body: &str) -> Result<InterruptionEvent, Ignored> {
    if body.trim().is_empty() {
        return Err(Ignored::Empty);
    }
    let env: Envelope = serde_json::from_str(body).map_err(|e| Ignored::NotJson(e.to_string()))?;
    let kind = match (
        env.version.as_str(),
        env.source.as_str(),
        env.detail_type.as_str(),
    ) {
        ("0", "aws.ec2", SPOT) => EventKind::SpotInterruption,
        ("0", "aws.ec2", REBALANCE) => EventKind::RebalanceRecommendation,
        ("0", "aws.ec2", STATE_CHANGE) => EventKind::StateChange(stopping_state(&env)?),
        ("0", "aws.health", HEALTH) => EventKind::ScheduledChange,
        _ => {
            return Err(Ignored::Unhandled {
                event_source: env.source,
                detail_type: env.detail_type,
                version: env.version,
            })
        }
    };
    let instance_ids = if kind == EventKind::ScheduledChange {
        health_instances(&env)?
    } else {
        vec![ec2_instance(&env)?]
    };
    // an unreadable time only loses the latency metric, so it does not reject the event
    let event_time = env
        .time
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    Ok(InterruptionEvent {
        kind,
        instance_ids,
        event_time,
        id: env.id,
    })
}

fn malformed(env: &Envelope, why: impl Into<String>) -> Ignored {
    Ignored::Malformed {
        detail_type: env.detail_type.clone(),
        why: why.into(),
    }
}

fn ec2_detail(env: &Envelope) -> Result<Ec2Detail, Ignored> {
    Ec2Detail::deserialize(&env.detail).map_err(|e| malformed(env, format!("detail: {e}")))
}

fn ec2_instance(env: &Envelope) -> Result<String, Ignored> {
    match ec2_detail(env)?.instance_id {
        Some(id) if looks_like_instance(&id) => Ok(id),
        Some(id) => Err(malformed(
            env,
            format!("detail.instance-id '{id}' is not an instance id"),
        )),
        None => Err(malformed(env, "no detail.instance-id")),
    }
}

fn stopping_state(env: &Envelope) -> Result<Stopping, Ignored> {
    let Some(state) = ec2_detail(env)?.state else {
        return Err(malformed(env, "no detail.state"));
    };
    match state.to_ascii_lowercase().as_str() {
        "stopping" => Ok(Stopping::Stopping),
        "stopped" => Ok(Stopping::Stopped),
        "shutting-down" => Ok(Stopping::ShuttingDown),
        "terminated" => Ok(Stopping::Terminated),
        _ => Err(Ignored::State(state)),
    }
}

/// The instances of an EC2 scheduled change. Other services and categories (issues, account
/// notifications) are ignored, as are affected entities that are not instances (a Health event may
/// name hosts or volumes).
fn health_instances(env: &Envelope) -> Result<Vec<String>, Ignored> {
    let d = HealthDetail::deserialize(&env.detail)
        .map_err(|e| malformed(env, format!("detail: {e}")))?;
    if d.service != "EC2" || d.category != "scheduledChange" {
        return Err(Ignored::NotEc2ScheduledChange {
            service: d.service,
            category: d.category,
        });
    }
    let ids: Vec<String> = d
        .affected
        .into_iter()
        .filter_map(|e| e.value)
        .filter(|v| looks_like_instance(v))
        .collect();
    if ids.is_empty() {
        return Err(Ignored::NoInstance(env.detail_type.clone()));
    }
    Ok(ids)
}

fn looks_like_instance(id: &str) -> bool {
    id.strip_prefix("i-")
        .is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The URL of the queue named `name`. A value that already is a URL is returned as it is, so the
/// setting accepts either form.
pub async fn queue_url(clients: &AwsClients, name: &str) -> Result<String, AwsError> {
    if name.starts_with("https://") || name.starts_with("http://") {
        return Ok(name.to_string());
    }
    let out = clients
        .sqs
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("sqs:GetQueueUrl", e))?;
    out.queue_url.ok_or(AwsError::Response {
        call: "sqs:GetQueueUrl",
        message: format!("has no URL for queue {name}"),
    })
}

/// One received message: its receipt handle (for [`delete`]) and what its body says.
pub type Received = (String, Result<InterruptionEvent, Ignored>);

/// Long-polls the queue (up to [`WAIT_SECONDS`]) for up to [`MAX_MESSAGES`] messages and parses
/// them. An empty result is normal (the poll timed out).
pub async fn receive(clients: &AwsClients, queue_url: &str) -> Result<Vec<Received>, AwsError> {
    receive_waiting(clients, queue_url, WAIT_SECONDS).await
}

/// [`receive`] with a chosen long-poll time (0 returns at once).
pub async fn receive_waiting(
    clients: &AwsClients,
    queue_url: &str,
    wait_seconds: i32,
) -> Result<Vec<Received>, AwsError> {
    let wait = wait_seconds.clamp(0, WAIT_SECONDS);
    let out = clients
        .sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(MAX_MESSAGES)
        .visibility_timeout(VISIBILITY_SECONDS)
        .wait_time_seconds(wait)
        .customize()
        .config_override(
            aws_sdk_sqs::config::Builder::default().timeout_config(poll_timeouts(wait)),
        )
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("sqs:ReceiveMessage", e))?;
    // a message without a receipt handle could never be deleted; SQS always sends one
    Ok(out
        .messages
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| Some((m.receipt_handle?, parse(m.body.as_deref().unwrap_or("")))))
        .collect())
}

/// The clients' 20 s attempt timeout would cut a 20 s long poll; the poll gets its wait plus slack.
fn poll_timeouts(wait_seconds: i32) -> aws_sdk_sqs::config::timeout::TimeoutConfig {
    let attempt = std::time::Duration::from_secs(wait_seconds.unsigned_abs() as u64 + 10);
    aws_sdk_sqs::config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(attempt)
        .operation_timeout(attempt * 3)
        .build()
}

/// Deletes a handled message.
pub async fn delete(
    clients: &AwsClients,
    queue_url: &str,
    receipt_handle: &str,
) -> Result<(), AwsError> {
    clients
        .sqs
        .delete_message()
        .queue_url(queue_url)
        .receipt_handle(receipt_handle)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("sqs:DeleteMessage", e))?;
    Ok(())
}

/// Messages waiting plus messages received and not yet deleted (SQS's approximate counts), for
/// tests and diagnostics.
pub async fn approximate_depth(clients: &AwsClients, queue_url: &str) -> Result<u64, AwsError> {
    let out = clients
        .sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("sqs:GetQueueAttributes", e))?;
    let attrs = out.attributes.unwrap_or_default();
    let count = |k: QueueAttributeName| {
        attrs
            .get(&k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(count(QueueAttributeName::ApproximateNumberOfMessages)
        + count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/fixtures/aws/events/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn event(name: &str) -> InterruptionEvent {
        parse(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[test]
    fn a_spot_interruption_drains_and_marks_the_spot_offering() {
        let e = event("spot-interruption.json");
        assert_eq!(
            (e.kind, e.instance_ids.as_slice()),
            (
                EventKind::SpotInterruption,
                &["i-0a1b2c3d4e5f60001".to_string()][..]
            )
        );
        assert_eq!(e.id, "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f");
        assert_eq!(
            e.event_time.map(|t| t.to_rfc3339()),
            Some("2026-11-30T10:15:00+00:00".into())
        );
        assert_eq!(
            e.action(),
            InterruptionAction::CordonAndDrainMarkUnavailable
        );
        let key = e.action().unavailable_offering("m5.large", "us-west-2a");
        assert_eq!(
            key,
            Some(OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-west-2a".into(),
                capacity_type: CapacityType::Spot
            })
        );
    }

    #[test]
    fn a_rebalance_recommendation_is_only_recorded() {
        let e = event("rebalance-recommendation.json");
        assert_eq!(
            (e.kind, e.instance_ids.as_slice()),
            (
                EventKind::RebalanceRecommendation,
                &["i-0a1b2c3d4e5f60002".to_string()][..]
            )
        );
        assert_eq!(e.action(), InterruptionAction::NoAction);
        assert!(!e.action().drains());
        assert_eq!(
            e.action().unavailable_offering("m5.large", "us-west-2a"),
            None
        );
    }

    #[test]
    fn stopping_and_terminating_state_changes_drain_without_marking() {
        let t = event("state-change-terminated.json");
        assert_eq!(
            (t.kind, t.instance_ids.as_slice()),
            (
                EventKind::StateChange(Stopping::Terminated),
                &["i-0a1b2c3d4e5f60003".to_string()][..]
            )
        );
        assert_eq!(t.kind.as_str(), "instance_terminated");
        let s = event("state-change-stopping.json");
        assert_eq!(
            (s.kind, s.kind.as_str()),
            (
                EventKind::StateChange(Stopping::Stopping),
                "instance_stopped"
            )
        );
        for e in [t, s] {
            assert_eq!(e.action(), InterruptionAction::CordonAndDrain);
            assert_eq!(
                e.action().unavailable_offering("m5.large", "us-west-2a"),
                None
            );
        }
    }

    #[test]
    fn a_state_change_to_running_is_ignored() {
        assert_eq!(
            parse(&fixture("state-change-running.json")),
            Err(Ignored::State("running".into()))
        );
    }

    #[test]
    fn every_accepted_state_is_read_case_insensitively() {
        let body = fixture("state-change-terminated.json");
        for (state, want) in [
            ("stopping", Stopping::Stopping),
            ("Stopped", Stopping::Stopped),
            ("SHUTTING-DOWN", Stopping::ShuttingDown),
            ("terminated", Stopping::Terminated),
        ] {
            let e = parse(&body.replace("\"terminated\"", &format!("\"{state}\""))).map(|e| e.kind);
            assert_eq!(e, Ok(EventKind::StateChange(want)), "{state}");
        }
    }

    #[test]
    fn an_ec2_scheduled_change_names_every_affected_instance() {
        let e = event("scheduled-change.json");
        assert_eq!(e.kind, EventKind::ScheduledChange);
        assert_eq!(
            e.instance_ids,
            vec![
                "i-0a1b2c3d4e5f60006".to_string(),
                "i-0a1b2c3d4e5f60007".to_string()
            ]
        );
        assert_eq!(e.action(), InterruptionAction::CordonAndDrain);
    }

    #[test]
    fn health_events_of_other_services_or_categories_are_ignored() {
        let rds = parse(&fixture("health-issue-rds.json"));
        assert_eq!(
            rds,
            Err(Ignored::NotEc2ScheduledChange {
                service: "RDS".into(),
                category: "issue".into()
            })
        );
        let issue = fixture("scheduled-change.json").replace("\"scheduledChange\"", "\"issue\"");
        assert!(matches!(
            parse(&issue),
            Err(Ignored::NotEc2ScheduledChange { .. })
        ));
        assert!(!rds.unwrap_err().is_garbled());
    }

    #[test]
    fn a_scheduled_change_without_instances_is_ignored() {
        let body = fixture("scheduled-change.json")
            .replace("i-0a1b2c3d4e5f60006", "vol-0123")
            .replace("i-0a1b2c3d4e5f60007", "UNKNOWN");
        assert_eq!(parse(&body), Err(Ignored::NoInstance(HEALTH.into())));
    }

    #[test]
    fn unknown_events_and_versions_are_unhandled_not_garbled() {
        let cr = fixture("spot-interruption.json").replace(
            SPOT,
            "EC2 Capacity Reservation Instance Interruption Warning",
        );
        let err = parse(&cr).unwrap_err();
        assert!(
            matches!(err, Ignored::Unhandled { .. }) && !err.is_garbled(),
            "{err}"
        );
        let v1 =
            fixture("spot-interruption.json").replace("\"version\": \"0\"", "\"version\": \"1\"");
        assert!(matches!(parse(&v1), Err(Ignored::Unhandled { version, .. }) if version == "1"));
        let other_source =
            fixture("spot-interruption.json").replace("\"aws.ec2\"", "\"custom.app\"");
        assert!(matches!(
            parse(&other_source),
            Err(Ignored::Unhandled { .. })
        ));
    }

    #[test]
    fn garbled_bodies_are_reported_not_panicked_on() {
        let spot = fixture("spot-interruption.json");
        let cases = [
            String::new(),
            "   ".into(),
            "not json".into(),
            "[1, 2]".into(),
            "{\"version\": 0}".into(),
            spot[..spot.len() / 2].to_string(),
            spot.replace("\"instance-id\": \"i-0a1b2c3d4e5f60001\",", ""),
            spot.replace(
                "\"i-0a1b2c3d4e5f60001\",\n    \"instance-action\"",
                "42,\n    \"instance-action\"",
            ),
            spot.replace(
                "\"instance-id\": \"i-0a1b2c3d4e5f60001\"",
                "\"instance-id\": \"\"",
            ),
            fixture("state-change-stopping.json")
                .replace("\"state\": \"stopping\"", "\"state\": null"),
            fixture("scheduled-change.json")
                .replace("\"affectedEntities\": [", "\"affectedEntities\": {\"x\": [")
                .replace("\"affectedAccount\"", "\"y\": 1}, \"affectedAccount\""),
            spot.replace("\"detail\": {", "\"detail\": [{")
                .replace("}\n}", "}]\n}"),
        ];
        for body in &cases {
            let err = parse(body).expect_err(body);
            assert!(err.is_garbled(), "{body:?} gave {err:?}");
        }
    }

    #[test]
    fn an_unreadable_time_keeps_the_event() {
        let body = fixture("spot-interruption.json").replace("2026-11-30T10:15:00Z", "yesterday");
        let e = parse(&body).expect("still an interruption");
        assert_eq!((e.kind, e.event_time), (EventKind::SpotInterruption, None));
    }

    #[test]
    fn only_instance_ids_look_like_instances() {
        assert!(looks_like_instance("i-0a1b2c3d4e5f60001"));
        assert!(!looks_like_instance("i-"));
        assert!(!looks_like_instance("vol-0a1b"));
        assert!(!looks_like_instance("i-0a/../x"));
    }

    #[test]
    fn labels_follow_karpenter() {
        assert_eq!(EventKind::SpotInterruption.as_str(), "spot_interrupted");
        assert_eq!(EventKind::ScheduledChange.as_str(), "scheduled_change");
        assert_eq!(Ignored::Empty.reason(), "empty");
    }
}
