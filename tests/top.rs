//! `joiner top` against the in-process API server: the interactive view driven through tmux (its
//! screen read with capture-pane while a Deployment scales and the terminal shrinks), and
//! `--once -o json` checked against `joiner solve` and `joiner consolidate` on a dump of the same
//! cluster. The clusters are built by the real `joiner controller` (simulated cloud) and then left
//! without it, so that what `top` shows stays put while it is read.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use joiner::k8s::caches::karpenter_resource;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::TypeMeta;
use kube::Client;
use serde_json::{json, Value};

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, Census, Deployment, KubeSim};

const NS: &str = "default";

/// The default simulation scenario, whose NodePool, EC2NodeClass, DaemonSet and first workloads
/// the tmux test's cluster runs.
const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/scenarios/simulate/default.yaml"
);

fn joiner() -> Command {
    Command::new(env!("CARGO_BIN_EXE_joiner"))
}

/// Waits until every pod of [`NS`] runs (`pods` of them), every claim has its node, and the
/// scheduler stand-in has nothing left to mark; then stops the controller, so the cluster holds.
async fn settle_and_stop(client: &Client, joiner: &mut Joiner, pods: usize) -> Census {
    let settled = eventually(
        Duration::from_secs(60),
        || async { census(client, NS).await.expect("census") },
        |c| {
            c.pods_running == pods
                && c.pods_pending == 0
                && c.claims_without_node == 0
                && c.claims == c.nodes
        },
    )
    .await;
    let census = settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    joiner.kill();
    census
}

/// The workloads of the default scenario as they start (t = 0), each as a Deployment of its pod
/// template's requests.
fn scenario_workloads(scenario: &Value) -> Vec<Deployment> {
    let mut out = Vec::new();
    for w in scenario["workloads"].as_array().expect("workloads") {
        let r = &w["replicas"];
        let replicas = r["diurnal"]["min"]
            .as_u64()
            .or(r["constant"].as_u64())
            .or(r["steps"][0]["replicas"].as_u64());
        // the nightly Job starts at 2h, not at 0
        let Some(replicas) = replicas else { continue };
        let requests = &w["template"]["spec"]["containers"][0]["resources"]["requests"];
        out.push(Deployment {
            namespace: NS.into(),
            name: w["name"].as_str().expect("name").into(),
            replicas: replicas as usize,
            cpu: requests["cpu"].as_str().expect("cpu").into(),
            memory: requests["memory"].as_str().expect("memory").into(),
        });
    }
    out
}

/// Creates the scenario's manifests: its EC2NodeClass, NodePool and DaemonSet.
async fn create_manifests(client: &Client, scenario: &Value) {
    for m in scenario["manifests"].as_array().expect("manifests") {
        let kind = m["kind"].as_str().expect("kind");
        match kind {
            "DaemonSet" => {
                let ds: DaemonSet = serde_json::from_value(m.clone()).expect("daemonset");
                let ns = ds.metadata.namespace.clone().expect("namespace");
                Api::<DaemonSet>::namespaced(client.clone(), &ns)
                    .create(&PostParams::default(), &ds)
                    .await
                    .expect("daemonset created");
            }
            _ => {
                let obj: DynamicObject = serde_json::from_value(m.clone()).expect("object");
                Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource(kind))
                    .create(&PostParams::default(), &obj)
                    .await
                    .expect("karpenter object created");
            }
        }
    }
}

/// A tmux server of the test's own (its socket in the scratch directory), killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    /// Waits until the screen satisfies `check`; the screen last read either way.
    fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The number before " pending pods" on the screen.
