//! What runs in a real cluster besides joiner, played against the test API server through the
//! real kube-rs client: a **kubelet** per launched instance (a Node with the NodeClaim's providerID,
//! labels and capacity registers after a boot delay, tainted `karpenter.sh/unregistered` until
//! joiner registers it), **kube-scheduler** (binds pending pods where they fit, with joiner's own
//! placement rules on an empty catalog, and marks the rest `PodScheduled=False/Unschedulable`), and
//! **ReplicaSets** (keep each deployment at its replica count, recreating evicted pods under new
//! names; a ReplicaSet object holds the scale PodDisruptionBudgets count against). Everything polls every 200 ms; errors (the faults tests inject) are retried next tick.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct Deployment {
    pub namespace: String,
    pub name: String,
    pub replicas: usize,
    pub cpu: String,
    pub memory: String,
}

#[derive(Default)]
struct State {
    deployments: BTreeMap<String, Deployment>,
    /// providerID -> when its claim was first seen launched.
    booting: BTreeMap<String, Instant>,
    next_node: u32,
    next_pod: u32,
    /// How many launched instances, in order, never boot (a broken AMI, a kubelet that crashes).
    dead_on_arrival: usize,
    /// providerIDs that will never register.
    dead: BTreeSet<String>,
}

pub struct KubeSim {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

pub fn nodeclaims(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &joiner::k8s::caches::karpenter_resource("NodeClaim"),
    )
}

impl KubeSim {
    pub fn start(client: Client, boot_delay: Duration) -> KubeSim {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let (s, st) = (stop.clone(), state.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                if let Err(e) = kubelets(&client, &st, boot_delay).await {
                    eprintln!("kubesim kubelet: {e}");
                }
                if let Err(e) = replicasets(&client, &st).await {
                    eprintln!("kubesim replicasets: {e}");
                }
                if let Err(e) = schedule(&client).await {
                    eprintln!("kubesim scheduler: {e}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        KubeSim {
            stop,
            state,
            task: Some(task),
        }
    }

    /// Creates or rescales a deployment; its pods appear (or go) on the next tick.
    pub fn deploy(&self, d: Deployment) {
        self.state
            .lock()
            .unwrap()
            .deployments
            .insert(format!("{}/{}", d.namespace, d.name), d);
    }

    /// The next `n` instances never register a Node.
    pub fn never_boot(&self, n: usize) {
        self.state.lock().unwrap().dead_on_arrival = n;
    }

    pub fn scale(&self, namespace: &str, name: &str, replicas: usize) {
        if let Some(d) = self
            .state
            .lock()
            .unwrap()
            .deployments
            .get_mut(&format!("{namespace}/{name}"))
        {
            d.replicas = replicas;
        }
    }

    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// A Node for every launched NodeClaim whose instance has booted, as a kubelet would register;
/// a Node whose status write failed gets it on a later tick.
async fn kubelets(client: &Client, state: &Mutex<State>, boot_delay: Duration) -> kube::Result<()> {
    let claims = nodeclaims(client).list(&ListParams::default()).await?.items;
    let nodes: Api<Node> = Api::all(client.clone());
    let existing = nodes.list(&ListParams::default()).await?.items;
    for node in existing.iter().filter(|n| !node_ready(n)) {
        let pid = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        if let Some(claim) = claims
            .iter()
            .find(|c| c.data["status"]["providerID"].as_str() == pid.as_deref())
        {
            ready(
                &nodes,
                node.metadata.name.as_deref().unwrap_or_default(),
                claim,
            )
            .await?;
        }
    }
    let registered: BTreeSet<String> = existing
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.clone())
        .collect();
    for claim in claims {
        let Some(pid) = claim.data["status"]["providerID"]
            .as_str()
            .map(str::to_string)
        else {
            continue;
        };
        if registered.contains(&pid) || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (due, n) = {
            let mut st = state.lock().unwrap();
            if !st.booting.contains_key(&pid) && st.dead_on_arrival > 0 {
                st.dead_on_arrival -= 1;
                st.dead.insert(pid.clone());
            }
            if st.dead.contains(&pid) {
                continue;
            }
            let since = *st.booting.entry(pid.clone()).or_insert_with(Instant::now);
            let due = since.elapsed() >= boot_delay;
            if due {
                st.next_node += 1;
            }
            (due, st.next_node)
        };
        if !due {
            continue;
        }
        let name = format!("ip-10-0-{}-{}.ec2.internal", n / 250, n % 250);
        let mut labels = claim.metadata.labels.clone().unwrap_or_default();
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        let mut taints = vec![json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"})];
        taints.extend(
            claim.data["spec"]["startupTaints"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": pid, "taints": taints},
        }))
        .expect("node manifest");
        nodes.create(&PostParams::default(), &node).await?;
        ready(&nodes, &name, &claim).await?;
    }
    Ok(())
}

async fn ready(nodes: &Api<Node>, name: &str, claim: &DynamicObject) -> kube::Result<()> {
    let status = json!({"status": {
        "capacity": claim.data["status"]["capacity"],
        "allocatable": claim.data["status"]["allocatable"],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map(|_| ())
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Keeps every deployment at its replica count; evicted or deleted pods come back with new names.
async fn replicasets(client: &Client, state: &Mutex<State>) -> kube::Result<()> {
    let deployments: Vec<Deployment> = state
        .lock()
        .unwrap()
        .deployments
        .values()
        .cloned()
        .collect();
    for d in deployments {
        // the ReplicaSet object carries the scale the disruption controller budgets against
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &d.namespace);
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": format!("{}-rs", d.name), "namespace": d.namespace},
            "spec": {"replicas": d.replicas, "selector": {"matchLabels": {"app": d.name}}, "template": {"metadata": {"labels": {"app": d.name}}}}});
        sets.patch(
            &format!("{}-rs", d.name),
            &PatchParams::apply("kubesim").force(),
            &Patch::Apply(&rs),
        )
        .await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &d.namespace);
        let mut live: Vec<Pod> = pods
            .list(&ListParams::default().labels(&format!("app={}", d.name)))
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        live.sort_by_key(|p| p.metadata.name.clone());
        while live.len() > d.replicas {
            let p = live.pop().expect("non-empty");
            pods.delete(
                p.metadata.name.as_deref().unwrap_or_default(),
                &DeleteParams::default(),
            )
            .await?;
        }
        for _ in live.len()..d.replicas {
            let n = {
                let mut st = state.lock().unwrap();
                st.next_pod += 1;
                st.next_pod
            };
            pods.create(&PostParams::default(), &pod(&d, n)).await?;
        }
    }
    Ok(())
}

fn pod(d: &Deployment, n: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{}-{n:05}", d.name), "namespace": d.namespace, "labels": {"app": d.name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{}-rs", d.name), "uid": format!("uid-{}", d.name), "controller": true}],
        },
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": d.cpu, "memory": d.memory}}}]},
        "status": {"phase": "Pending"},
    }))
    .expect("pod manifest")
}

