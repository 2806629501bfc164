//! A stand-in for kube-scheduler: binds pending pods to registered, schedulable nodes with room. It
//! reuses the decision core's placement rules (resources, taints, node affinity, topology spread,
//! pod (anti-)affinity, host ports, and volumes: the zone a bound PersistentVolume holds its pod
//! to, and the node's EBS attach limit as a resource) by asking the greedy strategy to place the
//! pending pods with a catalog that offers nothing, so only existing nodes can take them. A pod
//! whose volumes cannot be resolved (`volume_error`) waits, as kube-scheduler leaves it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, SolveSettings, Strategy};

use super::SimError;

/// Pod key -> node name for every pending pod that fits a node of `snapshot` now.
pub fn bindings(
    snapshot: &ClusterSnapshot,
    region: &str,
) -> Result<BTreeMap<String, String>, SimError> {
    if snapshot.pending_pods().next().is_none()
        || snapshot.nodes.iter().all(|n| n.unschedulable || !n.ready)
    {
        return Ok(BTreeMap::new());
    }
    let mut view = snapshot.clone();
    view.nodes.retain(|n| n.ready);
    view.pods
        .retain(|p| !(p.is_pending() && p.constraints.volume_error.is_some()));
    let nothing = Catalog {
        region: region.to_string(),
        instance_types: vec![],
        provenance: None,
    };
    let settings = SolveSettings {
        strategy: Strategy::Greedy,
        time_limit: Duration::from_secs(60),
        gap: 0.0,
        threads: 1,
        max_fallbacks: 0,
        lower_bound: false,
        fault: None,
        searches: 1,
    };
    let plan = optimizer::solve(&view, &nothing, &settings)
        .map_err(|e| SimError::Decision(e.to_string()))?;
    let binds: BTreeMap<String, String> = plan
        .existing
        .into_iter()
        .flat_map(|e| e.pods.into_iter().map(move |p| (p, e.node.clone())))
        .collect();
    // kube-scheduler's filter, checked again on the placement: a pod never lands on a node its
    // selectors, affinity or volumes rule out, whatever the packing did
    let pods: BTreeMap<String, &crate::domain::Pod> =
        view.pending_pods().map(|p| (p.key(), p)).collect();
    let nodes: BTreeMap<&str, &crate::domain::Node> =
        view.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
    let matches = |pod: &str, node: &str| {
        matches!((pods.get(pod), nodes.get(node)),
            (Some(p), Some(n)) if p.constraints.node_matches(&n.labels))
    };
    Ok(binds
        .into_iter()
        .filter(|(pod, node)| matches(pod, node))
        .collect())
}
