//! The in-cluster controller's memory under churn: the `joiner controller` process (leader
//! election on, the simulated cloud) against the in-process API server, with kubelets,
//! kube-scheduler and ReplicaSets played by `kubesim`, while four Deployments wobble for a few
//! minutes. Its resident memory is sampled from /proc every few seconds. This is the host that
//! `tests/soak.rs` leaves out: the decision loop's own state, the bounded solve log cloned every
//! step, the Event queue, the watch caches, the Kubernetes adapter's claim books, the metrics and
//! the Lease renewal all run here, though on the real clock (minutes of steps, not a day).
//!
//! The assertion is a ratio in the child process: the highest floor of the resident size (the
//! least of each three consecutive samples, so that a bound solve's few seconds of HiGHS memory
//! do not count as growth) against the size once the warm-up is over and the run has made as many
//! solves as the solve log holds at most, within 10%. `SOAK_OPERATOR_SECONDS` sets the
//! run's length (240 s by default).

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::time::{Duration, Instant};

use kube::Client;
use serde_json::json;

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{Deployment, KubeSim};

const NS: &str = "default";
/// Resident size at the end of the warm-up is the reference.
const WARM_UP: Duration = Duration::from_secs(40);
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Consecutive samples whose least is the floor (15 s).
const FLOOR_SAMPLES: usize = 3;
const TOLERANCE: f64 = 0.10;
const MIB: f64 = 1024.0 * 1024.0;
/// The solve records the controller holds at most: at twice `SOLVES_KEPT` (src/operator/mod.rs)
/// it drops all but the latest `SOLVES_KEPT`.
const SOLVES_HELD: f64 = 128.0;

