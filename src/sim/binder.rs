//! A stand-in for kube-scheduler: binds pending pods to registered, schedulable nodes with room. It
//! reuses the decision core's placement rules (resources, taints, node affinity, topology spread,
//! pod (anti-)affinity, host ports) by asking the greedy strategy to place the pending pods with a
//! catalog that offers nothing, so only existing nodes can take them.

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
    Ok(plan
        .existing
        .into_iter()
        .flat_map(|e| e.pods.into_iter().map(move |p| (p, e.node.clone())))
        .collect())
}
