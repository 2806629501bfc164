//! NodePool limits as Karpenter's scheduler applies them, in both strategies
//! (fixtures/scenarios/limits/): a limit far above what the pods need holds no pod back, and a limit
//! that cannot hold them all is never exceeded.
//!
//! Karpenter keeps, per NodePool, the limit less the capacity of the nodes and NodeClaims it has. A
//! new NodeClaim may only use instance types that fit what is left, and once it takes its first pod
//! the largest of its types comes off (it may still launch as that one). Only the resources the
//! limit names count.

use std::path::PathBuf;
use std::time::Duration;

use joiner::catalog::Catalog;
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::{self, Plan, SolveSettings, Strategy, UnschedulableReason};
use joiner::sim::{self, Scenario, SimStrategy};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/limits")
}

fn catalog() -> Catalog {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/catalogs/test-small.json");
    Catalog::from_file(&path).expect("test-small catalog")
}

fn snapshot(name: &str) -> ClusterSnapshot {
    joiner::snapshot::load_snapshot(&dir().join(format!("{name}.yaml")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Both strategies' plans for `name`, each checked by joiner's own feasibility check (NodePool
/// limits included).
fn plans(name: &str) -> Vec<(Strategy, Plan)> {
    let (snap, catalog) = (snapshot(name), catalog());
    [Strategy::Greedy, Strategy::Milp]
        .into_iter()
        .map(|strategy| {
            let settings = SolveSettings {
                strategy,
                time_limit: Duration::from_secs(10),
                ..SolveSettings::default()
            };
            let plan = optimizer::solve(&snap, &catalog, &settings)
                .unwrap_or_else(|e| panic!("{name} {strategy:?}: {e}"));
            if let Err(v) = joiner::verify::verify(&snap, &catalog, &plan) {
                panic!("{name} {strategy:?}: the plan breaks a rule: {v:?}");
            }
            (strategy, plan)
        })
        .collect()
}

/// The vCPUs of a plan's new nodes in `pool`.
fn pool_cpus(plan: &Plan, pool: &str, catalog: &Catalog) -> u32 {
    plan.nodes
        .iter()
        .filter(|n| n.nodepool == pool)
        .map(|n| {
            catalog
                .instance_types
                .iter()
                .find(|t| t.name == n.instance_type)
                .map_or_else(
                    || panic!("{} not in the catalog", n.instance_type),
                    |t| t.vcpu,
                )
        })
        .sum()
}

#[test]
fn a_limit_far_above_the_need_holds_no_pod_back() {
    let catalog = catalog();
    for (strategy, plan) in plans("room-under-limit") {
        assert!(
            plan.unschedulable.is_empty(),
            "{strategy:?}: limits.cpu 100 leaves room, yet {:?}",
            plan.unschedulable
        );
        let zones: std::collections::BTreeSet<&str> =
            plan.nodes.iter().map(|n| n.zone.as_str()).collect();
        assert_eq!(zones.len(), 3, "{strategy:?}: a node per zone");
        assert!(pool_cpus(&plan, "general", &catalog) <= 100, "{strategy:?}");
    }
}

#[test]
fn a_limit_that_binds_is_honoured_as_karpenter_counts_it() {
    let catalog = catalog();
    for (strategy, plan) in plans("limit-binds") {
        let cpus = pool_cpus(&plan, "general", &catalog);
        assert!(cpus <= 20, "{strategy:?}: {cpus} vCPUs over limits.cpu 20");
        assert!(
            !plan.unschedulable.is_empty()
                && plan
                    .unschedulable
                    .iter()
                    .all(|u| u.reason == UnschedulableReason::NodepoolLimit),
            "{strategy:?}: ten 3-cpu pods do not fit 20 vCPUs: {:?}",
            plan.unschedulable
        );
        if strategy == Strategy::Greedy {
            // the first NodeClaim holds 16 cpu (big.4xlarge) against the limit, the second may only
            // be a 4-cpu type, and nothing is left for a third
            let mut types: Vec<&str> = plan
                .nodes
                .iter()
                .map(|n| n.instance_type.as_str())
                .collect();
            types.sort_unstable();
            assert_eq!(types, ["big.4xlarge", "medium.xlarge"], "{strategy:?}");
            assert_eq!(plan.unschedulable.len(), 4, "{strategy:?}");
        }
    }
}

#[test]
fn the_simulated_cluster_strands_no_pod_under_a_distant_limit() {
    let sc = Scenario::load(&dir().join("simulate-room-under-limit.yaml")).expect("scenario");
    for strategy in [SimStrategy::Greedy, SimStrategy::Milp] {
        let r = sim::run(&sc, strategy, sc.seed, &mut |_| {})
            .unwrap_or_else(|e| panic!("{strategy:?}: {e}"));
        let s = &r.summary;
        assert_eq!(
            (s.pods_started, s.unschedulable_pods, s.pending_at_end),
            (9, 0, 0),
            "{strategy:?}: every pod runs"
        );
        assert!(
            s.pending_seconds.p99 <= 2.0 * 41.0,
            "{strategy:?}: pods waited {} s",
            s.pending_seconds.p99
        );
    }
}
