//! The optimizer: turns a cluster snapshot and a catalog into a provisioning plan.
//!
//! Flow: `problem` builds the instance (pod classes, candidate node shapes per NodePool with their
//! offerings, existing nodes' free room, compatibility); `greedy` is Karpenter's
//! first-fit-decreasing baseline; `milp` prices node patterns by column generation and lets HiGHS
//! pick an integer set of them; `extract` turns either answer into a [`Plan`] with fallbacks;
//! `check` re-verifies the plan.

mod closing;
pub mod extract;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod greedy;
pub mod headroom;
pub mod highs_options;
pub mod improve;
pub mod lns;
pub mod menu;
pub mod milp;
mod pin;
pub mod plan;
pub mod preferred;
pub mod problem;
mod sets;
pub mod state;
pub mod topology;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;
use milp::SolverError;

pub use plan::{
    NewNode, OfferingRef, Plan, PlanStatus, SolverReport, Strategy, UnschedulableReason, VolumeZone,
};
use problem::Problem;
pub use problem::ShapeCache;
use state::State;

/// Limits and choices for one solve.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveSettings {
    pub strategy: Strategy,
    /// Wall-clock limit for the MILP; a feasible answer found by then is returned and flagged.
    pub time_limit: Duration,
    /// Relative gap at which the MILP stops.
    pub gap: f64,
    /// HiGHS threads (fixed per OS thread).
    pub threads: u32,
    /// How many fallback offerings each new node lists.
    pub max_fallbacks: usize,
    /// Whether to compute the certified lower bound (callers that only want the placement, such as
    /// the disruption re-solve and Karpenter's scheduling simulation, skip it).
    pub lower_bound: bool,
    /// A HiGHS failure to inject (fault-injection tests and drills); None in normal operation.
    pub fault: Option<SolverFault>,
    /// Neighbourhood searches run side by side, each on a thread of its own and each starting at
    /// another of its rankings; the best plan wins. 1 unless a core is known to be free.
    pub searches: u32,
}

impl Default for SolveSettings {
    fn default() -> Self {
        SolveSettings {
            strategy: Strategy::Milp,
            time_limit: Duration::from_secs(10),
            gap: 0.01,
            threads: 1,
            max_fallbacks: 20,
            lower_bound: true,
            fault: None,
            searches: 1,
        }
    }
}

/// A solver failure joiner can be told to suffer (`--inject-solver-fault`), so that tests and
/// operators' drills see the fallback path end to end: the plan flagged `fallback-greedy`, the
/// `joiner_solver_solves` metric and a Warning Event. The failures are HiGHS's own, not imitations
/// of them where that is possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SolverFault {
    /// Every model HiGHS is given carries one contradictory row (0 = 1), so HiGHS proves it
    /// infeasible.
    Infeasible,
    /// Every HiGHS solve fails as `Highs_run` returning an error status does.
    Error,
    /// The full provisioning model gets no time, so HiGHS stops at its limit before the first LP
    /// is solved; the relaxation's solves keep theirs (a long solve whose model is too big for its
    /// limit, with a plan candidate from the relaxation).
    TimeLimit,
}

/// Failures of the optimizer layer. A solver failure is not one of them: it falls back to greedy.
#[derive(Debug, thiserror::Error)]
pub enum OptimizerError {
    #[error("invalid settings: {0}")]
    Settings(String),
}

