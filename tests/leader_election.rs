//! Two `joiner controller` replicas against the in-process API server, with faults injected into
//! their leader election: a renewal that hangs, a leader cut off from the server, a holder whose
//! clock is 30 s off either way, a first list slower than the lease, a step longer than the renew
//! deadline, a decision loop that hangs, and a randomized run of leader changes.
//!
//! The invariant every test checks is over the writes the server saw: each replica sends a write
//! (anything but its Lease) only while the Lease names it holder. A holder's term runs from the
//! arrival of the Lease write that made it holder (the server commits a write after it arrives,
//! and a replica acts only once its write is answered) to the arrival of the next holder's.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::Client;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use apiserver::{ApiServer, Injected, RequestMatch, RequestRecord};
use joinerproc::{http_get, tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, Census, Deployment, KubeSim};

const NS: &str = "default";
const LEASE: &str = "joiner-leader-election";

async fn install_nodepool(client: &Client) {
    joinerproc::install_nodepool(
        client,
        json!({"requirements": joinerproc::general_purpose(true)}),
        json!({}),
    )
    .await;
}

async fn cluster(name: &str) -> (ApiServer, Client, tempdir::Dir, Holders) {
    let server = ApiServer::start().await;
    let client = server.client();
    let ns = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}}),
    )
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    install_nodepool(&client).await;
    let holders = Holders::watch(&server);
    (server, client, tempdir::Dir::new(name), holders)
}

fn web(replicas: usize) -> Deployment {
    Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas,
        cpu: "1".into(),
        memory: "1Gi".into(),
    }
}

async fn settled(client: &Client, pods: usize) -> Result<Census, Census> {
    eventually(
        Duration::from_secs(60),
        || async { census(client, NS).await.expect("census") },
        |c| {
            c.pods_running == pods
                && c.pods_pending == 0
                && c.claims_without_node == 0
                && c.claims == c.nodes
        },
    )
    .await
}

/// Lease holders, each with when it was seen (`None`: the Lease was released).
type Timeline = Vec<(Instant, Option<String>)>;

/// The Lease's holders in the order the server committed them, with when the test saw each.
struct Holders {
    seen: Arc<Mutex<Timeline>>,
    lagged: Arc<AtomicBool>,
}

