//! Load (issue 8): the real `joiner controller` binary against the in-process API server holding a
//! large cluster: NODES full nodes running BOUND pods, then PENDING pods of Karpenter's diverse mix
//! created at once, each marked unschedulable as kube-scheduler would. Measured per strategy
//! (`milp`, and `greedy` as the baseline in the same run):
//!
//! - **batch to NodeClaims**: joiner's own `joiner_scheduler_scheduling_duration_seconds` (from the
//!   batch closing to the last NodeClaim written), and the wall clock from the last pending pod
//!   created to the last NodeClaim of the first pass seen;
//! - **solve**: `joiner_solver_duration_seconds` for provisioning, with the solve's status;
//! - **memory**: the controller's resident set before the burst and its peak (VmHWM) after.
//!
//! `cargo bench --bench load` runs 5,000 nodes, 40,000 bound and 10,000 pending pods (override
//! with `-- --nodes N --bound N --pending N`). Under `cargo test` it runs a small smoke size, so the
//! harness itself stays tested; no figure is asserted.

#[path = "../tests/support/apiserver/mod.rs"]
mod apiserver;
#[path = "../tests/support/joinerproc.rs"]
mod joinerproc;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};

const ZONES: [&str; 6] = [
    "us-east-1a",
    "us-east-1b",
    "us-east-1c",
    "us-east-1d",
    "us-east-1e",
    "us-east-1f",
];
/// Pods per existing node; with these requests an m5.2xlarge has no useful room left.
const PODS_PER_NODE: usize = 8;

struct Size {
    nodes: usize,
    bound: usize,
    pending: usize,
}

fn size() -> Size {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    // cargo bench passes --bench; cargo test runs the binary without it
    let full = args.iter().any(|a| a == "--bench");
    let (nodes, bound, pending) = if full {
        (5_000, 40_000, 10_000)
    } else {
        (40, 320, 200)
    };
    Size {
        nodes: arg("--nodes", nodes),
        bound: arg("--bound", bound),
        pending: arg("--pending", pending),
    }
}

fn install(server: &ApiServer) {
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}}))
        .expect("namespace");
    server
        .create(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "KarpenterNodeRole-load", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "load"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "load"}}]},
        }))
        .expect("ec2nodeclass");
    server
        .create(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }}},
        }))
        .expect("nodepool");
}

/// Ready m5.2xlarge nodes outside any NodePool (a managed node group), each filled by its pods.
fn existing(server: &ApiServer, size: &Size) {
    for n in 0..size.nodes {
        let name = format!("node-{n:05}");
        let zone = ZONES[n % ZONES.len()];
        let room = json!({"cpu": "7910m", "memory": "30000Mi", "pods": "58"});
        server
            .create_with_status(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                    "node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/zone": zone,
                    "topology.kubernetes.io/region": "us-east-1", "eks.amazonaws.com/nodegroup": "base"}},
                "spec": {"providerID": format!("aws:///{zone}/i-{n:017x}")},
                "status": {"capacity": room, "allocatable": room, "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
            }))
            .expect("node");
    }
    for i in 0..size.bound {
        let node = format!("node-{:05}", (i / PODS_PER_NODE) % size.nodes.max(1));
        server
            .create_with_status(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("base-{i:06}"), "namespace": "default", "labels": {"app": format!("base-{}", i % 50)}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "985m", "memory": "3600Mi"}}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }))
            .expect("bound pod");
    }
}

/// Karpenter's diverse mix as kube-scheduler leaves it: pending, `PodScheduled=False/Unschedulable`.
fn pending_pods(count: usize) -> Vec<Value> {
    let yaml = joiner::workload::to_yaml(&joiner::workload::diverse(count, 42));
    yaml.split("\n---\n")
        .skip(1) // the workload's own NodePool
        .map(|doc| {
            let mut pod: Value = serde_yaml_ng::from_str(doc).expect("workload pod yaml");
            pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
            pod
        })
        .collect()
}

/// kB of a `/proc/<pid>/status` field (VmRSS, VmHWM).
fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim_start_matches(':')
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