impl SolveSettings {
    pub fn validate(&self) -> Result<(), OptimizerError> {
        if self.time_limit.is_zero() {
            return Err(OptimizerError::Settings(
                "time limit must be positive".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.gap) {
            return Err(OptimizerError::Settings(format!(
                "gap {} is not in [0, 1)",
                self.gap
            )));
        }
        if self.threads == 0 {
            return Err(OptimizerError::Settings(
                "threads must be at least 1".into(),
            ));
        }
        if self.searches == 0 {
            return Err(OptimizerError::Settings(
                "searches must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// A plan plus what `solve-dump` needs to write the model.
pub struct Solved {
    pub plan: Plan,
    pub problem: Problem,
    pub model: Option<milp::Model_>,
    /// The plan came from the zone-pinned relaxation alone and the full model was not generated.
    pub model_skipped: bool,
}

/// Plans the cheapest placement of every pending pod in `snapshot` on existing room or new
/// offerings.
pub fn solve(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &SolveSettings,
) -> Result<Plan, OptimizerError> {
    solve_seeded(snapshot, catalog, settings, &[]).map(|s| s.plan)
}

pub(crate) type Leftover = BTreeMap<usize, (usize, UnschedulableReason)>;

/// [`solve`], with the problem and the model for `solve-dump`. Where the full model was not
/// generated (see [`pinned_alone`]), the model is its master over the seed patterns, built after
/// the solve and outside its clock.
pub fn solve_detailed(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &SolveSettings,
) -> Result<Solved, OptimizerError> {
    let mut solved = solve_seeded(snapshot, catalog, settings, &[])?;
    if solved.model_skipped {
        solved.model = Some(milp::dump::seed_model(&solved.problem));
    }
    Ok(solved)
}

/// Where a caller proposes to put pods: a node that exists, or an offering to launch.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedTarget {
    Existing(String),
    New {
        nodepool: String,
        instance_type: String,
        zone: String,
        capacity_type: crate::catalog::CapacityType,
    },
}

/// A node a caller proposes, `copies` times, with pods named by one pending member of their class.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedNode {
    pub target: SeedTarget,
    pub pods: Vec<(String, u32)>,
    pub copies: u32,
}

/// [`solve_detailed`] with a caller's proposal as one more candidate plan: it is replayed through
/// every rule like the MILP's own candidates and wins only if it scores best. Disruption decisions
/// pass the selection model's placement this way.
pub fn solve_seeded(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &SolveSettings,
    seed: &[SeedNode],
) -> Result<Solved, OptimizerError> {
    solve_with(snapshot, catalog, settings, seed, None)
}

/// [`solve`] for one of many snapshots that differ only in pods and nodes, whose shapes `shapes`
/// builds once (see [`ShapeCache`]).
pub fn solve_sharing(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &SolveSettings,
    shapes: &ShapeCache,
) -> Result<Plan, OptimizerError> {
    solve_with(snapshot, catalog, settings, &[], Some(shapes)).map(|s| s.plan)
}

fn solve_with(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &SolveSettings,
    seed: &[SeedNode],
    shapes: Option<&ShapeCache>,
) -> Result<Solved, OptimizerError> {
    settings.validate()?;
    let start = Instant::now();
    let p = Problem::build_with(snapshot, catalog, shapes);
    // what building took predicts what extracting the plan will (see EXTRACT_PER_BUILD)
    let until = finish_by(settings, start.elapsed());
    let todo = p.class_demands();
    let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        classes = p.classes.len(),
        shapes = p.shapes.len(),
        "problem built"
    );
    // the baseline holds preferences as Karpenter does; the optimizer starts from a plan that
    // leaves them to the objective (see greedy::seed)
    let (greedy_state, greedy_left) = match settings.strategy {
        Strategy::Greedy => greedy::place_all(&p, State::new(&p), &todo),
        Strategy::Milp => greedy::seed(&p, State::new(&p), &todo),
    };
    tracing::debug!(seconds = start.elapsed().as_secs_f64(), "greedy done");
    let placed_by_greedy: Vec<u32> = (0..p.classes.len())
        .map(|k| greedy_state.placed_of(k) as u32)
        .collect();
    // the bins are built once: the bound's LP and the MILP both read them
    let bins = if settings.lower_bound || settings.strategy == Strategy::Milp {
        milp::bins(&p)
    } else {
        vec![]
    };
    let bound_seconds = settings.time_limit.as_secs_f64().max(5.0);
    // the bound's LP needs only the problem and which pods are placed; on a second core it runs
    // while the MILP works, for the pods greedy places (what every plan places unless a pod fits
    // nowhere)
    let early =
        settings.lower_bound && settings.strategy == Strategy::Milp && !p.classes.is_empty();
    let (decided, early_bound) = std::thread::scope(|scope| {
        let handle = early.then(|| {
            scope.spawn(|| {
                let aggregated =
                    milp::bound::lower_bound(&p, &bins, &placed_by_greedy, bound_seconds);
                // the relaxed pattern LP gets what is left of the solve's clock on this core
                let left = settings.time_limit.as_secs_f64() * RELAXED_BOUND_SHARE
                    - start.elapsed().as_secs_f64();
                let relaxed = if left > MIN_RELAXED_SECONDS {
                    milp::relax::lower_bound(&p, &placed_by_greedy, settings, left)
                } else {
                    Ok(None)
                };
                (aggregated, relaxed)
            })
        });
        let decided = decide(
            &p,
            (snapshot, catalog),
            settings,
            (start, until),
            seed,
            greedy_state,
            greedy_left,
            &demand,
            &bins,
        );
        (
            decided,
            handle.map(|h| {
                h.join()
                    .unwrap_or((Err(SolverError::Panicked { what: "bound" }), Ok(None)))
            }),
        )
    });
    let Decided {
        state,
        left,
        status,
        model,
        model_skipped,
        vars,
        rows,
        mut notes,
        lp_bound,
        exact_bound,
    } = decided;
    tracing::debug!(seconds = start.elapsed().as_secs_f64(), "plan chosen");
    let placed: Vec<u32> = (0..p.classes.len())
        .map(|k| state.placed_of(k) as u32)
        .collect();
    let (bound, relaxed) = match early_bound {
        Some((b, relaxed)) if placed == placed_by_greedy => (Some(b), relaxed),
        _ if settings.lower_bound => (
            Some(milp::bound::lower_bound(&p, &bins, &placed, bound_seconds)),
            Ok(None),
        ),
        _ => (None, Ok(None)),
    };
    tracing::debug!(seconds = start.elapsed().as_secs_f64(), "bound done");
    let mut lower_bound = match bound {
        None => 0.0,
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            notes.push(format!("no lower bound: {e}"));
            0.0
        }
    };
    match relaxed {
        Ok(Some(b)) if b > lower_bound => {
            notes.push("lower bound from the relaxed pattern lp".into());
            lower_bound = b;
        }
        Ok(_) => {}
        Err(e) => notes.push(format!("no relaxed bound: {e}")),
    }
    // the converged pattern LP bounds plans that place every pod of the model; it also charges
    // ScheduleAnyway skew, which the plan's objective does not, so it is not used when any applies.
    // Columns priced out at -1e-7 may each leave that much on the table: step down by it per pod.
    // the pricer does not see preferred pod terms either (see milp::lp_bounds_plans)
    if let Some(b) =
        lp_bound.filter(|_| settings.lower_bound && left.is_empty() && milp::lp_bounds_plans(&p))
    {
        let b = milp::safe_pattern_bound(b, p.total_pods() as f64);
        if b > lower_bound {
            notes.push("lower bound from the pattern lp".into());
            lower_bound = b;
        }
    }
    if let Some(b) = exact_bound {
        if b > lower_bound {
            notes.push("lower bound from the enumerated integer program".into());
            lower_bound = b;
        }
    }
    let report = SolverReport {
        status,
        seconds: start.elapsed().as_secs_f64(),
        pod_classes: p.classes.len(),
        variables: vars,
        constraints: rows,
        gap: 0.0,
        notes,
    };
    let mut plan = extract::to_plan(
        &p,
        &state,
        &left,
        settings.strategy,
        report,
        lower_bound,
        settings.max_fallbacks,
    );
    plan.solver.gap = if plan.objective > 0.0 {
        ((plan.objective - plan.lower_bound) / plan.objective).max(0.0)
    } else {
        0.0
    };
    // "optimal" is a certified claim: the plan is within the gap target of the lower bound
    if settings.strategy == Strategy::Milp
        && plan.solver.status != PlanStatus::FallbackGreedy
        && plan.solver.gap <= settings.gap + 1e-9
    {
        plan.solver.status = PlanStatus::Optimal;
    }
    plan.volumes = extract::volume_zones(snapshot, &plan);
    plan.solver.seconds = start.elapsed().as_secs_f64();
    tracing::debug!(seconds = plan.solver.seconds, "plan extracted");
    Ok(Solved {
        plan,
        problem: p,
        model,
        model_skipped,
    })
}

/// The relaxed pattern LP's bound (`milp::relax`) must end by this share of the time limit, on the
/// bound's core after the aggregated LP, so that it does not hold up the plan.
const RELAXED_BOUND_SHARE: f64 = 0.9;
/// Below this many seconds left, the relaxed bound is not tried.
const MIN_RELAXED_SECONDS: f64 = 0.2;

/// What the strategy decided, before the bound.
struct Decided<'p> {
    state: State<'p>,
    left: Leftover,
    status: PlanStatus,
    model: Option<milp::Model_>,
    /// The full model was not generated (see [`pinned_alone`]).
    model_skipped: bool,
    vars: usize,
    rows: usize,
    notes: Vec<String>,
    /// The converged pattern LP's value, when column generation proved it.
    lp_bound: Option<f64>,
    /// The closing step's bound ([`closing::close_gap`]), already safe to report.
    exact_bound: Option<f64>,
}

/// Runs the chosen strategy: greedy's answer as is, or the MILP's candidates replayed through every
/// rule with the cheapest kept (greedy's plan among them).
#[allow(clippy::too_many_arguments)]
fn decide<'p>(
    p: &'p Problem,
    inputs: (&ClusterSnapshot, &Catalog),
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    seed: &[SeedNode],
    greedy_state: State<'p>,
    greedy_left: Leftover,
    demand: &[u32],
    bins: &[milp::columns::BinInfo],
) -> Decided<'p> {
    let plain = |state, left, status, notes| Decided {
        state,
        left,
        status,
        model: None,
        model_skipped: false,
        vars: 0,
        rows: 0,
        notes,
        lp_bound: None,
        exact_bound: None,
    };
    match settings.strategy {
        Strategy::Greedy => plain(greedy_state, greedy_left, PlanStatus::Greedy, vec![]),
        // nothing to place: an empty model is not worth a solver call (HiGHS calls it an error)
        Strategy::Milp if p.classes.is_empty() => {
            plain(greedy_state, greedy_left, PlanStatus::Feasible, vec![])
        }
        // the time limit covers the whole solve: what problem building and greedy used, and a share
        // for replay and fallbacks afterwards, come out of the MILP's budget
        Strategy::Milp => {
            let Relaxation { lifted, alone } =
                relaxed_candidates(p, inputs, settings, (start, until), demand);
            if let Some(run) = alone {
                return pinned_alone(
                    p,
                    settings,
                    (start, until),
                    (lifted, run),
                    seed,
                    (greedy_state, greedy_left),
                    bins,
                );
            }
            match milp::solve(p, &milp_settings(settings, (start, until)), &greedy_state, demand, bins.to_vec(), true) {
                Ok((mut answer, model)) => {
                    let mut notes = std::mem::take(&mut answer.notes);
                    // after the MILP's best guess, which wins a tie, when the MILP finished; first
                    // when the clock cut it short: the first candidate is always replayed, and at
                    // 10,000 pods of the diverse mix the MILP's guess took 0.9 s to replay and left
                    // no time for it
                    let at = if answer.timed_out { 0 } else { 1 };
                    let always = at + lifted.len() + usize::from(!seed.is_empty());
                    for (i, candidate) in lifted.into_iter().enumerate() {
                        answer.candidates.insert(answer.candidates.len().min(at + i), candidate);
                    }
                    if !seed.is_empty() {
                        answer.candidates.insert(0, ("seed".to_string(), seed_columns(p, seed)));
                    }
                    let (state, left, origin, replay) = best_candidate(p, settings, (start, until), (&answer.candidates, always), greedy_state, greedy_left, &mut notes);
                    notes.push(format!("plan from {origin}"));
                    // HiGHS's integer solve can run far past its limit in its root node (2.1 s over
                    // a 0.3 s limit on a neighbourhood of the scale-in benchmark): neighbourhoods
                    // use it only when it proved its answer over the whole problem in time
                    let integer = answer.status == milp::MipStatus::Optimal;
                    let (state, left) = search_neighbourhoods(p, settings, (start, until), bins, (state, left), (replay, integer), answer.lp_bound, &mut notes);
                    let exact_bound = closing::close_gap(p, settings, (start, until), &model, (answer.certified_duals.as_deref(), answer.lp_bound), demand, (&state, &left), &mut notes);
                    notes.push(format!("integer solve over the generated patterns: {}", answer.status));
                    let status = if answer.timed_out { PlanStatus::TimeLimit } else { PlanStatus::Feasible };
                    Decided { state, left, status, model: Some(model), model_skipped: false, vars: answer.variables, rows: answer.constraints, notes, lp_bound: answer.lp_bound, exact_bound }
                }
                Err(milp::MilpError::OutOfTime) if lifted.is_empty() => {
                    plain(greedy_state, greedy_left, PlanStatus::TimeLimit, vec!["time limit: reached before the first lp over the seed patterns; the greedy start stands".into()])
                }
                // the relaxation's candidates stand on their own: replayed against the greedy start
                Err(milp::MilpError::OutOfTime) => {
                    let mut notes = vec!["time limit: reached before the first lp over the seed patterns".to_string()];
                    let (state, left, origin, _) = best_candidate(p, settings, (start, until), (&lifted, lifted.len()), greedy_state, greedy_left, &mut notes);
                    notes.push(format!("plan from {origin}"));
                    plain(state, left, PlanStatus::TimeLimit, notes)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "milp failed; falling back to greedy");
                    // the fallback is the baseline's plan, the one `--strategy greedy` gives, not
                    // the optimizer's start (they differ where preferences apply, see greedy::seed)
                    let (state, left) = greedy::place_all(p, State::new(p), &p.class_demands());
                    plain(state, left, PlanStatus::FallbackGreedy, vec![format!("solver failed: {e}")])
                }
            }
        }
    }
}

