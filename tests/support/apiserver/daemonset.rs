//! The DaemonSet controller, run in-process against the store: every DaemonSet keeps one pod on
//! each Node its pod template fits (node selector) and tolerates, counting the tolerations the
//! real controller adds to every DaemonSet pod (so cordoned, not-ready and pressured nodes get
//! one too). A node without a running (non-terminating) pod of the set gets a new one at once,
//! bound to it, as the real controller recreates deleted and evicted DaemonSet pods. Pods already
//! running on a node that a later NoSchedule taint excludes keep running, as on a real cluster.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::kubelet::{nodes, pods};
use super::resources::{by_path, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::store::{is_deleting, obj_name, obj_ns, State};

fn daemonsets() -> &'static ResourceInfo {
    by_path("apps", "v1", "daemonsets").expect("daemonsets are served")
}

/// The tolerations the DaemonSet controller adds to every pod it creates.
fn automatic_tolerations() -> Vec<Value> {
    let no_execute = [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ];
    let no_schedule = [
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ];
    no_execute
        .iter()
        .map(|k| json!({"key": k, "operator": "Exists", "effect": "NoExecute"}))
        .chain(
            no_schedule
                .iter()
                .map(|k| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"})),
        )
        .collect()
}

fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or_default();
    if !effect.is_empty() && taint["effect"] != effect {
        return false;
    }
    let exists = toleration["operator"].as_str() == Some("Exists");
    match toleration["key"].as_str().unwrap_or_default() {
        "" => exists,
        key if taint["key"] != key => false,
        _ => exists || toleration["value"] == taint["value"] || taint["value"].is_null(),
    }
}

/// Whether the set's pods may run on `node`: its NoSchedule and NoExecute taints tolerated and
/// its labels matching the template's node selector. `spec.unschedulable` is tolerated through
/// the automatic toleration of `node.kubernetes.io/unschedulable`.
fn fits(tolerations: &[Value], selector: &Value, node: &Value) -> bool {
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tolerated = taints
        .iter()
        .filter(|t| t["effect"] != "PreferNoSchedule")
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)));
    let selected = selector
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| node["metadata"]["labels"][k] == *v));
    tolerated && selected
}

/// One pass: a pod of every DaemonSet on every node it fits and has no running pod on.
pub fn tick(state: &mut State, dead: &BTreeSet<String>) {
    let all = FieldSelector::default();
    let any = LabelSelector::default();
    let sets = state.select(daemonsets(), None, &any, &all);
    if sets.is_empty() {
        return;
    }
    let node_list = state.select(nodes(), None, &any, &all);
    let pod_list = state.select(pods(), None, &any, &all);
    for set in sets.iter().filter(|s| !is_deleting(s)) {
        let uid = &set["metadata"]["uid"];
        let running: BTreeSet<&str> = pod_list
            .iter()
            .filter(|p| !is_deleting(p))
            .filter(|p| {
                p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|os| os.iter().any(|o| o["uid"] == *uid))
            })
            .filter_map(|p| p["spec"]["nodeName"].as_str())
            .collect();
        let template = &set["spec"]["template"];
        let mut tolerations = template["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tolerations.extend(automatic_tolerations());
        for node in &node_list {
            let name = obj_name(node);
            if running.contains(name)
                || !fits(&tolerations, &template["spec"]["nodeSelector"], node)
            {
                continue;
            }
            create_pod(state, set, &tolerations, name, dead.contains(name));
        }
    }
}

fn create_pod(state: &mut State, set: &Value, tolerations: &[Value], node: &str, dead: bool) {
    let ns = obj_ns(set).to_string();
    let template = &set["spec"]["template"];
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(node);
    spec["tolerations"] = json!(tolerations);
    let owner = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": obj_name(set),
        "uid": set["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true});
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{}-", obj_name(set)), "namespace": ns,
                     "ownerReferences": [owner]},
        "spec": spec,
    });
    for field in ["labels", "annotations"] {
        if template["metadata"][field].is_object() {
            pod["metadata"][field] = template["metadata"][field].clone();
        }
    }
    let Ok(created) = state.create(pods(), &ns, pod) else {
        return;
    };
    // a live kubelet starts it at once; a dead one never does
    if !dead {
        let status =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        state.write_status_internal(pods(), &ns, obj_name(&created), status);
    }
}