fn pending_on(screen: &str) -> Option<usize> {
    let line = screen.lines().find(|l| l.contains(" pending pods"))?;
    let at = line.find(" pending pods")?;
    line[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_in_tmux_shows_the_default_scenarios_cluster_and_the_pending_plan() {
    let scenario: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(SCENARIO).expect("scenario read"))
            .expect("scenario parses");
    let server = ApiServer::start().await;
    let client = server.client();
    let dir = tempdir::Dir::new("top-tmux");
    for ns in [SYSTEM_NS, "kube-system"] {
        joinerproc::namespace(&client, ns).await;
    }
    create_manifests(&client, &scenario).await;
    let mut controller = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    let workloads = scenario_workloads(&scenario);
    let pods = workloads.iter().map(|d| d.replicas).sum();
    for d in workloads {
        sim.deploy(d);
    }
    let nodes = settle_and_stop(&client, &mut controller, pods).await.nodes;

    let kubeconfig = dir.path().join("top-kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let exit = dir.path().join("exit");
    let command = format!(
        "{} top --kubeconfig {} --namespace {SYSTEM_NS} --time-limit 1 --refresh 2 2>{}; echo $? >{}",
        env!("CARGO_BIN_EXE_joiner"),
        kubeconfig.display(),
        dir.path().join("top.log").display(),
        exit.display()
    );
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    tmux.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "150",
        "-y",
        "40",
        &command,
    ]);
    let screen = tmux.wait_for("the cluster", |s| {
        s.contains("general") && s.contains("0 pending pods") && s.contains("re-pack bound $")
    });
    if let Ok(path) = std::env::var("JOINER_TOP_SCREENSHOT") {
        std::fs::write(path, &screen).expect("screenshot written");
    }
    assert!(
        screen.contains(&format!(" {nodes} nodes ")),
        "{nodes} nodes:\n{screen}"
    );

    // a queue backlog: workers the nodes have no room for
    sim.scale(NS, "worker", 16);
    let screen = tmux.wait_for("a plan for the pending pods", |s| {
        pending_on(s).is_some_and(|n| n > 0) && s.contains("plan $") && s.contains("+ ")
    });
    assert!(screen.contains("onto existing"), "{screen}");
    if let Ok(path) = std::env::var("JOINER_TOP_SCREENSHOT") {
        std::fs::write(format!("{path}.pending"), &screen).expect("screenshot written");
    }

    tmux.run(&["send-keys", "-t", "top", "p"]);
    tmux.wait_for("the pool filter", |s| s.contains("pool:general"));
    tmux.run(&["send-keys", "-t", "top", "s", "Down", "Enter"]);
    tmux.wait_for("a node's pods", |s| {
        s.contains("sort:price") && s.contains("pods on ") && s.contains("POD")
    });
    tmux.run(&["send-keys", "-t", "top", "Escape"]);
    tmux.wait_for("the node table again", |s| s.contains("DISRUPTION"));

    for (x, y) in [("40", "10"), ("12", "3"), ("150", "40")] {
        tmux.run(&["resize-window", "-t", "top", "-x", x, "-y", y]);
        tmux.wait_for(&format!("the view at {x}x{y}"), |s| {
            s.lines().count() <= y.parse().unwrap() && s.contains("joiner")
        });
        assert!(!exit.exists(), "top exited at {x}x{y}");
    }
    tmux.wait_for("the pending pods at full size", |s| s.contains("plan $"));
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let start = Instant::now();
    while !exit.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = std::fs::read_to_string(&exit).expect("top exited on q");
    assert_eq!(
        code.trim(),
        "0",
        "exit code; log:\n{:?}",
        std::fs::read_to_string(dir.path().join("top.log"))
    );
    sim.stop().await;
}

/// Lists every object of `api` as a YAML document with its apiVersion and kind.
async fn dump_typed<K>(api: Api<K>, out: &mut Vec<String>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    for o in api
        .list(&ListParams::default())
        .await
        .expect("listed")
        .items
    {
        out.push(serde_yaml_ng::to_string(&o).expect("yaml"));
    }
}

/// The cluster as `kubectl get -o yaml` of every kind `top` watches would write it.
async fn dump(client: &Client, path: &Path) {
    let mut docs = Vec::new();
    dump_typed(Api::<Pod>::all(client.clone()), &mut docs).await;
    dump_typed(Api::<Node>::all(client.clone()), &mut docs).await;
    dump_typed(Api::<DaemonSet>::all(client.clone()), &mut docs).await;
    dump_typed(Api::<PodDisruptionBudget>::all(client.clone()), &mut docs).await;
    dump_typed(
        Api::<ConfigMap>::namespaced(client.clone(), SYSTEM_NS),
        &mut docs,
    )
    .await;
    for (kind, group) in [
        ("NodePool", "karpenter.sh/v1"),
        ("NodeClaim", "karpenter.sh/v1"),
        ("EC2NodeClass", "karpenter.k8s.aws/v1"),
    ] {
        let api = Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource(kind));
        for mut o in api
            .list(&ListParams::default())
            .await
            .expect("listed")
            .items
        {
            o.types = Some(TypeMeta {
                api_version: group.into(),
                kind: kind.into(),
            });
            docs.push(serde_yaml_ng::to_string(&o).expect("yaml"));
        }
    }
    std::fs::write(path, docs.join("---\n")).expect("dump written");
}

fn json_of(mut cmd: Command) -> Value {
    let out = cmd.output().expect("joiner runs");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("json output")
}