/// Plans from the zone-pinned relaxation's candidates (and the caller's seed) alone, for problems
/// whose full model has more than `milp::MAX_CLASSES_FOR_INTEGER_SOLVE` classes: replayed, the
/// cheapest kept, and the neighbourhood search after. The full model's column generation is not
/// run there: its candidates did not win (at 1,000 pods of the diverse mix and 10 s its LP was
/// still at 5.0 $/h after 2.2 s, its roundings replayed at 5.8 or more against the pinned
/// candidate's 3.86) and its LP did not converge, so it gave no bound either. Its time goes to the
/// pinned candidate ([`PINNED_UNTIL`]), whose column generation at 1,000 pods and 10 s then stops
/// on its own (3.800 after 4.2 s, against 3.801 cut off at 3.7 s) and whose integer program then
/// proves a cheaper answer over those patterns (3.823-3.837 against 3.856-3.863): objective
/// 3.8383-3.8402 against 3.8562-3.8621 with the full model generated (`joiner bench`, two runs
/// each, the two binaries alternately). At 5,000 pods and 10 s the plans were the same, at 10,000
/// 0.03-0.08% dearer; at 5,000 pods and 2 s 20.43 against 20.54, at 10,000 and 4 s 40.62 against
/// 40.98. The status is `time-limit` unless that candidate's search ended on its own.
fn pinned_alone<'p>(
    p: &'p Problem,
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    (mut candidates, run): (Vec<Lifted>, milp::lift::Run),
    seed: &[SeedNode],
    (greedy_state, greedy_left): (State<'p>, Leftover),
    bins: &[milp::columns::BinInfo],
) -> Decided<'p> {
    if !seed.is_empty() {
        candidates.insert(0, ("seed".to_string(), seed_columns(p, seed)));
    }
    let mut notes = vec![format!("full model not generated: more than {} pod classes, planned from the zone-pinned relaxation", milp::MAX_CLASSES_FOR_INTEGER_SOLVE)];
    let (state, left, origin, replay) = best_candidate(
        p,
        settings,
        (start, until),
        (&candidates, candidates.len()),
        greedy_state,
        greedy_left,
        &mut notes,
    );
    notes.push(format!("plan from {origin}"));
    let (state, left) = search_neighbourhoods(
        p,
        settings,
        (start, until),
        bins,
        (state, left),
        (replay, false),
        None,
        &mut notes,
    );
    let status = if run.finished {
        PlanStatus::Feasible
    } else {
        PlanStatus::TimeLimit
    };
    Decided {
        state,
        left,
        status,
        model: None,
        model_skipped: true,
        vars: run.variables,
        rows: run.constraints,
        notes,
        lp_bound: None,
        exact_bound: None,
    }
}

