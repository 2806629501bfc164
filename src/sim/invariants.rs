//! Checks the simulated cluster must pass at every instant, whatever the decisions were. A pod
//! runs only where each of its volumes can be attached: on a node its bound PersistentVolume's
//! node affinity (the volume's zone) admits. The engine runs the check after every event and the
//! report counts what it found, so a binder, provisioner or decision that moves a pod away from
//! its volume shows up as a number instead of a pod that would stay Pending in a real cluster.

use std::collections::BTreeMap;

use crate::domain::{ClusterSnapshot, Node};

/// A bound pod on a node its volume's node affinity rules out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneViolation {
    pub pod: String,
    pub node: String,
    pub volume: String,
}

/// Every bound pod whose claim is bound to a PersistentVolume that its node does not match.
pub fn volume_zone_violations(snap: &ClusterSnapshot) -> Vec<ZoneViolation> {
    if snap.storage.volumes.is_empty() {
        return vec![];
    }
    let mut nodes: Option<BTreeMap<&str, &Node>> = None;
    let mut out = Vec::new();
    for pod in snap.pods.iter().filter(|p| !p.volumes.is_empty()) {
        let Some(node_name) = pod.node_name.as_deref() else {
            continue;
        };
        let nodes = nodes
            .get_or_insert_with(|| snap.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect());
        let Some(node) = nodes.get(node_name) else {
            continue;
        };
        for v in &pod.volumes {
            let pv = snap
                .storage
                .claims
                .get(&format!("{}/{}", pod.namespace, v.claim))
                .and_then(|c| c.volume_name.as_deref())
                .and_then(|name| snap.storage.volumes.get(name));
            if let Some(pv) = pv.filter(|pv| !pv.node_affinity.matches(&node.labels)) {
                out.push(ZoneViolation {
                    pod: pod.key(),
                    node: node.name.clone(),
                    volume: pv.name.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{NodeSelector, Requirement, ZONE};
    use crate::domain::volume::{ClaimPhase, PersistentVolume, PersistentVolumeClaim, PodVolume};
    use crate::domain::{Pod, PodConstraints};
    use std::sync::Arc;

    /// A pod `db-0` with claim `data-db-0` on a volume in zone a, bound to `node`; nodes n-a and
    /// n-b in zones a and b.
    fn cluster(node: &str) -> ClusterSnapshot {
        let mut snap = ClusterSnapshot::default();
        for (name, zone) in [("n-a", "a"), ("n-b", "b")] {
            let labels = [(ZONE.to_string(), zone.to_string())].into_iter().collect();
            snap.nodes.push(Arc::new(Node::new(
                name,
                labels,
                Default::default(),
                Default::default(),
            )));
        }
        snap.storage.add_volume(PersistentVolume {
            name: "pv-a".into(),
            driver: Some("ebs.csi.aws.com".into()),
            node_affinity: NodeSelector {
                terms: vec![vec![Requirement::in_values(ZONE, &["a"])]],
            },
        });
        snap.storage.add_claim(PersistentVolumeClaim {
            namespace: "ns".into(),
            name: "data-db-0".into(),
            volume_name: Some("pv-a".into()),
            storage_class: Some("gp3".into()),
            phase: ClaimPhase::Bound,
            deleting: false,
        });
        let mut pod = Pod::new(
            "db-0",
            PodConstraints {
                namespace: "ns".into(),
                ..Default::default()
            },
        );
        pod.volumes = vec![PodVolume {
            name: "data".into(),
            claim: "data-db-0".into(),
            ephemeral: None,
        }];
        pod.node_name = Some(node.into());
        snap.pods.push(Arc::new(pod));
        snap
    }

    #[test]
    fn a_pod_in_its_volumes_zone_passes() {
        assert_eq!(volume_zone_violations(&cluster("n-a")), vec![]);
    }

    #[test]
    fn a_pod_bound_outside_its_volumes_zone_is_caught() {
        assert_eq!(
            volume_zone_violations(&cluster("n-b")),
            vec![ZoneViolation {
                pod: "ns/db-0".into(),
                node: "n-b".into(),
                volume: "pv-a".into(),
            }]
        );
    }

    #[test]
    fn a_pending_pod_or_an_unbound_claim_is_no_violation() {
        let mut snap = cluster("n-b");
        Arc::make_mut(&mut snap.pods[0]).node_name = None;
        assert_eq!(volume_zone_violations(&snap), vec![]);
        let mut snap = cluster("n-b");
        snap.storage
            .claims
            .get_mut("ns/data-db-0")
            .unwrap()
            .volume_name = None;
        assert_eq!(volume_zone_violations(&snap), vec![]);
    }
}
