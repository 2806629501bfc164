//! The simulated storage provisioner (the EBS CSI driver's external-provisioner and the
//! PersistentVolume controller): it makes a StatefulSet pod's claims, and the volume of each claim
//! where its StorageClass says: at once for `Immediate` (in a zone the class allows, taken in turn
//! so a StatefulSet's volumes spread the same way every run), and for `WaitForFirstConsumer` in the
//! zone of the node its first pod is bound to. A volume never moves: from then on its node affinity
//! holds every pod that mounts it to its zone.

use std::collections::BTreeMap;

use crate::domain::labels::{NodeSelector, Operator, Requirement, ZONE};
use crate::domain::volume::{
    attach_driver, BindingMode, ClaimPhase, PersistentVolume, PersistentVolumeClaim,
};
use crate::domain::ClusterSnapshot;

pub struct Provisioner {
    /// Zones a volume can be made in when its class allows every zone: the catalog's, sorted.
    zones: Vec<String>,
    /// Per `Immediate` class, how many volumes it has placed (the next zone in turn).
    placed: BTreeMap<String, usize>,
    /// Volumes made so far, for their names.
    made: u64,
}

impl Provisioner {
    pub fn new(zones: Vec<String>) -> Provisioner {
        Provisioner {
            zones,
            placed: BTreeMap::new(),
            made: 0,
        }
    }

    /// Makes the claim `namespace/name` of `class` unless it exists (a StatefulSet pod made again
    /// finds its claim); an `Immediate` class binds it to a new volume at once. Returns whether
    /// anything changed.
    pub fn claim(
        &mut self,
        snap: &mut ClusterSnapshot,
        namespace: &str,
        name: &str,
        class: &str,
    ) -> bool {
        let key = format!("{namespace}/{name}");
        if snap.storage.claims.contains_key(&key) {
            return false;
        }
        snap.storage.add_claim(PersistentVolumeClaim {
            namespace: namespace.to_string(),
            name: name.to_string(),
            volume_name: None,
            storage_class: Some(class.to_string()),
            phase: ClaimPhase::Pending,
            deleting: false,
        });
        let immediate = snap
            .storage
            .classes
            .get(class)
            .filter(|c| c.binding_mode == BindingMode::Immediate)
            .map(|c| allowed_zones(&c.allowed_topologies));
        if let Some(allowed) = immediate {
            let candidates: Vec<&String> = self
                .zones
                .iter()
                .filter(|z| allowed.as_ref().is_none_or(|a| a.contains(z)))
                .collect();
            // a class whose zones no offering is in leaves the claim pending: its pods are
            // unschedulable with the claim named, as in a cluster
            if !candidates.is_empty() {
                let turn = self.placed.entry(class.to_string()).or_default();
                let zone = candidates[*turn % candidates.len()].clone();
                *turn += 1;
                self.bind(snap, &key, &zone);
            }
        }
        true
    }

    /// The pod `pod_key` was bound to `node`: its unbound `WaitForFirstConsumer` claims get
    /// volumes in the node's zone. Returns whether any did.
    pub fn first_consumer(
        &mut self,
        snap: &mut ClusterSnapshot,
        pod_key: &str,
        node: &str,
    ) -> bool {
        let Some(pod) = snap.pods.iter().find(|p| p.key() == pod_key) else {
            return false;
        };
        let Some(zone) = snap
            .nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.labels.get(ZONE))
            .cloned()
        else {
            return false;
        };
        let waiting: Vec<String> = pod
            .volumes
            .iter()
            .map(|v| format!("{}/{}", pod.namespace, v.claim))
            .filter(|key| {
                snap.storage.claims.get(key).is_some_and(|c| {
                    c.volume_name.is_none()
                        && c.storage_class
                            .as_deref()
                            .and_then(|s| snap.storage.classes.get(s))
                            .is_some_and(|s| s.binding_mode == BindingMode::WaitForFirstConsumer)
                })
            })
            .collect();
        for key in &waiting {
            self.bind(snap, key, &zone);
        }
        !waiting.is_empty()
    }

    /// A new volume in `zone` for the claim `key`, and the claim bound to it.
    fn bind(&mut self, snap: &mut ClusterSnapshot, key: &str, zone: &str) {
        let Some(claim) = snap.storage.claims.get(key) else {
            return;
        };
        let driver = claim
            .storage_class
            .as_deref()
            .and_then(|c| snap.storage.classes.get(c))
            .map(|c| attach_driver(&c.provisioner).to_string());
        self.made += 1;
        let name = format!("pvc-{:06}", self.made);
        snap.storage.add_volume(PersistentVolume {
            name: name.clone(),
            driver,
            node_affinity: NodeSelector {
                terms: vec![vec![Requirement::in_values(ZONE, &[zone])]],
            },
        });
        if let Some(c) = snap.storage.claims.get_mut(key) {
            c.volume_name = Some(name);
            c.phase = ClaimPhase::Bound;
        }
    }
}