/// A lifted candidate: its origin and its patterns with their copies.
type Lifted = (String, Vec<(milp::columns::Column, u32)>);

/// The relaxation's candidates; `alone` when they are the zone-pinned relaxation's (`pin`) and it
/// had the full model's time, which is then not generated ([`pinned_alone`]), with how its search
/// went.
#[derive(Default)]
struct Relaxation {
    lifted: Vec<Lifted>,
    alone: Option<milp::lift::Run>,
}

/// The relaxation's candidates (`milp::lift`): its column generation and zone program within
/// [`RELAXED_PRIMAL_SHARE`] of the time limit plus what building the problem and its greedy start
/// took, at most [`MAX_RELAXED_PRIMAL_SHARE`] (the pinned one longer, see [`PINNED_UNTIL`]); none
/// when the relaxation would not shrink the problem, its LP fails or neither rounding finds an
/// answer. Where zone rules allow, the relaxation is that of the problem with its zone rules turned
/// into pins (`pin`), and the plain one is tried only when that finds no pin or fails in the first
/// half of the time.
///
/// The relaxation's own greedy start costs about what the full one does (with the packing's
/// refusals remembered, `greedy::Claim`: 0.03 s and 0.16 s pinned at 1,000 and 5,000 pods of the
/// diverse mix, 0.46 s plain at 10,000) and comes out of the candidate's time, and the larger
/// problems' column generation and zone program need more time too. With a flat tenth of 10 s the
/// zone program got 0.22 s at 5,000 pods and the replay left 1,770 pods to the repair, and at
/// 10,000 pods building took longer than the tenth, so the candidate was not tried. Counting only
/// what building took beyond a twentieth of the limit, 5,000 pods were planned at 24.08 and 32.03
/// $/h in two runs, against 21.64 with all of it.
///
/// It is not tried when the tenth is under [`MIN_RELAXED_PRIMAL_SECONDS`] or
/// [`RELAXED_SECONDS_PER_POD`] per pod, nor where preferences price plans (soft spreads, preferred
/// pod terms), which the relaxation drops: in one run, 1,000 pods of the preferred mix at 10 s were
/// planned dearer with it (objective 5.70 against 5.42) than without. A tenth of a second pays at
/// short limits: objective 4.33 against 6.50 without it for 1,000 pods of the diverse mix at
/// `--time-limit 1`, 21.81 against 32.23 at 5,000 pods and 2 s, 42.30 against 64.66 at 10,000 and
/// 4 s (`joiner bench`, one run each, same binary with and without).
///
/// With its integer program (`milp::restricted`) and both relaxation candidates replayed, the
/// pinned candidate wins wherever the relaxation is tried on the diverse mix: objective 40.56
/// against 42.29 at 10,000 pods and 10 s, 41.91 against 42.74 at 4 s, 21.52 against 21.95 at 5,000
/// and 2 s, 4.24 against 4.33 at 1,000 and 1 s (one run each, same binary with and without the
/// threshold).
fn relaxed_candidates(
    p: &Problem,
    (snapshot, catalog): (&ClusterSnapshot, &Catalog),
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    demand: &[u32],
) -> Relaxation {
    let limit = settings.time_limit.as_secs_f64();
    let least = MIN_RELAXED_PRIMAL_SECONDS.max(RELAXED_SECONDS_PER_POD * p.total_pods() as f64);
    if limit * RELAXED_PRIMAL_SHARE < least || !milp::lp_bounds_plans(p) {
        return Relaxation::default();
    }
    let within = |share: f64| {
        (limit * share + start.elapsed().as_secs_f64()).min(limit * MAX_RELAXED_PRIMAL_SHARE)
    };
    let seconds = within(RELAXED_PRIMAL_SHARE);
    let began = Instant::now();
    // above the integer solve's classes the full model's time goes to the pinned candidate
    let alone = p.classes.len() > milp::MAX_CLASSES_FOR_INTEGER_SOLVE;
    let for_pinned = if alone {
        (until.as_secs_f64() * PINNED_UNTIL - start.elapsed().as_secs_f64())
            .max(within(PINNED_PRIMAL_SHARE))
    } else {
        seconds
    };
    let pinned = pin::candidates(snapshot, catalog, p, settings, for_pinned);
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        took = began.elapsed().as_secs_f64(),
        pinned = pinned.is_some(),
        "pinned candidates"
    );
    if let Some(pinned) = pinned {
        let run = alone.then_some(pinned.run);
        return Relaxation {
            lifted: pinned.named("zone-pinned-lp", "zone-pinned-lp-cover"),
            alone: run,
        };
    }
    // a pinned candidate that failed late leaves too little for the plain one
    let left = seconds - began.elapsed().as_secs_f64();
    if left < seconds / 2.0 {
        return Relaxation::default();
    }
    let lifted = milp::lift::candidates(p, demand, settings, left);
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        took = began.elapsed().as_secs_f64(),
        lifted = lifted.is_some(),
        "relaxed candidates"
    );
    Relaxation {
        lifted: lifted.map_or_else(Vec::new, |c| c.named("relaxed-lp", "relaxed-lp-cover")),
        alone: None,
    }
}

