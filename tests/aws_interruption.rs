//! The interruption queue consumer against moto's SQS: EventBridge events (the fixtures under
//! fixtures/aws/events/) and a garbled body are sent to a queue, received and parsed through
//! `cloud::aws::interruption`, mapped to their actions, deleted, and the queue is left empty.

#[path = "support/moto.rs"]
mod moto;

use std::collections::BTreeMap;

use joiner::cloud::aws::interruption::{
    self, EventKind, Ignored, InterruptionAction, InterruptionEvent, Stopping,
};
use joiner::cloud::aws::AwsClients;
use moto::Moto;

const REGION: &str = "us-west-2";
const QUEUE: &str = "joiner-interruption";

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/aws/events/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn send(clients: &AwsClients, url: &str, body: &str) {
    clients
        .sqs
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .expect("SendMessage");
}

/// Receives until `want` messages arrived; moto answers a long poll at once while messages wait.
async fn receive_all(clients: &AwsClients, url: &str, want: usize) -> Vec<interruption::Received> {
    let mut got = Vec::new();
    for _ in 0..10 {
        if got.len() >= want {
            break;
        }
        got.extend(
            interruption::receive(clients, url)
                .await
                .expect("ReceiveMessage"),
        );
    }
    got
}

#[tokio::test]
async fn each_event_kind_is_received_parsed_acted_on_and_deleted() {
    let moto = Moto::start();
    let clients = moto.clients(REGION, "test");
    clients
        .sqs
        .create_queue()
        .queue_name(QUEUE)
        .send()
        .await
        .expect("CreateQueue");
    let url = interruption::queue_url(&clients, QUEUE)
        .await
        .expect("GetQueueUrl");
    assert!(url.contains(QUEUE), "{url}");

    for name in [
        "spot-interruption.json",
        "rebalance-recommendation.json",
        "state-change-terminated.json",
        "scheduled-change.json",
    ] {
        send(&clients, &url, &fixture(name)).await;
    }
    send(
        &clients,
        &url,
        "{\"version\": \"0\", \"detail-type\": truncated",
    )
    .await;

    let received = receive_all(&clients, &url, 5).await;
    assert_eq!(received.len(), 5, "{received:?}");
    let (events, ignored): (Vec<_>, Vec<_>) = received
        .iter()
        .map(|(_, r)| r.clone())
        .partition(Result::is_ok);
    let by_kind: BTreeMap<&str, InterruptionEvent> = events
        .into_iter()
        .map(Result::unwrap)
        .map(|e| (e.kind.as_str(), e))
        .collect();
    let check = |label: &str, kind: EventKind, ids: &[&str], action: InterruptionAction| {
        let e = by_kind
            .get(label)
            .unwrap_or_else(|| panic!("no {label} event in {by_kind:?}"));
        assert_eq!(
            (
                e.kind,
                e.instance_ids
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                e.action()
            ),
            (kind, ids.to_vec(), action),
            "{label}"
        );
    };
    check(
        "spot_interrupted",
        EventKind::SpotInterruption,
        &["i-0a1b2c3d4e5f60001"],
        InterruptionAction::CordonAndDrainMarkUnavailable,
    );
    check(
        "rebalance_recommendation",
        EventKind::RebalanceRecommendation,
        &["i-0a1b2c3d4e5f60002"],
        InterruptionAction::NoAction,
    );
    check(
        "instance_terminated",
        EventKind::StateChange(Stopping::Terminated),
        &["i-0a1b2c3d4e5f60003"],
        InterruptionAction::CordonAndDrain,
    );
    check(
        "scheduled_change",
        EventKind::ScheduledChange,
        &["i-0a1b2c3d4e5f60006", "i-0a1b2c3d4e5f60007"],
        InterruptionAction::CordonAndDrain,
    );
    assert_eq!(by_kind.len(), 4);
    match ignored.as_slice() {
        [Err(e @ Ignored::NotJson(_))] => assert!(e.is_garbled()),
        other => panic!("expected one garbled message, got {other:?}"),
    }

    // handled and garbled messages alike are deleted
    for (receipt, _) in &received {
        interruption::delete(&clients, &url, receipt)
            .await
            .expect("DeleteMessage");
    }
    assert_eq!(
        interruption::approximate_depth(&clients, &url)
            .await
            .expect("GetQueueAttributes"),
        0
    );
    assert!(interruption::receive_waiting(&clients, &url, 0)
        .await
        .expect("ReceiveMessage")
        .is_empty());
}

#[tokio::test]
async fn a_missing_queue_is_an_error_and_a_url_is_taken_as_it_is() {
    let moto = Moto::start();
    let clients = moto.clients(REGION, "test");
    let err = interruption::queue_url(&clients, "no-such-queue")
        .await
        .expect_err("the queue does not exist");
    assert!(err.to_string().contains("sqs:GetQueueUrl"), "{err}");
    let url = format!("{}/123456789012/given", moto.endpoint);
    assert_eq!(
        interruption::queue_url(&clients, &url).await,
        Ok(url.clone())
    );
}