/// The zones a class's `allowedTopologies` name (None: it names none, so every zone is allowed).
fn allowed_zones(sel: &NodeSelector) -> Option<Vec<String>> {
    let zones: Vec<String> = sel
        .terms
        .iter()
        .flatten()
        .filter(|r| r.key == ZONE && r.operator == Operator::In)
        .flat_map(|r| r.values.iter().cloned())
        .collect();
    (!zones.is_empty()).then_some(zones)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::volume::PodVolume;
    use crate::domain::volume::StorageClass;
    use crate::domain::{Node, Pod, PodConstraints};
    use std::sync::Arc;

    fn class(name: &str, mode: BindingMode, zones: &[&str]) -> StorageClass {
        StorageClass {
            name: name.into(),
            provisioner: "ebs.csi.aws.com".into(),
            binding_mode: mode,
            allowed_topologies: if zones.is_empty() {
                NodeSelector::default()
            } else {
                NodeSelector {
                    terms: vec![vec![Requirement::in_values(ZONE, zones)]],
                }
            },
            default: false,
        }
    }

    fn volume_zone(snap: &ClusterSnapshot, claim: &str) -> Option<String> {
        let pv = snap.storage.claims[claim].volume_name.as_ref()?;
        Some(snap.storage.volumes[pv].node_affinity.terms[0][0].values[0].clone())
    }

    #[test]
    fn immediate_claims_take_the_allowed_zones_in_turn_and_keep_their_volume() {
        let mut snap = ClusterSnapshot::default();
        snap.storage
            .add_class(class("pinned", BindingMode::Immediate, &["b", "c"]));
        let mut p = Provisioner::new(vec!["a".into(), "b".into(), "c".into()]);
        for i in 0..3 {
            assert!(p.claim(&mut snap, "ns", &format!("data-db-{i}"), "pinned"));
        }
        let zones: Vec<_> = (0..3)
            .map(|i| volume_zone(&snap, &format!("ns/data-db-{i}")).unwrap())
            .collect();
        assert_eq!(zones, ["b", "c", "b"]);
        assert!(
            !p.claim(&mut snap, "ns", "data-db-0", "pinned"),
            "an existing claim is kept"
        );
        assert_eq!(snap.storage.volumes.len(), 3);
        assert_eq!(
            snap.storage.volumes["pvc-000001"].driver.as_deref(),
            Some("ebs.csi.aws.com")
        );
    }

    #[test]
    fn a_first_consumer_claim_waits_for_its_pod_and_follows_its_node() {
        let mut snap = ClusterSnapshot::default();
        snap.storage
            .add_class(class("wffc", BindingMode::WaitForFirstConsumer, &[]));
        let labels = [(ZONE.to_string(), "c".to_string())].into_iter().collect();
        snap.nodes.push(Arc::new(Node::new(
            "n1",
            labels,
            Default::default(),
            Default::default(),
        )));
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
        snap.pods.push(Arc::new(pod));
        let mut p = Provisioner::new(vec!["a".into(), "c".into()]);
        p.claim(&mut snap, "ns", "data-db-0", "wffc");
        assert_eq!(volume_zone(&snap, "ns/data-db-0"), None, "no volume yet");
        assert!(p.first_consumer(&mut snap, "ns/db-0", "n1"));
        assert_eq!(volume_zone(&snap, "ns/data-db-0").as_deref(), Some("c"));
        assert!(
            !p.first_consumer(&mut snap, "ns/db-0", "n1"),
            "a bound claim is not made again"
        );
    }
}
