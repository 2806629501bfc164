//! `joiner simulate` with StatefulSets and zonal volumes (fixtures/scenarios/volumes/stateful-*.yaml):
//! every StatefulSet pod ends Running in its volumes' zone and none is ever bound outside it, under
//! both strategies; and on a scenario computed by hand, the volumes are what keep one node per zone
//! after the scale-down (without them the same run ends on one node).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use joiner::domain::labels::ZONE;
use joiner::domain::ClusterSnapshot;
use joiner::sim::engine::World;
use joiner::sim::scenario::WorkloadKind;
use joiner::sim::{RunReport, Scenario, SimStrategy};

const BOTH: [SimStrategy; 2] = [SimStrategy::Milp, SimStrategy::Greedy];

fn scenario(name: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/scenarios/volumes")
        .join(format!("{name}.yaml"));
    Scenario::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs to the end; the report and the cluster as the run left it.
fn run(sc: &Scenario, strategy: SimStrategy) -> (RunReport, ClusterSnapshot) {
    let mut world = World::new(sc, strategy, sc.seed);
    world
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{} {strategy:?}: {e}", sc.name));
    (world.report(0.0), world.cluster().clone())
}

/// The zone of the volume bound to claim `namespace/claim`, if it has one.
fn volume_zone(snap: &ClusterSnapshot, claim: &str) -> Option<String> {
    let pv = snap.storage.claims.get(claim)?.volume_name.as_ref()?;
    let terms = &snap.storage.volumes.get(pv)?.node_affinity.terms;
    let zones: BTreeSet<&String> = terms
        .iter()
        .flatten()
        .filter(|r| r.key == ZONE)
        .flat_map(|r| &r.values)
        .collect();
    assert_eq!(zones.len(), 1, "a made volume is in one zone: {terms:?}");
    zones.into_iter().next().cloned()
}

/// StatefulSet pod key -> (its node's zone, its volumes' zones), for every StatefulSet pod.
fn stateful_pods(snap: &ClusterSnapshot) -> BTreeMap<String, (Option<String>, Vec<String>)> {
    let zone_of: BTreeMap<&str, Option<&String>> = snap
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.labels.get(ZONE)))
        .collect();
    snap.pods
        .iter()
        .filter(|p| p.owner_kind.as_deref() == Some("StatefulSet"))
        .map(|p| {
            let node_zone = p
                .node_name
                .as_deref()
                .and_then(|n| zone_of.get(n).copied().flatten())
                .cloned();
            let volumes = p
                .volumes
                .iter()
                .map(|v| {
                    let claim = format!("{}/{}", p.namespace, v.claim);
                    volume_zone(snap, &claim).unwrap_or_else(|| panic!("{claim} has no volume"))
                })
                .collect();
            (p.key(), (node_zone, volumes))
        })
        .collect()
}

#[test]
fn stateful_pods_end_running_in_their_volumes_zones() {
    let sc = scenario("stateful-day");
    for strategy in BOTH {
        let (r, snap) = run(&sc, strategy);
        let s = &r.summary;
        assert_eq!(s.volume_zone_violations, 0, "{strategy:?}");
        assert_eq!(
            (s.pending_at_end, s.unschedulable_pods),
            (0, 0),
            "{strategy:?}"
        );
        assert!(
            s.interruptions_handled >= 1 && s.pods_evicted > 0,
            "{strategy:?}: the scripted interruption ran: {s:?}"
        );
        let pods = stateful_pods(&snap);
        let names: Vec<&str> = pods.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "data/kafka-0",
                "data/kafka-1",
                "data/kafka-2",
                "data/postgres-0",
                "data/postgres-1",
                "data/postgres-2"
            ],
            "{strategy:?}: ordinals 0..3 of each, under their own names"
        );
        for (pod, (node_zone, volumes)) in &pods {
            let node_zone = node_zone
                .as_ref()
                .unwrap_or_else(|| panic!("{strategy:?}: {pod} is not running"));
            let want = if pod.contains("kafka") { 2 } else { 1 };
            assert_eq!(volumes.len(), want, "{strategy:?}: {pod}");
            for v in volumes {
                assert_eq!(
                    v, node_zone,
                    "{strategy:?}: {pod} runs away from its volume"
                );
            }
        }
        let postgres: BTreeSet<&String> = pods
            .iter()
            .filter(|(k, _)| k.contains("postgres"))
            .map(|(_, (_, v))| &v[0])
            .collect();
        assert_eq!(
            postgres.len(),
            3,
            "{strategy:?}: the zone spread put the first binding, and so each volume, in its own zone"
        );
        for gone in ["kafka-3", "kafka-4"] {
            for template in ["data", "logs"] {
                let claim = format!("data/{template}-{gone}");
                assert!(
                    volume_zone(&snap, &claim).is_some(),
                    "{strategy:?}: {claim} outlives its pod, with its volume"
                );
            }
        }
    }
}

/// fixtures/scenarios/volumes/stateful-pinned.yaml's header computes this.
#[test]
fn zonal_volumes_keep_one_node_per_zone_where_one_node_would_do() {
    let sc = scenario("stateful-pinned");
    let zones = ["zone-a", "zone-b", "zone-c"];
    for strategy in BOTH {
        let (r, snap) = run(&sc, strategy);
        let s = &r.summary;
        assert_eq!(
            (s.volume_zone_violations, s.pending_at_end, s.final_nodes),
            (0, 0, 3),
            "{strategy:?}: {s:?}"
        );
        assert!(
            (0.70..0.705).contains(&s.total_cost),
            "{strategy:?}: three nodes for 2 h and one for about 1 h, $0.10/h: {}",
            s.total_cost
        );
        let pods = stateful_pods(&snap);
        for (i, zone) in zones.iter().enumerate() {
            let (node_zone, volumes) = &pods[&format!("default/db-{i}")];
            assert_eq!(
                (node_zone.as_deref(), volumes.as_slice()),
                (Some(*zone), [zone.to_string()].as_slice()),
                "{strategy:?}: db-{i}'s volume was placed in {zone}, and the pod runs there"
            );
        }
        let node_zones: BTreeSet<&str> = snap
            .nodes
            .iter()
            .filter_map(|n| n.labels.get(ZONE).map(String::as_str))
            .collect();
        assert_eq!(node_zones, zones.into_iter().collect(), "{strategy:?}");
    }

    // the same run without the volumes: the three db pods share one node at the end
    let mut free = sc.clone();
    for w in &mut free.workloads {
        if let WorkloadKind::StatefulSet { claims, .. } = &mut w.kind {
            claims.clear();
        }
    }
    for strategy in BOTH {
        let (r, _) = run(&free, strategy);
        assert_eq!(
            (r.summary.final_nodes, r.summary.pending_at_end),
            (1, 0),
            "{strategy:?}: without volumes consolidation packs db onto one node"
        );
    }
}