/// Consolidation commands as both outputs name them: the reason, the instance types deleted and
/// those launched, sorted. Types rather than node names: of two identical nodes, which one goes is
/// a tie the solver may break either way when the objects come in another order.
fn commands(
    actions: &Value,
    types: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, Vec<String>, Vec<String>)> {
    let sorted = |v: &Value, name: &dyn Fn(&Value) -> String| -> Vec<String> {
        let mut s: Vec<String> = v.as_array().expect("array").iter().map(name).collect();
        s.sort();
        s
    };
    let deleted = |v: &Value| types[v.as_str().expect("node name")].clone();
    let launched = |v: &Value| v["instance_type"].as_str().expect("type").to_string();
    let mut out: Vec<_> = actions
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| {
            (
                a["reason"].as_str().expect("reason").to_string(),
                sorted(&a["delete"], &deleted),
                sorted(&a["launch"], &launched),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_json_decides_as_solve_and_consolidate_on_the_same_cluster() {
    let server = ApiServer::start().await;
    let client = server.client();
    let dir = tempdir::Dir::new("top-once");
    joinerproc::namespace(&client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    joinerproc::install_nodepool(
        &client,
        json!({"requirements": joinerproc::general_purpose(true)}),
        json!({"limits": {"cpu": "1000"}}),
    )
    .await;
    let mut controller = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    let web = |replicas| Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    };
    sim.deploy(web(12));
    settle_and_stop(&client, &mut controller, 12).await;
    // the load drops (room to consolidate) and a pod no node has room for arrives
    sim.scale(NS, "web", 3);
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "batch".into(),
        replicas: 1,
        cpu: "20".into(),
        memory: "8Gi".into(),
    });
    let marked = eventually(
        Duration::from_secs(20),
        || async { pods_marked(&client).await },
        |&(running, unschedulable)| running == 3 && unschedulable == 1,
    )
    .await;
    assert!(marked.is_ok(), "pods never settled: {marked:?}");
    sim.stop().await;

    let kubeconfig = dir.path().join("top-kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut top = joiner();
    top.args([
        "top",
        "--once",
        "-o",
        "json",
        "--time-limit",
        "3",
        "--namespace",
        SYSTEM_NS,
    ])
    .arg("--kubeconfig")
    .arg(&kubeconfig);
    let frame = json_of(top);
    let snapshot = dir.path().join("dump.yaml");
    dump(&client, &snapshot).await;
    let mut solve = joiner();
    solve
        .args([
            "solve",
            "-o",
            "json",
            "--time-limit",
            "3",
            "--allow-unschedulable",
            "--snapshot",
        ])
        .arg(&snapshot);
    let plan = json_of(solve);
    let mut consolidate = joiner();
    consolidate
        .args([
            "consolidate",
            "-o",
            "json",
            "--time-limit",
            "3",
            "--allow-unschedulable",
        ])
        .arg("--snapshot")
        .arg(&snapshot);
    let disruption = json_of(consolidate);

    let pending_pods = frame["pending"]["pods"].as_array().expect("pending pods");
    assert!(
        pending_pods.len() == 1
            && pending_pods[0]
                .as_str()
                .unwrap()
                .starts_with("default/batch-"),
        "{frame:#}"
    );
    let pending = &frame["pending"]["plan"];
    let cost = |v: &Value| v.as_f64().expect("a cost");
    assert!(
        (cost(&pending["cost_per_hour"]) - cost(&plan["cost_per_hour"])).abs() < 1e-6,
        "top {pending:#}\nsolve {plan:#}"
    );
    assert!(cost(&pending["cost_per_hour"]) > 0.0, "{pending:#}");
    let types = frame["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let s = |k: &str| n[k].as_str().expect(k).to_string();
            (s("name"), s("instance_type"))
        })
        .collect();
    let ours = commands(&frame["consolidation"]["commands"], &types);
    let theirs = commands(&disruption["actions"], &types);
    assert!(!ours.is_empty(), "nothing to consolidate: {frame:#}");
    assert_eq!(ours, theirs, "top {frame:#}\nconsolidate {disruption:#}");
    assert!(
        (cost(&frame["consolidation"]["savings_per_hour"]) - cost(&disruption["savings_per_hour"]))
            .abs()
            < 1e-6
    );
    let before = cost(&disruption["cost_before_per_hour"]);
    assert!((cost(&frame["totals"]["cost_per_hour"]) - before).abs() < 1e-6);
}

/// Pods of [`NS`] bound to a node, and pods the scheduler stand-in marked unschedulable.
async fn pods_marked(client: &Client) -> (usize, usize) {
    let pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items;
    let running = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .count();
    let unschedulable = pods
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                })
            })
        })
        .count();
    (running, unschedulable)
}