struct Figures {
    strategy: &'static str,
    claims: usize,
    batch_to_claims: f64,
    last_pod_to_last_claim: f64,
    solve_seconds: f64,
    status: String,
    rss_before_mib: f64,
    peak_mib: f64,
}

async fn run(strategy: &'static str, size: &Size) -> Figures {
    let server = ApiServer::start().await;
    install(&server);
    existing(&server, size);
    let dir = tempdir::Dir::new(&format!("load-{strategy}"));
    // as the container image runs it (Dockerfile: two glibc heap arenas, large blocks mapped alone)
    let env = [
        ("MALLOC_ARENA_MAX", "2"),
        ("MALLOC_MMAP_THRESHOLD_", "131072"),
    ];
    let mut joiner = Joiner::start_with_defaults(
        &server,
        &dir,
        "joiner-load",
        &[
            "--disable-leader-election",
            "--disable-disruption",
            "--strategy",
            strategy,
        ],
        &env,
    );
    let claims_api = "nodeclaims.karpenter.sh";
    // ready once its metrics answer and it has published the NodePool's status (caches synced)
    let started = Instant::now();
    while server
        .get("nodepools.karpenter.sh", None, "default")
        .ok()
        .and_then(|p| p["status"]["conditions"].as_array().map(Vec::len))
        .unwrap_or(0)
        == 0
        || joiner.metrics().await.is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(300) && !joiner.exited(),
            "controller not ready\n{}",
            joiner.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rss_before = proc_kb(joiner.pid(), "VmRSS");
    for pod in pending_pods(size.pending) {
        server.create_with_status(pod).expect("pending pod");
    }
    let burst_done = Instant::now();
    // the first pass is over when joiner has timed it; claims written after that are later passes
    while joiner
        .metric("joiner_scheduler_scheduling_duration_seconds_count")
        .await
        < 1.0
    {
        assert!(
            burst_done.elapsed() < Duration::from_secs(600),
            "no provisioning pass\n{}",
            joiner.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last_pod_to_last_claim = burst_done.elapsed().as_secs_f64();
    let claims = server.list(claims_api, None, "").expect("claims").len();
    let metrics = joiner.metrics().await;
    let status = metrics
        .lines()
        .filter(|l| l.starts_with("joiner_solver_solves_total{phase=\"provisioning\""))
        .filter_map(|l| l.split("status=\"").nth(1)?.split('"').next())
        .collect::<Vec<_>>()
        .join("+");
    Figures {
        strategy,
        claims,
        batch_to_claims: joiner
            .metric("joiner_scheduler_scheduling_duration_seconds_sum")
            .await,
        last_pod_to_last_claim,
        solve_seconds: joiner
            .metric("joiner_solver_duration_seconds_sum{phase=\"provisioning\"}")
            .await,
        status,
        rss_before_mib: rss_before as f64 / 1024.0,
        peak_mib: proc_kb(joiner.pid(), "VmHWM") as f64 / 1024.0,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let size = size();
    println!(
        "load: {} nodes, {} bound pods, {} pending pods at once",
        size.nodes, size.bound, size.pending
    );
    println!(
        "{:>8} {:>7} {:>16} {:>22} {:>9} {:>16} {:>15} {:>13}",
        "strategy",
        "claims",
        "batch->claims_s",
        "last_pod->pass_end_s",
        "solve_s",
        "status",
        "rss_before_MiB",
        "peak_rss_MiB"
    );
    let mut rows = Vec::new();
    for strategy in ["milp", "greedy"] {
        let f = run(strategy, &size).await;
        println!(
            "{:>8} {:>7} {:>16.2} {:>22.2} {:>9.2} {:>16} {:>15.0} {:>13.0}",
            f.strategy,
            f.claims,
            f.batch_to_claims,
            f.last_pod_to_last_claim,
            f.solve_seconds,
            f.status,
            f.rss_before_mib,
            f.peak_mib
        );
        rows.push(f);
    }
    let (m, g) = (&rows[0], &rows[1]);
    println!(
        "milp/greedy: batch->claims {:.2}x, peak rss {:.2}x",
        m.batch_to_claims / g.batch_to_claims.max(1e-9),
        m.peak_mib / g.peak_mib.max(1e-9)
    );
}