/// The run's length: `SOAK_OPERATOR_SECONDS`, 240 s by default.
fn run_length() -> Duration {
    let secs = std::env::var("SOAK_OPERATOR_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    Duration::from_secs(secs)
}

/// A process's resident set size in bytes (`VmRSS` of /proc/PID/status); None once it is gone.
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The sum of a metric's samples over all its labels.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A NodePool over general-purpose on-demand amd64 types, consolidated as soon as a node is
/// underused, and its EC2NodeClass.
async fn install_nodepool(client: &Client) {
    joinerproc::install_nodepool(
        client,
        json!({"requirements": joinerproc::general_purpose(true)}),
        json!({"limits": {"cpu": "1000"}}),
    )
    .await;
}

async fn namespace(client: &Client, name: &str) {
    joinerproc::namespace(client, name).await;
}

/// A Deployment whose replica count follows a cosine between `min` and `max` over `period`.
struct Wobble {
    name: &'static str,
    cpu: &'static str,
    min: f64,
    max: f64,
    period: f64,
}

impl Wobble {
    fn replicas(&self, t: f64) -> usize {
        let phase = (t / self.period * std::f64::consts::TAU).cos();
        (self.min + (self.max - self.min) * (1.0 + phase) / 2.0).round() as usize
    }

    fn deployment(&self, t: f64) -> Deployment {
        Deployment {
            namespace: NS.into(),
            name: self.name.into(),
            replicas: self.replicas(t),
            cpu: self.cpu.into(),
            memory: "512Mi".into(),
        }
    }
}

const WOBBLES: [Wobble; 4] = [
    Wobble {
        name: "web",
        cpu: "500m",
        min: 2.0,
        max: 14.0,
        period: 15.0,
    },
    Wobble {
        name: "api",
        cpu: "1",
        min: 1.0,
        max: 6.0,
        period: 10.0,
    },
    Wobble {
        name: "worker",
        cpu: "1500m",
        min: 0.0,
        max: 4.0,
        period: 20.0,
    },
    Wobble {
        name: "batch",
        cpu: "2",
        min: 0.0,
        max: 3.0,
        period: 25.0,
    },
];

/// Timings shorter than `Joiner::start`'s: batches close within half a second, so the run makes
/// solves faster than the solve log drops them.
const FAST: [&str; 18] = [
    "--batch-idle-duration",
    "100ms",
    "--batch-max-duration",
    "500ms",
    "--solver-time-limit",
    "2s",
    "--disruption-time-limit",
    "2s",
    "--disruption-interval",
    "1s",
    "--validation-delay",
    "1s",
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "500ms",
];

/// Resident size at a moment of the run, with the solves made by then.
struct Point {
    at: f64,
    bytes: u64,
    solves: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_process_keeps_resident_memory_flat_under_churn() {
    let server = ApiServer::start().await;
    let client = server.client();
    namespace(&client, SYSTEM_NS).await;
    // the Deployments wobble every minute or so: consolidation would keep room for them
    // (recallMinutes) and the nodes would stop coming and going, which is what the soak is for
    joinerproc::weights_for_a_seconds_clock(&client, json!({"recallMinutes": "0"})).await;
    install_nodepool(&client).await;
    let dir = tempdir::Dir::new("soak-operator");
    let mut joiner = Joiner::start_with_defaults(&server, &dir, "joiner-a", &FAST, &[]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));

    let length = run_length();
    let started = Instant::now();
    let mut curve: Vec<Point> = vec![];
    let mut next_sample = Duration::ZERO;
    while started.elapsed() < length {
        let t = started.elapsed().as_secs_f64();
        for w in &WOBBLES {
            sim.deploy(w.deployment(t));
        }
        if started.elapsed() >= next_sample {
            next_sample += SAMPLE_EVERY;
            let bytes = resident_bytes(joiner.pid())
                .unwrap_or_else(|| panic!("joiner exited\n{}", joiner.log()));
            let solves = metric_sum(&joiner.metrics().await, "joiner_solver_solves_total");
            curve.push(Point {
                at: t,
                bytes,
                solves,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let metrics = joiner.metrics().await;
    assert!(!joiner.exited(), "joiner exited\n{}", joiner.log());
    sim.stop().await;

    println!("   s  RSS MiB  solves");
    for p in &curve {
        println!(
            "{:>4.0}  {:>7.1}  {:>6.0}",
            p.at,
            p.bytes as f64 / MIB,
            p.solves
        );
    }
    let created = metric_sum(&metrics, "joiner_nodeclaims_created_total");
    let terminated = metric_sum(&metrics, "joiner_nodeclaims_terminated_total");
    let dropped = metric_sum(&metrics, "joiner_events_dropped_total");
    let solves = metric_sum(&metrics, "joiner_solver_solves_total");
    println!(
        "{:.0} s: {solves} solves, {created} nodeclaims created, {terminated} terminated, \
         {dropped} events dropped",
        length.as_secs_f64()
    );

    // the solve log must have dropped records at least once, and nodes must have come and gone
    assert!(
        solves >= SOLVES_HELD,
        "{solves} solves: too few for the solve log to have dropped any"
    );
    assert!(
        created >= 10.0 && terminated >= 5.0,
        "{created} created, {terminated} terminated"
    );

    // the working size is reached once the solve log is full; from then on a leak raises the
    // floor, while a provisioning bound solving beside the decision loop (its own thread, its own
    // HiGHS model) lifts single samples for a few seconds: the floor is the least of each
    // `FLOOR_SAMPLES` consecutive samples
    let warm = curve
        .iter()
        .find(|p| p.at >= WARM_UP.as_secs_f64() && p.solves >= SOLVES_HELD)
        .expect("a sample after the warm-up with the solve log full");
    let after: Vec<&Point> = curve.iter().filter(|p| p.at >= warm.at).collect();
    let (peak_at, peak) = after
        .windows(FLOOR_SAMPLES)
        .map(|w| {
            let low = w.iter().min_by_key(|p| p.bytes).expect("a window");
            (low.at, low.bytes as f64)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("samples after the warm-up");
    let highest = after.iter().map(|p| p.bytes).max().unwrap_or(0) as f64;
    let reference = warm.bytes as f64;
    println!(
        "{:.0} s: {:.1} MiB; highest floor after: {:.1} MiB at {peak_at:.0} s ({:+.1}%); highest \
         sample {:.1} MiB ({:+.1}%)",
        warm.at,
        reference / MIB,
        peak / MIB,
        (peak / reference - 1.0) * 100.0,
        highest / MIB,
        (highest / reference - 1.0) * 100.0
    );
    assert!(
        peak <= reference * (1.0 + TOLERANCE),
        "resident memory's floor grew from {:.1} MiB at {:.0} s to {:.1} MiB at {peak_at:.0} s, \
         over {:.0}%",
        reference / MIB,
        warm.at,
        peak / MIB,
        TOLERANCE * 100.0
    );
}