/// The share of the time limit the relaxation's candidate gets (column generation and zones),
/// besides its greedy start.
const RELAXED_PRIMAL_SHARE: f64 = 0.1;
/// When the full model has too many classes for its integer solve
/// (`milp::MAX_CLASSES_FOR_INTEGER_SOLVE`), the pinned candidate runs until this share of the time
/// the replays must end by ([`finish_by`]), counted from the solve's start, or for
/// [`PINNED_PRIMAL_SHARE`] of the limit plus what building took (at most
/// [`MAX_RELAXED_PRIMAL_SHARE`]) where that is longer, as at short limits. The full model is not
/// generated there ([`pinned_alone`]), and the pinned candidate's column generation and integer
/// program improve with time. At 0.8 its column generation at 1,000 pods of the diverse mix and
/// 10 s (0.6 of its time, about 4.3 s) was cut off in some runs just before it would have stopped
/// on its own, and the integer program over the patterns it had planned dearer: objective 3.8402,
/// 3.8533 and 3.8562 in three runs, against 3.8402, 3.8383 and 3.8402 at 0.9 (`joiner solve`, the
/// two binaries alternately). At 0.9, 10,000 pods at 10 s take 8.97 s (`joiner bench`), and the
/// short limits plan as well or better but at 10,000 pods and 4 s (40.64 against 40.51; 4.2598
/// against 4.2760 at 1,000 pods and 0.5 s, 4.2169 against 4.2384 at 1 s, 20.4261 both at 5,000 and
/// 2 s; one run each). Without the floor of [`PINNED_PRIMAL_SHARE`], 1,000 pods at 0.5 s planned at
/// 5.34 against 4.26: the deadline left the candidate about 0.12 s.
const PINNED_UNTIL: f64 = 0.9;
/// The pinned candidate's least share of the limit (see [`PINNED_UNTIL`]). With this share as its
/// whole time, at 1,000 pods and 10 s, a tenth planned at 4.02-4.09, a fifth at 3.99 and three
/// tenths at 3.96-3.99. At 100 pods, where the full model's integer solve runs, three tenths once
/// planned dearer than a tenth (0.3776 against 0.3764), so the pinned candidate keeps the relaxed
/// one's tenth there.
const PINNED_PRIMAL_SHARE: f64 = 0.3;
/// The most of the time limit the relaxation's candidate gets, greedy start included.
const MAX_RELAXED_PRIMAL_SHARE: f64 = 0.35;
/// Below this many seconds for it, the relaxation's candidate is not tried.
const MIN_RELAXED_PRIMAL_SECONDS: f64 = 0.02;
/// Nor when that tenth is under this many seconds per pending pod: at 5,000 pods of the diverse
/// mix and 1.5 s (30 µs per pod) its zone program got 0.1 s and left 1,669 pods to the repair, and
/// the full model, left with less time, did no better than the greedy start (51.94 $/h against
/// 32.35 without the candidate). From 40 µs it pays (see [`relaxed_candidates`]).
const RELAXED_SECONDS_PER_POD: f64 = 4e-5;

