//! What the targets share: a small catalog, a small snapshot, and "plan it", which runs the decision
//! core on whatever a parser accepted: inputs that read cleanly must never make it panic either.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::Duration;

use joiner::catalog::Catalog;
use joiner::disruption::{consolidate, DisruptionSettings, DisruptionStrategy};
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::{solve, SolveSettings, Strategy};

/// Inputs with at most this many pods also go through the MILP and the disruption decision; larger
/// ones only through greedy, so that one input stays in the milliseconds.
const FULL_DECISION_PODS: usize = 6;

pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        Catalog::from_json(
            include_str!("../../fixtures/catalogs/test-small.json"),
            "test-small.json",
        )
        .expect("bundled test catalog")
    })
}

pub fn small_snapshot() -> ClusterSnapshot {
    static SNAPSHOT: OnceLock<ClusterSnapshot> = OnceLock::new();
    SNAPSHOT
        .get_or_init(|| {
            joiner::snapshot::parse_snapshot(
                include_str!("../../fixtures/scenarios/zone-spread.yaml"),
                "zone-spread.yaml",
            )
            .expect("bundled scenario")
        })
        .clone()
}

/// Plans `snapshot` against `catalog`; only a panic is a finding (errors are answers).
pub fn plan(snapshot: ClusterSnapshot, catalog: &Catalog) {
    let greedy = SolveSettings {
        strategy: Strategy::Greedy,
        time_limit: Duration::from_secs(1),
        lower_bound: false,
        ..Default::default()
    };
    let Ok(plan) = solve(&snapshot, catalog, &greedy) else {
        return;
    };
    assert!(
        plan.cost_per_hour.is_finite() || plan.nodes.is_empty(),
        "greedy plan cost {}",
        plan.cost_per_hour
    );
    if snapshot.pods.len() > FULL_DECISION_PODS {
        return;
    }
    let milp = SolveSettings {
        time_limit: Duration::from_millis(300),
        ..Default::default()
    };
    let _ = solve(&snapshot, catalog, &milp);
    let now =
        joiner::disruption::timing::parse_timestamp("2026-01-01T00:00:00Z").expect("timestamp");
    let settings = DisruptionSettings {
        strategy: DisruptionStrategy::Milp,
        time_limit: Duration::from_millis(300),
        ..DisruptionSettings::new(now)
    };
    let _ = consolidate(&snapshot, catalog, &settings);
}
