//! The eviction subresource and the part of the disruption controller it relies on: PDB status.
//!
//! PDB status is recomputed in-process, under the store lock, after every change of a pod or a
//! PDB in the namespace:
//! - `expectedPods`: pods matching the selector (the real controller asks the pods' controllers
//!   for their scale when `maxUnavailable` or a percentage is used; here the matching pods count);
//! - `currentHealthy`: matching pods without `deletionTimestamp` whose `Ready` condition is
//!   `True` (the real controller's rule, so a node simulator must set the Ready condition);
//! - `desiredHealthy`: `minAvailable` (percentages of expectedPods rounded up), or expectedPods
//!   minus `maxUnavailable` (percentages rounded up), at least 0; neither set means 0;
//! - `disruptionsAllowed`: `currentHealthy - desiredHealthy`, at least 0;
//! - `observedGeneration` and a `DisruptionAllowed` condition.

use serde_json::{json, Value};

use super::resources::{by_path, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::status::{success, ApiError, ApiResult};
use super::store::{is_deleting, obj_name, Deleted, State};

fn pods() -> &'static ResourceInfo {
    by_path("", "v1", "pods").expect("pods are served")
}

fn pdbs() -> &'static ResourceInfo {
    by_path("policy", "v1", "poddisruptionbudgets").expect("pdbs are served")
}

fn replicasets() -> &'static ResourceInfo {
    by_path("apps", "v1", "replicasets").expect("replicasets are served")
}

/// The pod's `Ready` condition is `True`.
pub fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn healthy(pod: &Value) -> bool {
    !is_deleting(pod) && pod_ready(pod)
}

/// Recomputes the status of every PDB in `ns`, writing only the ones that changed.
pub fn refresh_budgets(state: &mut State, ns: &str) {
    let all = FieldSelector::default();
    let budgets = state.select(pdbs(), Some(ns), &LabelSelector::default(), &all);
    if budgets.is_empty() {
        return; // every pod write lands here: without budgets there is nothing to recompute
    }
    let ns_pods = state.select(pods(), Some(ns), &LabelSelector::default(), &all);
    let scales: std::collections::BTreeMap<String, i64> = state
        .select(replicasets(), Some(ns), &LabelSelector::default(), &all)
        .iter()
        .map(|rs| {
            (
                obj_name(rs).to_string(),
                rs["spec"]["replicas"].as_i64().unwrap_or(1),
            )
        })
        .collect();
    for pdb in budgets {
        let status = budget_status(&pdb, &ns_pods, &scales);
        state.write_status_internal(pdbs(), ns, obj_name(&pdb), status);
    }
}

/// The pods a PDB selects (a null or invalid selector selects none; `{}` selects all).
fn selected<'a>(pdb: &Value, pods: &'a [Value]) -> Vec<&'a Value> {
    match LabelSelector::from_object(&pdb["spec"]["selector"]) {
        Ok(Some(sel)) => pods.iter().filter(|p| sel.matches(p)).collect(),
        _ => Vec::new(),
    }
}

fn budget_status(
    pdb: &Value,
    pods: &[Value],
    scales: &std::collections::BTreeMap<String, i64>,
) -> Value {
    let matching = selected(pdb, pods);
    let expected = expected_pods(pdb, &matching, scales);
    let current = matching.iter().filter(|p| healthy(p)).count() as i64;
    let desired = desired_healthy(&pdb["spec"], expected);
    let allowed = (current - desired).max(0);
    let (cond_status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(1);
    let prior = &pdb["status"]["conditions"][0];
    let since = match prior["status"].as_str() {
        Some(s) if s == cond_status => prior["lastTransitionTime"].clone(),
        _ => json!(super::store::now()),
    };
    json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed", "status": cond_status, "reason": reason,
            "message": "", "observedGeneration": generation, "lastTransitionTime": since,
        }],
    })
}

