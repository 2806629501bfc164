//! Volumes in every decision, each on a case with a hand-computed answer: a bound zonal volume pins
//! its pod; WaitForFirstConsumer claims follow their class's allowedTopologies and the plan says
//! where each volume goes; a consolidation that would move a pod away from its volume's zone is not
//! taken; claims that cannot be resolved make their pod (only) unschedulable with a reason naming
//! the object and field. A property test checks that no plan puts a pod outside its volumes' zones.
//!
//! Run with `cargo test --release --test volumes`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joiner::catalog::Catalog;
use joiner::disruption::timing::parse_timestamp;
use joiner::disruption::{consolidate, DisruptionPlan, DisruptionSettings, DisruptionStrategy};
use joiner::domain::labels::{NodeSelector, Operator, Requirement, ZONE};
use joiner::domain::volume::{ClaimPhase, PersistentVolume, PersistentVolumeClaim, PodVolume};
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::{self, Plan, SolveSettings, Strategy, UnschedulableReason};
use joiner::snapshot::{load_snapshot, parse_snapshot};
use proptest::prelude::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn catalog(name: &str) -> Catalog {
    Catalog::from_file(&root().join(format!("fixtures/catalogs/{name}.json"))).expect("catalog")
}

fn snapshot(path: &str) -> ClusterSnapshot {
    load_snapshot(&root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn solve(snap: &ClusterSnapshot, strategy: Strategy) -> Plan {
    let settings = SolveSettings {
        strategy,
        time_limit: Duration::from_secs(10),
        ..SolveSettings::default()
    };
    optimizer::solve(snap, &catalog("test-small"), &settings).expect("solve")
}

/// The zone and capacity type of the new node the plan puts `pod` on.
fn node_of<'p>(plan: &'p Plan, pod: &str) -> (&'p str, String) {
    let n = plan
        .nodes
        .iter()
        .find(|n| n.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} is on no new node: {plan:#?}"));
    (n.zone.as_str(), format!("{:?}", n.capacity_type))
}

const STRATEGIES: [Strategy; 2] = [Strategy::Milp, Strategy::Greedy];

#[test]
fn a_bound_zonal_volume_pins_its_pod_to_the_volume_s_zone() {
    let snap = snapshot("fixtures/scenarios/volumes/zonal-pin.yaml");
    for strategy in STRATEGIES {
        let plan = solve(&snap, strategy);
        assert_eq!(node_of(&plan, "default/db-0").0, "zone-b", "{strategy:?}");
        assert_eq!(node_of(&plan, "default/web-1").0, "zone-a", "{strategy:?}");
        assert!(
            (plan.cost_per_hour - 0.14).abs() < 1e-9,
            "{strategy:?}: {plan:#?}"
        );
        assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
        assert!(
            plan.volumes.is_empty(),
            "a bound volume is not placed: {:?}",
            plan.volumes
        );
    }
}

#[test]
fn without_its_volume_the_pod_takes_the_cheaper_zone() {
    // the control for the test above: the same pods with the volume left out
    let mut snap = snapshot("fixtures/scenarios/volumes/zonal-pin.yaml");
    for pod in &mut snap.pods {
        Arc::make_mut(pod).volumes.clear();
    }
    snap.resolve_volumes();
    let plan = solve(&snap, Strategy::Milp);
    assert_eq!(node_of(&plan, "default/db-0").0, "zone-a");
    assert!((plan.cost_per_hour - 0.08).abs() < 1e-9, "{plan:#?}");
}

#[test]
fn wait_for_first_consumer_claims_follow_allowed_topologies_and_the_plan_places_them() {
    let snap = snapshot("fixtures/scenarios/volumes/wait-for-first-consumer.yaml");
    for strategy in STRATEGIES {
        let plan = solve(&snap, strategy);
        assert_eq!(
            node_of(&plan, "default/cache-0").0,
            "zone-c",
            "{strategy:?}"
        );
        assert_eq!(
            node_of(&plan, "default/cache-2").0,
            "zone-c",
            "{strategy:?}"
        );
        assert_eq!(
            node_of(&plan, "default/cache-1").0,
            "zone-a",
            "{strategy:?}"
        );
        assert!(
            (plan.cost_per_hour - 0.24).abs() < 1e-9,
            "{strategy:?}: {plan:#?}"
        );
        let volumes: Vec<(&str, &str)> = plan
            .volumes
            .iter()
            .map(|v| (v.claim.as_str(), v.zone.as_str()))
            .collect();
        assert_eq!(
            volumes,
            [
                ("default/cache-2-scratch", "zone-c"),
                ("default/data-cache-0", "zone-c"),
                ("default/data-cache-1", "zone-a"),
            ],
            "{strategy:?}"
        );
    }
}

const NOW: &str = "2026-11-30T12:00:00Z";

fn disrupt(snap: &ClusterSnapshot, strategy: DisruptionStrategy) -> DisruptionPlan {
    let mut s = DisruptionSettings::new(parse_timestamp(NOW).unwrap());
    s.strategy = strategy;
    s.time_limit = Duration::from_secs(5);
    consolidate(snap, &catalog("test-f0"), &s).expect("consolidate")
}

/// Two on-demand nodes of the cheapest type: N0 in test-zone-1 with one 500m pod, N1 in test-zone-2
/// with two (fixtures/disruption/delete-emptier-cheapest-node.yaml). Without volumes, N0 is deleted
/// and its pod moves to N1.
fn two_zones() -> ClusterSnapshot {
    snapshot("fixtures/disruption/delete-emptier-cheapest-node.yaml")
}

/// Gives each named pod a bound EBS volume in `zone`.
fn with_volumes(mut snap: ClusterSnapshot, pods: &[(&str, &str)]) -> ClusterSnapshot {
    for (name, zone) in pods {
        let claim = format!("data-{name}");
        let pv = format!("pv-{name}");
        let pod = snap.pods.iter_mut().find(|p| p.name == *name).expect("pod");
        let namespace = pod.namespace.clone();
        Arc::make_mut(pod).volumes = vec![PodVolume {
            name: "data".into(),
            claim: claim.clone(),
            ephemeral: None,
        }];
        snap.storage.add_volume(PersistentVolume {
            name: pv.clone(),
            driver: Some("ebs.csi.aws.com".into()),
            node_affinity: zone_selector(zone),
        });
        snap.storage.add_claim(PersistentVolumeClaim {
            namespace,
            name: claim,
            volume_name: Some(pv),
            storage_class: None,
            phase: ClaimPhase::Bound,
            deleting: false,
        });
    }
    snap.resolve_volumes();
    snap
}

fn zone_selector(zone: &str) -> NodeSelector {
    NodeSelector {
        terms: vec![vec![Requirement {
            key: ZONE.into(),
            operator: Operator::In,
            values: vec![zone.into()],
            min_values: None,
        }]],
    }
}

fn deleted(plan: &DisruptionPlan) -> Vec<String> {
    let mut out: Vec<String> = plan
        .actions
        .iter()
        .flat_map(|a| a.delete.iter().cloned())
        .collect();
    out.sort();
    out
}

#[test]
fn consolidation_does_not_move_a_pod_away_from_its_volume_s_zone() {
    for strategy in [DisruptionStrategy::Milp, DisruptionStrategy::Baseline] {
        let free = disrupt(&two_zones(), strategy);
        assert_eq!(
            deleted(&free),
            ["ip-10-0-1-10.test"],
            "{strategy:?} (control)"
        );
        // N0's pod has its volume in test-zone-1: emptying N0 would strand it, so N1 goes instead
        // and its two pods (no volumes) move to N0: 1.5 of N0's 1.9 cpu, 3 of its 5 pods
        let pinned = with_volumes(two_zones(), &[("web-6c4d9-a1b2c", "test-zone-1")]);
        let plan = disrupt(&pinned, strategy);
        assert_eq!(
            deleted(&plan),
            ["ip-10-0-2-10.test"],
            "{strategy:?}: {plan:#?}"
        );
        // every pod's volume in its own node's zone: no node can be emptied
        let all = with_volumes(
            two_zones(),
            &[
                ("web-6c4d9-a1b2c", "test-zone-1"),
                ("web-6c4d9-d3e4f", "test-zone-2"),
                ("web-6c4d9-g5h6i", "test-zone-2"),
            ],
        );
        let plan = disrupt(&all, strategy);
        assert!(plan.actions.is_empty(), "{strategy:?}: {:?}", plan.actions);
    }
}

fn bad_input(name: &str) -> String {
    std::fs::read_to_string(root().join("fixtures/bad-input").join(name)).expect("fixture")
}

/// The pod `shop/stateful` is unschedulable for its volume with a message holding `fragments`,
/// and `shop/fine` is placed as if the broken pod were not there.
fn only_the_stateful_pod_is_unschedulable(file: &str, fragments: &[&str]) {
    let snap = parse_snapshot(&bad_input(file), file).unwrap_or_else(|e| panic!("{file}: {e}"));
    for strategy in STRATEGIES {
        let plan = solve(&snap, strategy);
        assert_eq!(
            plan.unschedulable.len(),
            1,
            "{file}: {:?}",
            plan.unschedulable
        );
        let u = &plan.unschedulable[0];
        assert_eq!(u.pod, "shop/stateful", "{file}");
        assert_eq!(
            u.reason,
            UnschedulableReason::Volume,
            "{file}: {}",
            u.message
        );
        for f in fragments {
            assert!(u.message.contains(f), "{file}: {:?} lacks {f:?}", u.message);
        }
        assert_eq!(node_of(&plan, "shop/fine").1, "Spot", "{file}: {plan:#?}");
    }
}

#[test]
fn a_claim_naming_a_missing_storage_class_names_the_class_and_field() {
    only_the_stateful_pod_is_unschedulable(
        "volume-missing-storage-class.yaml",
        &[
            "StorageClass gone",
            "PersistentVolumeClaim shop/data spec.storageClassName",
        ],
    );
}

#[test]
fn a_missing_claim_names_the_claim_and_field() {
    only_the_stateful_pod_is_unschedulable(
        "volume-missing-claim.yaml",
        &[
            "PersistentVolumeClaim shop/nowhere",
            "persistentVolumeClaim.claimName",
        ],
    );
}

#[test]
fn a_claim_bound_to_a_missing_volume_names_the_volume_and_field() {
    only_the_stateful_pod_is_unschedulable(
        "volume-missing-pv.yaml",
        &["PersistentVolume pv-gone", "spec.volumeName"],
    );
}

#[test]
fn a_volume_with_contradictory_node_affinity_names_the_volume_and_field() {
    only_the_stateful_pod_is_unschedulable(
        "volume-pv-contradictory-affinity.yaml",
        &["PersistentVolume pv-torn", "spec.nodeAffinity.required"],
    );
}

#[test]
fn malformed_storage_objects_are_errors_naming_object_and_field() {
    for (file, expected) in [
        (
            "volume-csinode-negative-count.yaml",
            "CSINode ip-10-0-1-10.test: spec.drivers[0].allocatable.count: negative count -3",
        ),
        (
            "volume-storage-class-bad-binding-mode.yaml",
            "StorageClass odd: volumeBindingMode: unsupported value \"Whenever\"",
        ),
    ] {
        let e = parse_snapshot(&bad_input(file), file).expect_err(file);
        assert!(e.to_string().starts_with(expected), "{file}: {e}");
    }
}

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// A snapshot of pending pods, each maybe with a volume: bound in a zone, or unbound in a
/// WaitForFirstConsumer class allowing some zones.
fn random_snapshot(pods: &[(u32, Option<(bool, u8)>)]) -> String {
    let mut docs = vec![
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\nspec: {}"
            .to_string(),
    ];
    for (i, (milli, volume)) in pods.iter().enumerate() {
        let mut volumes = String::new();
        if let Some((bound, zones)) = volume {
            let allowed: Vec<&str> = ZONES
                .iter()
                .enumerate()
                .filter(|(z, _)| zones & (1 << z) != 0)
                .map(|(_, z)| *z)
                .collect();
            let allowed = if allowed.is_empty() {
                vec!["zone-b"]
            } else {
                allowed
            };
            let claim_spec = if *bound {
                docs.push(format!(
                    "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-{i}}}\nspec:\n  csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{i}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - {{key: {ZONE}, operator: In, values: [{}]}}",
                    allowed[0]
                ));
                format!("volumeName: pv-{i}")
            } else {
                docs.push(format!(
                    "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: class-{i}}}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies:\n- matchLabelExpressions:\n  - {{key: {ZONE}, values: [{}]}}",
                    allowed.join(", ")
                ));
                format!("storageClassName: class-{i}")
            };
            docs.push(format!(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data-{i}, namespace: default}}\nspec: {{{claim_spec}}}"
            ));
            volumes = format!(
                "\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-{i}}}}}]"
            );
        }
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p-{i}, namespace: default}}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: {milli}m, memory: 256Mi}}}}}}]{volumes}"
        ));
    }
    docs.join("\n---\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_plan_places_a_pod_outside_its_volumes_zones(
        pods in prop::collection::vec(
            (100u32..1800, prop::option::of((any::<bool>(), 0u8..8))),
            1..10,
        )
    ) {
        let text = random_snapshot(&pods);
        let snap = parse_snapshot(&text, "random").expect("generated snapshot");
        for strategy in STRATEGIES {
            let plan = solve(&snap, strategy);
            for node in &plan.nodes {
                for pod in &node.pods {
                    let p = snap.pods.iter().find(|p| p.key() == *pod).expect("pod");
                    let labels = [(ZONE.to_string(), node.zone.clone())].into();
                    prop_assert!(
                        p.constraints.volume_requirements.iter().all(|s| s.matches(&labels)),
                        "{strategy:?}: {pod} on {} in {} against its volume\n{text}",
                        node.id,
                        node.zone
                    );
                }
            }
            prop_assert!(
                joiner::verify::verify(&snap, &catalog("test-small"), &plan).is_ok(),
                "{strategy:?}: the plan fails verification\n{text}"
            );
        }
    }
}