/// Replays the candidates (best guess first) and keeps the cheapest, greedy's plan included; the
/// slowest replay comes back with it.
///
/// The first `always` (at least one) are always replayed: the seed, the MILP's best guess when it
/// finished, and the relaxation's candidates, whose zone program's answer and cover win in turn (at
/// 1,000 pods of the diverse mix and 1 s, zones pinned, the cover replayed at 4.24 $/h against
/// 4.28, at 100 pods and 0.5 s the zone program's at 0.387 against 0.406) and whose replays are
/// cheap next to the solve (0.02 s at 1,000 pods, 0.18 s at 10,000). A later one is replayed when
/// three times the slowest replay so far would still end by `deadline` ([`finish_by`]; a replay's
/// repair grows with the pods it rejects: 0.6 s and 1.6 s for two candidates at 10,000 pods; with
/// the whole limit as the deadline, a third candidate whose repair placed 1,970 pods ended the
/// replays at 9.8-10.0 s of a 10 s limit and the extraction after them at 10.0-10.3 s), or, past
/// the deadline, while the replays have cost at most a fortieth of the limit: they are cheap next
/// to the solve at a few hundred pods, and HiGHS's integer solve can overrun its limit in its root
/// cut rounds.
fn best_candidate<'p>(
    p: &'p Problem,
    settings: &SolveSettings,
    (start, deadline): (Instant, Duration),
    (candidates, always): (&[Lifted], usize),
    greedy_state: State<'p>,
    greedy_left: Leftover,
    notes: &mut Vec<String>,
) -> (State<'p>, Leftover, String, Duration) {
    let mut best = (greedy_state, greedy_left, "greedy".to_string());
    let mut best_score = score(p, &best.0, &best.1);
    tracing::debug!(score = best_score, "greedy start scored");
    let replays_from = Instant::now();
    let mut slowest = Duration::ZERO;
    for (i, (origin, chosen)) in candidates.iter().enumerate() {
        let fits = start.elapsed() + 3 * slowest <= deadline
            || replays_from.elapsed() + 3 * slowest <= settings.time_limit / 40;
        if i >= always.max(1) && !fits {
            notes.push(format!(
                "time limit: {} candidate plans not replayed",
                candidates.len() - i
            ));
            break;
        }
        let began = Instant::now();
        // what the replay did not place goes to the greedy rules, which place it or explain why not
        let (replayed, rejected) = milp::replay(p, chosen);
        let (mut state, left) = greedy::repair(p, replayed, &rejected);
        improve::downsize(p, &mut state);
        improve::rezone(p, &mut state);
        slowest = slowest.max(began.elapsed());
        // the patterns do not model minValues; a plan that breaks it is not a candidate
        if !improve::min_values_hold(p, &state) {
            tracing::debug!(origin, "candidate breaks minValues");
            continue;
        }
        let s = score(p, &state, &left);
        let planned: f64 = chosen.iter().map(|(c, n)| c.cost * f64::from(*n)).sum();
        tracing::debug!(
            origin,
            score = s,
            planned,
            repaired = rejected.iter().map(|r| r.1).sum::<usize>(),
            rejected = ?rejected,
            seconds = began.elapsed().as_secs_f64(),
            "candidate replayed"
        );
        if s < best_score - 1e-9 {
            best_score = s;
            best = (state, left, origin.clone());
        }
    }
    (best.0, best.1, best.2, slowest)
}