impl Holders {
    fn watch(server: &ApiServer) -> Holders {
        let mut changes = server.subscribe();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let lagged = Arc::new(AtomicBool::new(false));
        let (s, l) = (seen.clone(), lagged.clone());
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(c)
                        if c.resource.plural == "leases"
                            && c.object["metadata"]["name"] == LEASE =>
                    {
                        let holder = c.object["spec"]["holderIdentity"]
                            .as_str()
                            .filter(|h| !h.is_empty())
                            .map(String::from);
                        let mut s = s.lock().unwrap();
                        if s.last().map(|(_, h): &(Instant, Option<String>)| h) != Some(&holder) {
                            s.push((Instant::now(), holder));
                        }
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => l.store(true, Ordering::SeqCst),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Holders { seen, lagged }
    }

    fn current(&self) -> Option<String> {
        self.seen
            .lock()
            .unwrap()
            .last()
            .and_then(|(_, h)| h.clone())
    }

    fn all(&self) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// Waits until `who` holds the Lease; how long that took.
    async fn wait_for(&self, who: &str, timeout: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if self.current().as_deref() == Some(who) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Each holder's term: from the arrival of the Lease write that made it holder.
    fn terms(&self, requests: &[(Instant, RequestRecord)]) -> Timeline {
        let seen = self.seen.lock().unwrap().clone();
        let mut terms: Timeline = Vec::new();
        for (at, holder) in seen {
            // a release is written by the holder it ends
            let writer = holder
                .clone()
                .or_else(|| terms.last().and_then(|(_, h)| h.clone()));
            let start = requests
                .iter()
                .filter(|(t, r)| *t <= at && is_lease_write(r) && r.user == writer)
                .map(|(t, _)| *t)
                .next_back()
                .unwrap_or(at);
            terms.push((start, holder));
        }
        terms
    }

    /// Writes of `replicas` sent while another replica, or none, held the Lease; and how many
    /// writes were checked.
    fn overlapping_writes(&self, server: &ApiServer, replicas: &[&str]) -> (usize, Vec<String>) {
        assert!(!self.lagged.load(Ordering::SeqCst), "lease changes missed");
        let requests = server.timed_requests();
        let terms = self.terms(&requests);
        let origin = terms.first().map(|(t, _)| *t).unwrap_or_else(Instant::now);
        let mut checked = 0;
        let mut overlapping = Vec::new();
        for (at, r) in &requests {
            let Some(user) = r.user.as_deref().filter(|u| replicas.contains(u)) else {
                continue;
            };
            if !is_write(r) || is_lease_write(r) {
                continue;
            }
            checked += 1;
            let holder = terms
                .iter()
                .rev()
                .find(|(start, _)| start <= at)
                .and_then(|(_, h)| h.as_deref());
            if holder != Some(user) {
                overlapping.push(format!(
                    "{} {} {:?} by {user} at +{:?} while {holder:?} held the lease",
                    r.verb,
                    r.resource,
                    r.name,
                    at.saturating_duration_since(origin),
                ));
            }
        }
        (checked, overlapping)
    }
}

fn is_write(r: &RequestRecord) -> bool {
    matches!(
        r.verb.as_str(),
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

fn is_lease_write(r: &RequestRecord) -> bool {
    is_write(r) && r.resource.starts_with("leases")
}

fn writes_by(server: &ApiServer, who: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.user.as_deref() == Some(who) && is_write(r) && !is_lease_write(r))
        .count()
}

/// Asserts the invariant and that it was tested on some writes.
fn assert_no_overlap(server: &ApiServer, holders: &Holders, replicas: &[&str]) -> usize {
    let (checked, overlapping) = holders.overlapping_writes(server, replicas);
    assert!(
        overlapping.is_empty(),
        "{} of {checked} writes sent outside the sender's leadership (holders {:?}):\n{}",
        overlapping.len(),
        holders.all(),
        overlapping.join("\n")
    );
    assert!(checked > 0, "no writes to check");
    checked
}

/// Waits until the process has ended; whether it did in time.
async fn exits(j: &mut Joiner, timeout: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if j.exited() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn health_port(j: &Joiner) -> Option<u16> {
    j.log()
        .lines()
        .filter(|l| l.contains(" serving "))
        .find_map(|l| {
            l.split_once("health=127.0.0.1:")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
}

fn by(user: &str, method: &str, resource: &str) -> RequestMatch {
    RequestMatch::new(method, resource).by(user)
}

/// A leader and a standby, the leader's workload settled.
async fn two_replicas(
    server: &ApiServer,
    client: &Client,
    dir: &tempdir::Dir,
    holders: &Holders,
    extra: &[&str],
) -> (Joiner, Joiner, KubeSim) {
    let a = Joiner::start(server, dir, "joiner-a", extra);
    assert!(
        holders
            .wait_for("joiner-a", Duration::from_secs(20))
            .await
            .is_some(),
        "first replica never led\n{}",
        a.log()
    );
    let b = Joiner::start(server, dir, "joiner-b", extra);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(4));
    settled(client, 4)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", a.log()));
    (a, b, sim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_list_slower_than_the_lease_keeps_one_leader() {
    let (server, client, dir, holders) = cluster("slow-list").await;
    // the leader's first read of pods is answered after twice the lease duration
    server.inject_next(
        by("joiner-a", "GET", "pods"),
        1,
        Injected::Stall(Duration::from_secs(6)),
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(6));
    let a = Joiner::start(&server, &dir, "joiner-a", &[]);
    assert!(holders
        .wait_for("joiner-a", Duration::from_secs(20))
        .await
        .is_some());
    let b = Joiner::start(&server, &dir, "joiner-b", &[]);
    settled(&client, 6)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}\n{}", a.log(), b.log()));
    assert!(
        server.faults_pending().is_empty(),
        "the slow list never happened"
    );
    assert_eq!(
        holders.all(),
        vec![Some("joiner-a".to_string())],
        "{}",
        b.log()
    );
    assert_eq!(writes_by(&server, "joiner-b"), 0);
    let checked = assert_no_overlap(&server, &holders, &["joiner-a", "joiner-b"]);
    eprintln!("slow first list: one term, {checked} writes checked, 0 overlapping");
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_renewal_gives_the_lease_up_before_the_standby_takes_it() {
    let (server, client, dir, holders) = cluster("hung-renewal").await;
    let (mut a, b, sim) = two_replicas(&server, &client, &dir, &holders, &[]).await;
    // every renewal the leader sends from now on hangs unanswered
    server.hang_next(by("joiner-a", "PUT", "leases"), u32::MAX);
    let hung = Instant::now();
    let took = holders.wait_for("joiner-b", Duration::from_secs(30)).await;
    assert!(took.is_some(), "standby never took over\n{}", b.log());
    sim.scale(NS, "web", 10);
    assert!(
        exits(&mut a, Duration::from_secs(20)).await,
        "the deposed leader still runs\n{}",
        a.log()
    );
    let exited = hung.elapsed();
    settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("new leader did not provision: {c:?}\n{}", b.log()));
    assert!(writes_by(&server, "joiner-b") > 0);
    let checked = assert_no_overlap(&server, &holders, &["joiner-a", "joiner-b"]);
    eprintln!(
        "hung renewal: standby led {took:?} after, leader exited {exited:?} after, {checked} writes \
         checked, 0 overlapping"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_cut_off_from_the_api_server_is_replaced() {
    let (server, client, dir, holders) = cluster("cut-off").await;
    let (mut a, b, sim) = two_replicas(&server, &client, &dir, &holders, &[]).await;
    server.cut_off("joiner-a");
    let cut = Instant::now();
    let took = holders.wait_for("joiner-b", Duration::from_secs(30)).await;
    assert!(took.is_some(), "standby never took over\n{}", b.log());
    sim.scale(NS, "web", 10);
    assert!(
        exits(&mut a, Duration::from_secs(30)).await,
        "the cut-off leader still runs\n{}",
        a.log()
    );
    let exited = cut.elapsed();
    settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("new leader did not provision: {c:?}\n{}", b.log()));
    let checked = assert_no_overlap(&server, &holders, &["joiner-a", "joiner-b"]);
    eprintln!(
        "cut off: standby led {took:?} after, leader exited {exited:?} after, {checked} writes \
         checked, 0 overlapping"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_longer_than_the_renew_deadline_keeps_the_lease() {
    let (server, client, dir, holders) = cluster("long-step").await;
    let (a, b, sim) = two_replicas(&server, &client, &dir, &holders, &[]).await;
    // the leader's next NodeClaim create is answered after 5 s, over twice the renew deadline
    server.inject_next(
        by("joiner-a", "POST", "nodeclaims"),
        1,
        Injected::Stall(Duration::from_secs(5)),
    );
    sim.scale(NS, "web", 10);
    settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", a.log()));
    assert!(
        server.faults_pending().is_empty(),
        "the slow create never happened"
    );
    assert_eq!(
        holders.all(),
        vec![Some("joiner-a".to_string())],
        "{}",
        b.log()
    );
    assert_eq!(writes_by(&server, "joiner-b"), 0);
    let checked = assert_no_overlap(&server, &holders, &["joiner-a", "joiner-b"]);
    eprintln!("long step: one term, {checked} writes checked, 0 overlapping");
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_decision_loop_fails_healthz_and_hands_over() {
    let (server, client, dir, holders) = cluster("hung-loop").await;
    // no API timeout: a request never answered hangs the decision loop for good
    let (mut a, b, sim) =
        two_replicas(&server, &client, &dir, &holders, &["--api-timeout", "0s"]).await;
    let port = health_port(&a).expect("health port in the log");
    assert_eq!(http_get(port, "/healthz").await.unwrap(), "ok");
    server.hang_next(by("joiner-a", "POST", "nodeclaims"), 1);
    let hung = Instant::now();
    sim.scale(NS, "web", 10);
    let failed = eventually(
        Duration::from_secs(40),
        || async { http_get(port, "/healthz").await.unwrap_or_default() },
        |body| body.contains("no step"),
    )
    .await;
    assert!(failed.is_ok(), "healthz still ok: {failed:?}\n{}", a.log());
    let unhealthy = hung.elapsed();
    let took = holders.wait_for("joiner-b", Duration::from_secs(30)).await;
    assert!(took.is_some(), "standby never took over\n{}", a.log());
    settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("new leader did not provision: {c:?}\n{}", b.log()));
    assert!(
        exits(&mut a, Duration::from_secs(30)).await,
        "the hung leader still runs\n{}",
        a.log()
    );
    let checked = assert_no_overlap(&server, &holders, &["joiner-a", "joiner-b"]);
    eprintln!(
        "hung loop: healthz failed {unhealthy:?} after the hang, standby led {took:?} later, \
         {checked} writes checked, 0 overlapping"
    );
    sim.stop().await;
}

/// Plays a replica whose clock is `skew` off the others': it writes the Lease as holder `ghost`
/// with its own idea of the time, renewing every 500 ms until `stop`.
fn skewed_holder(client: &Client, skew: i64, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            let now = MicroTime(Timestamp::now() + SignedDuration::from_secs(skew));
            let spec = LeaseSpec {
                holder_identity: Some("ghost".into()),
                renew_time: Some(now.clone()),
                acquire_time: Some(now),
                lease_duration_seconds: Some(3),
                ..Default::default()
            };
            let mut lease = match leases.get_opt(LEASE).await.unwrap() {
                Some(l) => l,
                None => Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE.into()),
                        ..Default::default()
                    },
                    spec: None,
                },
            };
            let created = lease.metadata.resource_version.is_none();
            lease.spec = Some(spec);
            let written = if created {
                leases.create(&PostParams::default(), &lease).await
            } else {
                leases.replace(LEASE, &PostParams::default(), &lease).await
            };
            written.expect("ghost writes its lease");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_clock_is_30s_behind_keeps_the_lease_while_it_renews() {
    let (server, _client, dir, holders) = cluster("skew-behind").await;
    let stop = Arc::new(AtomicBool::new(false));
    let ghost = skewed_holder(&server.client(), -30, stop.clone());
    assert!(holders
        .wait_for("ghost", Duration::from_secs(5))
        .await
        .is_some());
    let a = Joiner::start(&server, &dir, "joiner-a", &[]);
    // three lease durations of renewals that look 30 s old to the contender's clock
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(holders.current().as_deref(), Some("ghost"), "{}", a.log());
    assert_eq!(writes_by(&server, "joiner-a"), 0);
    stop.store(true, Ordering::SeqCst);
    ghost.await.unwrap();
    let took = holders.wait_for("joiner-a", Duration::from_secs(15)).await;
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(6)),
        "took over after {took:?} (lease 3 s)\n{}",
        a.log()
    );
    eprintln!("holder 30 s behind: kept 9 s while renewing, replaced {took:?} after it stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_clock_is_30s_ahead_is_replaced_a_lease_after_it_stops() {
    let (server, _client, dir, holders) = cluster("skew-ahead").await;
    let stop = Arc::new(AtomicBool::new(false));
    let ghost = skewed_holder(&server.client(), 30, stop.clone());
    assert!(holders
        .wait_for("ghost", Duration::from_secs(5))
        .await
        .is_some());
    let a = Joiner::start(&server, &dir, "joiner-a", &[]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(holders.current().as_deref(), Some("ghost"), "{}", a.log());
    stop.store(true, Ordering::SeqCst);
    ghost.await.unwrap();
    // its last renewTime is 30 s in the future; the lease is over 3 s after it stopped changing
    let took = holders.wait_for("joiner-a", Duration::from_secs(40)).await;
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(6)),
        "took over after {took:?} (lease 3 s)\n{}",
        a.log()
    );
    eprintln!("holder 30 s ahead: replaced {took:?} after it stopped");
}

/// What ends a leader's term in the randomized run.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Killed,
    Terminated,
    HungRenewal,
    CutOff,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_changes_at_random_never_overlap() {
    let changes: usize = std::env::var("LEADER_CHANGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("LEADER_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| Timestamp::now().as_second() as u64);
    eprintln!("leader changes: {changes}, LEADER_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (server, client, dir, holders) = cluster("random").await;
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(4));
    let mut names = vec!["joiner-r0".to_string(), "joiner-r1".to_string()];
    let mut leader = Joiner::start(&server, &dir, &names[0], &[]);
    assert!(holders
        .wait_for(&names[0], Duration::from_secs(20))
        .await
        .is_some());
    let mut standby = Joiner::start(&server, &dir, &names[1], &[]);
    let started = Instant::now();
    for i in 0..changes {
        let (from, to) = (
            names[names.len() - 2].clone(),
            names[names.len() - 1].clone(),
        );
        sim.scale(NS, "web", rng.random_range(2..=12));
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3000))).await;
        let ending = [
            Ending::Killed,
            Ending::Terminated,
            Ending::HungRenewal,
            Ending::CutOff,
        ][rng.random_range(0..4)];
        match ending {
            Ending::Killed => leader.kill(),
            Ending::Terminated => {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &leader.pid().to_string()])
                    .status();
            }
            Ending::HungRenewal => server.hang_next(by(&from, "PUT", "leases"), u32::MAX),
            Ending::CutOff => server.cut_off(&from),
        }
        let took = holders.wait_for(&to, Duration::from_secs(30)).await;
        assert!(
            took.is_some(),
            "change {i} ({ending:?}): {to} never took over from {from}\n{}",
            standby.log()
        );
        leader.kill();
        server.clear_faults();
        leader = standby;
        names.push(format!("joiner-r{}", i + 2));
        standby = Joiner::start(&server, &dir, names.last().unwrap(), &[]);
    }
    sim.scale(NS, "web", 6);
    settled(&client, 6)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", leader.log()));
    let replicas: Vec<&str> = names.iter().map(String::as_str).collect();
    let checked = assert_no_overlap(&server, &holders, &replicas);
    let terms = holders.all().iter().filter(|h| h.is_some()).count();
    eprintln!(
        "{changes} leader changes in {:?}: {terms} terms, {checked} writes checked, 0 overlapping",
        started.elapsed()
    );
    drop(standby);
    sim.stop().await;
}
