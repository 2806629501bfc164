//! A plan's fingerprint: SHA-256 over the inputs its actions depend on — the deleted nodes and the
//! nodes receiving pods (objects and the pods bound to them), the NodePools (budgets, drift), the
//! PodDisruptionBudgets, and the catalog entries of every instance type involved. The executor
//! recomputes it from fresh inputs after the validation delay; a different value means the plan
//! was decided on a cluster that no longer exists, and it is dropped. Changes elsewhere in the
//! cluster (pods on uninvolved nodes) do not invalidate it.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;

use super::plan::DisruptionPlan;

pub fn of(snapshot: &ClusterSnapshot, catalog: &Catalog, plan: &DisruptionPlan) -> String {
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    for a in &plan.actions {
        nodes.extend(a.delete.iter().map(String::as_str));
        nodes.extend(a.moves.iter().map(|m| m.to.as_str()));
    }
    let mut types: BTreeSet<&str> = BTreeSet::new();
    for a in &plan.actions {
        types.extend(a.launch.iter().map(|l| l.instance_type.as_str()));
    }
    let mut h = Sha256::new();
    for n in snapshot
        .nodes
        .iter()
        .filter(|n| nodes.contains(n.name.as_str()))
    {
        if let Some(t) = n.labels.get(crate::domain::labels::INSTANCE_TYPE) {
            types.insert(t);
        }
        feed(&mut h, &**n);
    }
    let mut pods: Vec<_> = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref().is_some_and(|n| nodes.contains(n)))
        .collect();
    pods.sort_by_key(|p| p.key());
    for p in pods {
        feed(&mut h, &**p);
    }
    feed(&mut h, &snapshot.nodepools);
    feed(&mut h, &snapshot.pdbs);
    feed(&mut h, &snapshot.weights);
    h.update(catalog.region.as_bytes());
    for it in catalog
        .instance_types
        .iter()
        .filter(|it| types.contains(it.name.as_str()))
    {
        feed(&mut h, it);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn feed<T: serde::Serialize>(h: &mut Sha256, value: &T) {
    // serde_json of plain data cannot fail; an empty feed would still separate the records
    h.update(serde_json::to_vec(value).unwrap_or_default());
    h.update([0u8]);
}