/// The share of the time limit the replays and the neighbourhood search may run to, less
/// [`EXTRACT_PER_BUILD`] times what building the problem took; the rest is for extracting the plan
/// and its fallbacks.
const SEARCH_UNTIL: f64 = 0.95;
/// Extracting a plan with its fallbacks took 1.6-2.1 times what building its problem did at 10,000
/// pods of the diverse mix (0.22-0.30 s against 0.14-0.19 s, and `joiner bench` spent 0.08 s more):
/// with a flat twentieth of 10 s kept for it, a neighbourhood step that ended at 9.6 s put the
/// solve at 9.94 s and `joiner bench`'s clock at 10.02.
const EXTRACT_PER_BUILD: f64 = 2.5;

/// When the replays and the neighbourhood search must be done, counted from the solve's start.
fn finish_by(settings: &SolveSettings, built: Duration) -> Duration {
    settings
        .time_limit
        .mul_f64(SEARCH_UNTIL)
        .saturating_sub(built.mul_f64(EXTRACT_PER_BUILD))
}

/// Re-plans the plan's most wasteful nodes while time is left, unless the pattern LP already proves
/// the plan within the gap target.
#[allow(clippy::too_many_arguments)]
fn search_neighbourhoods<'p>(
    p: &'p Problem,
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    bins: &[milp::columns::BinInfo],
    (state, left): (State<'p>, Leftover),
    (replay, integer): (Duration, bool),
    lp_bound: Option<f64>,
    notes: &mut Vec<String>,
) -> (State<'p>, Leftover) {
    // the tolerance covers the LP's own rounding (a plan of 0.554 against an LP of 0.55399998)
    let before = score(p, &state, &left);
    if lp_bound.is_some_and(|b| before <= b * (1.0 + settings.gap) + 1e-6 * (1.0 + b.abs())) {
        return (state, left);
    }
    // the first search runs here, any others on threads of their own (none for a single search)
    let found = std::thread::scope(|scope| {
        let n = settings.searches as usize;
        let others: Vec<_> = (1..n)
            .map(|which| {
                let (state, left) = (state.clone(), left.clone());
                scope.spawn(move || {
                    lns::search(
                        p,
                        settings,
                        bins,
                        state,
                        left,
                        start,
                        until,
                        replay,
                        integer,
                        (which, n),
                    )
                })
            })
            .collect();
        let mut best = lns::search(
            p,
            settings,
            bins,
            state,
            left,
            start,
            until,
            replay,
            integer,
            (0, n),
        );
        let mut best_score = score(p, &best.state, &best.left);
        // a search that panicked is only a search less
        for other in others.into_iter().filter_map(|h| h.join().ok()) {
            let (steps, improved) = (best.steps + other.steps, best.improved + other.improved);
            let other_score = score(p, &other.state, &other.left);
            if other_score < best_score - 1e-9 {
                (best, best_score) = (other, other_score);
            }
            (best.steps, best.improved) = (steps, improved);
        }
        best
    });
    if found.steps > 0 {
        let after = score(p, &found.state, &found.left);
        notes.push(format!(
            "neighbourhood search: {} steps, {} improved the plan ({before:.4} -> {after:.4})",
            found.steps, found.improved
        ));
    }
    (found.state, found.left)
}

