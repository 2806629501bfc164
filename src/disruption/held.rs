//! Room kept for demand that comes back. A workload whose replicas fell and rose again within
//! `recallMinutes` (an HPA wobbling) is expected to reach its recent peak again; consolidating
//! the room that peak needs only to launch it again at the next upswing evicts pods and buys nodes
//! for nothing. The caller passes that room in `DisruptionSettings::held`; [`Room`] tracks the
//! cluster's free room as consolidation actions are accepted, and refuses a voluntary one (empty or
//! underutilized) that would leave less free room than is held. Room is summed over nodes, not
//! packed: it is a budget of CPU and memory, not a placement.

use crate::domain::{ClusterSnapshot, Quantity, Resources};

use super::budget::Reason;
use super::plan::Action;

/// The cluster's free room against the room held for returning demand.
pub(crate) struct Room {
    free: Resources,
    held: Resources,
}

impl Room {
    /// The free room of `base` (allocatable less requests, over nodes that take pods), or None
    /// when nothing is held.
    pub(crate) fn new(base: &ClusterSnapshot, held: &Resources) -> Option<Room> {
        if held.is_empty() {
            return None;
        }
        let mut free = Resources::new();
        for node in base
            .nodes
            .iter()
            .filter(|n| !n.unschedulable && !n.deleting)
        {
            free.add(&free_on(base, &node.name, &node.allocatable));
        }
        Some(Room {
            free,
            held: held.clone(),
        })
    }

    /// Accepts `a` when it is not a voluntary consolidation or leaves the held room free, and
    /// then counts the room it removes; otherwise says why not.
    pub(crate) fn admit(&mut self, a: &Action, base: &ClusterSnapshot) -> Result<(), String> {
        if !matches!(a.reason, Reason::Empty | Reason::Underutilized) {
            return Ok(());
        }
        let (removed, daemons) = removed_room(a, base);
        let mut after = self.free.minus(&removed);
        for node in &a.launch {
            let mut room = parse(&node.allocatable);
            room.sub(&daemons);
            after.add(&room);
        }
        if let Some(short) = self.held.exceeding(&after).next() {
            return Err(format!(
                "keeps room for workloads that fell and rose again within recallMinutes: \
                 {short} held {}, free after it {}",
                self.held.get(short),
                after.get(short)
            ));
        }
        self.free = after;
        Ok(())
    }
}

/// The room the deleted nodes of `a` take away, and the DaemonSet requests a node of the
/// cluster carries (the most of any deleted node), which a launched node carries too. A deleted
/// node takes its own free room, and its pods take room wherever they go, so the cluster loses its
/// allocatable less its DaemonSet pods, which vanish with it.
fn removed_room(a: &Action, base: &ClusterSnapshot) -> (Resources, Resources) {
    let mut removed = Resources::new();
    let mut daemons = Resources::new();
    for node in base.nodes.iter().filter(|n| a.delete.contains(&n.name)) {
        let ds = daemon_requests(base, &node.name);
        removed.add(&node.allocatable.minus(&ds));
        daemons.max_with(&ds);
    }
    (removed, daemons)
}

fn free_on(base: &ClusterSnapshot, node: &str, allocatable: &Resources) -> Resources {
    allocatable.minus(&used_on(base, node))
}

fn daemon_requests(base: &ClusterSnapshot, node: &str) -> Resources {
    let mut r = Resources::new();
    for p in base
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node) && p.is_daemonset_pod())
    {
        r.add(&p.constraints.requests);
    }
    r
}

/// Requests of the pods bound to `node` that take room.
fn used_on(base: &ClusterSnapshot, node: &str) -> Resources {
    let mut r = Resources::new();
    for p in base
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node) && !p.terminal)
    {
        r.add(&p.constraints.requests);
    }
    r
}

/// A plan's allocatable (quantity strings); an unparsable entry counts as no room.
fn parse(allocatable: &std::collections::BTreeMap<String, String>) -> Resources {
    allocatable
        .iter()
        .filter_map(|(k, v)| Quantity::parse(v).ok().map(|q| (k.clone(), q)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Labels, Node, Pod, PodConstraints};
    use std::sync::Arc;

    fn cpu(milli: i64) -> Resources {
        Resources::new().with("cpu", Quantity::from_milli(milli))
    }

    fn node(name: &str, milli: i64) -> Node {
        Node::new(name, Labels::new(), cpu(milli), cpu(milli))
    }

    fn pod(name: &str, on: &str, milli: i64) -> Arc<Pod> {
        let c = PodConstraints {
            namespace: "shop".into(),
            requests: cpu(milli),
            ..PodConstraints::default()
        };
        let mut p = Pod::new(name, c);
        p.node_name = Some(on.into());
        Arc::new(p)
    }

    fn delete(nodes: &[&str]) -> Action {
        Action {
            reason: Reason::Underutilized,
            delete: nodes.iter().map(|n| n.to_string()).collect(),
            launch: vec![],
            moves: vec![],
            savings_per_hour: 0.1,
            disruption_cost: 0.0,
        }
    }

    #[test]
    fn a_deletion_that_leaves_less_free_room_than_is_held_is_refused() {
        // a: 4 cpu with 1 used, b: 4 cpu with 1 used; 6 cpu free
        let base = ClusterSnapshot {
            nodes: vec![node("a", 4000).into(), node("b", 4000).into()],
            pods: vec![pod("p", "a", 1000), pod("q", "b", 1000)],
            ..ClusterSnapshot::default()
        };
        assert!(Room::new(&base, &Resources::new()).is_none());
        // deleting b takes its 4 cpu and moves q onto a: 2 free
        let mut room = Room::new(&base, &cpu(2000)).unwrap();
        assert!(room.admit(&delete(&["b"]), &base).is_ok());
        // and then nothing more may go
        assert!(room.admit(&delete(&["a"]), &base).is_err());
        let mut tight = Room::new(&base, &cpu(2500)).unwrap();
        let why = tight.admit(&delete(&["b"]), &base).unwrap_err();
        assert!(why.contains("cpu held"), "{why}");
        // a larger replacement brings room of its own
        let mut bigger = delete(&["b"]);
        bigger.launch.push(crate::optimizer::NewNode {
            id: "new-0".into(),
            nodepool: "general".into(),
            instance_type: "m.xlarge".into(),
            zone: "z".into(),
            capacity_type: crate::catalog::CapacityType::Spot,
            price: 0.05,
            labels: Default::default(),
            allocatable: [("cpu".to_string(), "1".to_string())].into(),
            pods: vec![],
            fallbacks: vec![],
        });
        let mut with_launch = Room::new(&base, &cpu(2500)).unwrap();
        assert!(with_launch.admit(&bigger, &base).is_ok());
    }

    #[test]
    fn drift_and_expiry_are_never_held_back() {
        let base = ClusterSnapshot {
            nodes: vec![node("a", 4000).into()],
            ..ClusterSnapshot::default()
        };
        let mut room = Room::new(&base, &cpu(4000)).unwrap();
        let mut a = delete(&["a"]);
        a.reason = Reason::Drifted;
        assert!(room.admit(&a, &base).is_ok());
    }
}