/// As the disruption controller counts them: with maxUnavailable or a percentage, the scale of the
/// ReplicaSets owning the pods (an evicted pod still counts until its replacement exists); with an
/// integer minAvailable, or pods no known ReplicaSet owns, the pods themselves.
fn expected_pods(
    pdb: &Value,
    matching: &[&Value],
    scales: &std::collections::BTreeMap<String, i64>,
) -> i64 {
    let integer_min =
        pdb["spec"]["maxUnavailable"].is_null() && pdb["spec"]["minAvailable"].is_i64();
    let owner = |p: &Value| -> Option<String> {
        let refs = p["metadata"]["ownerReferences"].as_array()?;
        let r = refs
            .iter()
            .find(|r| r["controller"] == true && r["kind"] == "ReplicaSet")?;
        r["name"]
            .as_str()
            .filter(|n| scales.contains_key(*n))
            .map(str::to_string)
    };
    let owners: Option<std::collections::BTreeSet<String>> =
        matching.iter().map(|p| owner(p)).collect();
    match owners {
        Some(owners) if !integer_min && !owners.is_empty() => {
            owners.iter().map(|o| scales[o]).sum()
        }
        _ => matching.len() as i64,
    }
}

fn desired_healthy(spec: &Value, expected: i64) -> i64 {
    if !spec["maxUnavailable"].is_null() {
        (expected - scaled(&spec["maxUnavailable"], expected)).max(0)
    } else if !spec["minAvailable"].is_null() {
        scaled(&spec["minAvailable"], expected)
    } else {
        0
    }
}

/// An IntOrString against a total: ints as they are, "N%" of the total rounded up.
pub fn scaled(v: &Value, total: i64) -> i64 {
    if let Some(i) = v.as_i64() {
        return i;
    }
    let pct = v
        .as_str()
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(0);
    (pct * total + 99) / 100
}

/// `POST pods/{name}/eviction`, following the real eviction REST handler: terminal, pending and
/// terminating pods bypass budgets; more than one matching PDB is a 500; an unhealthy pod may go
/// when the budget is healthy (unhealthyPodEvictionPolicy IfHealthyBudget or AlwaysAllow); else
/// 429 unless the budget allows a disruption. Returns the 201 Success Status to answer with.
pub fn evict(state: &mut State, ns: &str, name: &str, body: &Value) -> ApiResult<Value> {
    let pod = state.get(pods(), ns, name)?;
    let opts = body.get("deleteOptions").cloned().unwrap_or(Value::Null);
    if !can_ignore_budget(&pod) {
        check_budgets(state, ns, &pod)?;
    }
    let done = state.delete(pods(), ns, name, &opts)?;
    let uid = match &done {
        Deleted::Removed(p) | Deleted::Pending(p) => p["metadata"]["uid"].clone(),
    };
    let details = json!({"name": name, "kind": "pods", "uid": uid});
    Ok(success(201, Some(details)))
}

fn can_ignore_budget(pod: &Value) -> bool {
    is_deleting(pod)
        || matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed" | "Pending")
        )
}

fn check_budgets(state: &State, ns: &str, pod: &Value) -> ApiResult<()> {
    let all = FieldSelector::default();
    let budgets: Vec<Value> = state
        .select(pdbs(), Some(ns), &LabelSelector::default(), &all)
        .into_iter()
        .filter(|b| !selected(b, std::slice::from_ref(pod)).is_empty())
        .collect();
    match budgets.as_slice() {
        [] => Ok(()),
        [pdb] => check_budget(pdb, pod),
        _ => Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )),
    }
}

fn check_budget(pdb: &Value, pod: &Value) -> ApiResult<()> {
    let st = &pdb["status"];
    let (current, desired) = (
        st["currentHealthy"].as_i64().unwrap_or(0),
        st["desiredHealthy"].as_i64().unwrap_or(0),
    );
    if !pod_ready(pod) {
        let always = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        if always || current >= desired {
            return Ok(());
        }
    }
    if st["disruptionsAllowed"].as_i64().unwrap_or(0) > 0 {
        return Ok(());
    }
    Err(too_many_requests(obj_name(pdb), desired, current))
}

fn too_many_requests(budget: &str, desired: i64, current: i64) -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    e.details = Some(json!({"causes": [{
        "reason": "DisruptionBudget",
        "message": format!("The disruption budget {budget} needs {desired} healthy pods and has {current} currently"),
    }]}));
    e
}