/// The share of the time left until the replays must end ([`finish_by`]) that the MILP gets; the
/// replays and the neighbourhood search have the rest. Counted to the time limit instead, the MILP
/// left the replays too little at short limits: 5,000 pods of the diverse mix at 2 s took 2.05-2.12
/// s, against 1.85 s this way for the same plan.
const MILP_SHARE: f64 = 0.7;

fn milp_settings(settings: &SolveSettings, (start, until): (Instant, Duration)) -> SolveSettings {
    let left = until.saturating_sub(start.elapsed()).mul_f64(MILP_SHARE);
    SolveSettings {
        time_limit: left.max(Duration::from_millis(100)),
        ..settings.clone()
    }
}

/// Objective of a state: node costs, preference penalties and unplaced pods.
pub(crate) fn score(p: &Problem, state: &State<'_>, left: &Leftover) -> f64 {
    let mut total = 0.0;
    for n in state.nodes.iter().filter(|n| !n.placed.is_empty()) {
        if let state::NodeKind::New { shape, offering } = n.kind {
            total += p.offering(shape, offering).cost;
        }
        total += n.preference_penalty(p);
    }
    total
        + preferred::penalty(p, state)
        + left
            .iter()
            .map(|(&k, (c, _))| *c as f64 * p.classes[k].unplaced_cost)
            .sum::<f64>()
}

/// The caller's proposal as patterns of this problem; entries naming unknown pods, nodes or
/// offerings are left out (the replay and repair place what they would have held).
fn seed_columns(p: &Problem, seed: &[SeedNode]) -> Vec<(milp::columns::Column, u32)> {
    use milp::columns::{Bin, Column};
    let class_of = p.class_of_pods();
    let mut out = Vec::new();
    for s in seed {
        let bin = match &s.target {
            SeedTarget::Existing(name) => p
                .existing
                .iter()
                .position(|e| &e.name == name)
                .map(Bin::Existing),
            SeedTarget::New {
                nodepool,
                instance_type,
                zone,
                capacity_type,
            } => p
                .find_offering(nodepool, instance_type, zone, *capacity_type)
                .map(|(shape, offering)| Bin::New { shape, offering }),
        };
        let Some(bin) = bin else { continue };
        let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
        for (pod, n) in &s.pods {
            if let Some(&k) = class_of.get(pod.as_str()) {
                *counts.entry(k).or_default() += n;
            }
        }
        if counts.is_empty() {
            continue;
        }
        let cost = pattern_cost(p, bin, bin.labels(p), counts.iter().map(|(&k, &n)| (k, n)));
        out.push((
            Column {
                bin,
                counts: counts.into_iter().collect(),
                cost,
            },
            s.copies,
        ));
    }
    out
}

/// A pattern's objective on `bin`: a new node's cost (keeping an existing node is free here) plus
/// each pod's preference penalty on a node with `labels`, and the node's preferred pod terms.
pub(crate) fn pattern_cost(
    p: &Problem,
    bin: milp::columns::Bin,
    labels: &crate::domain::Labels,
    counts: impl IntoIterator<Item = (usize, u32)>,
) -> f64 {
    use milp::columns::Bin;
    let (taints, base) = match bin {
        Bin::Existing(e) => (&p.existing[e].taints, 0.0),
        Bin::New { shape, offering } => (&p.shapes[shape].taints, p.offering(shape, offering).cost),
    };
    let counts: Vec<(usize, u32)> = counts.into_iter().collect();
    base + counts
        .iter()
        .map(|&(k, n)| f64::from(n) * p.preference_penalty(k, labels, taints))
        .sum::<f64>()
        + preferred::host_penalty(p, labels, &counts)
}
