//! The decisions a frame shows, made by the decision core on one snapshot: the plan for the
//! pending pods (`optimizer::solve`, as `joiner solve`), what consolidation would do
//! (`disruption::consolidate`, as `joiner consolidate`) and the bound on re-packing the running
//! pods from scratch (`sim::suite::repack_bound`, as the day suite). Pure and synchronous; the
//! watch runs it off the UI thread. Nothing here writes anywhere.

use std::time::Duration;

use crate::catalog::Catalog;
use crate::disruption::timing::Timestamp;
use crate::disruption::{self, DisruptionSettings};
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, SolveSettings};
use crate::sim::suite::{repack_bound, repack_snapshot};

use super::model::{self, Frame, Inputs};

/// How long each of the three decisions may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub solve: Duration,
    pub consolidate: Duration,
    pub bound: Duration,
}

/// The frame of `snapshot` at `now`, with `notes` (unreadable objects) and a note for each
/// decision that failed.
pub fn frame(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: Timestamp,
    limits: Limits,
    mut notes: Vec<String>,
) -> Frame {
    let plan = if snapshot.pending_pods().next().is_some() {
        let settings = SolveSettings {
            time_limit: limits.solve,
            ..SolveSettings::default()
        };
        optimizer::solve(snapshot, catalog, &settings)
            .map_err(|e| notes.push(format!("pending pods' plan failed: {e}")))
            .ok()
    } else {
        None
    };
    let mut settings = DisruptionSettings::new(now);
    settings.time_limit = limits.consolidate;
    let consolidation = disruption::consolidate(snapshot, catalog, &settings)
        .map_err(|e| notes.push(format!("consolidation failed: {e}")))
        .ok();
    let bound = repack_bound(
        &repack_snapshot(snapshot),
        catalog,
        limits.bound.as_secs_f64(),
    )
    .map_err(|e| notes.push(format!("re-packing bound failed: {e}")))
    .ok();
    model::frame(
        Inputs {
            snapshot,
            catalog,
            now,
            plan: plan.as_ref(),
            consolidation: consolidation.as_ref(),
            repack_bound: bound,
        },
        notes,
    )
}