/// kube-scheduler: binds what fits; marks the rest unschedulable (which is what joiner acts on).
async fn schedule(client: &Client) -> Result<(), String> {
    let pods: Api<Pod> = Api::all(client.clone());
    let all_pods = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let idle = all_pods.iter().all(|p| {
        p.metadata.deletion_timestamp.is_some()
            || p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) && pod_ready(p)
    });
    if idle {
        return Ok(());
    }
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let mut docs = Vec::new();
    docs.extend(
        all_pods
            .iter()
            .map(|p| serde_yaml_ng::to_string(p).unwrap()),
    );
    // joiner's planning ignores the taints a booting node carries; kube-scheduler does not
    docs.extend(
        nodes
            .iter()
            .filter(|n| !booting(n))
            .map(|n| serde_yaml_ng::to_string(n).unwrap()),
    );
    docs.extend(pdbs.iter().map(|b| serde_yaml_ng::to_string(b).unwrap()));
    let snapshot = joiner::snapshot::parse_snapshot(&docs.join("---\n"), "kubesim")
        .map_err(|e| e.to_string())?;
    let bindings =
        joiner::sim::binder::bindings(&snapshot, "us-east-1").map_err(|e| e.to_string())?;
    // a kubelet records when it started the pod (Karpenter's pod startup metric reads it)
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let running = json!({"status": {"phase": "Running", "startTime": started, "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}});
    for p in all_pods
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) && !pod_ready(p))
    {
        let api: Api<Pod> = Api::namespaced(
            client.clone(),
            p.metadata.namespace.as_deref().unwrap_or_default(),
        );
        api.patch_status(
            p.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&running),
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    for p in all_pods.iter().filter(|p| {
        p.spec.as_ref().is_some_and(|s| s.node_name.is_none())
            && p.metadata.deletion_timestamp.is_none()
    }) {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let patch = match bindings.get(&format!("{ns}/{name}")) {
            Some(node) => json!({
                "spec": {"nodeName": node},
                "status": {"phase": "Running", "startTime": started, "conditions": [
                    {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]},
            }),
            None if unschedulable(p) => continue,
            None => {
                json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}]}})
            }
        };
        let params = PatchParams::default();
        if patch.get("spec").is_some() {
            api.patch(
                &name,
                &params,
                &Patch::Merge(&json!({"spec": patch["spec"]})),
            )
            .await
            .map_err(|e| e.to_string())?;
        }
        api.patch_status(
            &name,
            &params,
            &Patch::Merge(&json!({"status": patch["status"]})),
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn booting(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| {
                t.key == "karpenter.sh/unregistered" || t.key == "node.kubernetes.io/not-ready"
            })
        })
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn unschedulable(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
}

/// Where the cluster stands, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Census {
    pub pods_running: usize,
    pub pods_pending: usize,
    pub nodes: usize,
    pub claims: usize,
    /// Claims with no node (in flight or orphaned).
    pub claims_without_node: usize,
}

pub async fn census(client: &Client, namespace: &str) -> kube::Result<Census> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let claims = nodeclaims(client).list(&ListParams::default()).await?.items;
    let node_pids: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.clone())
        .collect();
    Ok(Census {
        pods_running: pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count(),
        pods_pending: pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
            .count(),
        nodes: nodes.len(),
        claims: claims.len(),
        claims_without_node: claims
            .iter()
            .filter(|c| {
                c.data["status"]["providerID"]
                    .as_str()
                    .is_none_or(|p| !node_pids.contains(p))
            })
            .count(),
    })
}

/// Polls `check` every 250 ms until it holds or `timeout` passes; returns the last value seen.
pub async fn eventually<T, F, Fut>(
    timeout: Duration,
    mut probe: F,
    check: impl Fn(&T) -> bool,
) -> Result<T, T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let start = Instant::now();
    loop {
        let v = probe().await;
        if check(&v) {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            return Err(v);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
