//! The closing step after the neighbourhood search: where the certified pattern LP leaves few
//! patterns that a cheaper plan could use, HiGHS's integer program over all of them
//! (`milp::close`) proves a lower bound that holds for every plan, on the clock that is left, and the
//! bound goes to the plan's certificate. The plan itself stays the one the search chose: on the day
//! suite the program's cheaper per-batch plans made the days dearer in evictions and launches
//! (docs/optimizer.md, section 5b), so a plan it finds is only reported in the notes.

use std::time::{Duration, Instant};

use super::milp;
use super::problem::Problem;
use super::state::State;
use super::{score, Leftover, SolveSettings};

/// The share of the time left until the replays must end that the step may use; the rest is for
/// HiGHS running past its limit.
const CLOSE_SHARE: f64 = 0.9;
/// Below this many seconds the step is not tried: HiGHS's root node alone can take longer.
const MIN_CLOSE_SECONDS: f64 = 0.2;
/// A plan within this share of the LP's bound is proven enough: the step is skipped.
const PROVEN: f64 = 1e-4;

/// Runs the closing step on the chosen plan (`state`, `left`) when a bound is asked for, the
/// pattern LP's duals are certified (`duals`) and the plan places every pod: the bound it proves,
/// if any.
#[allow(clippy::too_many_arguments)]
pub(super) fn close_gap(
    p: &Problem,
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    model: &milp::Model_,
    (duals, lp_bound): (Option<&[f64]>, Option<f64>),
    demand: &[u32],
    (state, left): (&State<'_>, &Leftover),
    notes: &mut Vec<String>,
) -> Option<f64> {
    let target = score(p, state, left);
    let open = lp_bound.is_none_or(|b| target > b * (1.0 + PROVEN) + 1e-9);
    let seconds = until.saturating_sub(start.elapsed()).as_secs_f64() * CLOSE_SHARE;
    // the step's only product is the bound: without one asked for, it is not run
    let wanted = settings.lower_bound && left.is_empty() && milp::lp_bounds_plans(p);
    let duals = duals.filter(|_| wanted && open && seconds >= MIN_CLOSE_SECONDS)?;
    let closed = match milp::close::close(p, settings, model, (duals, demand), target, seconds) {
        Ok(closed) => closed,
        Err(why) => {
            notes.push(format!(
                "reduced-cost enumeration: {}",
                match why {
                    Some(milp::close::Stop::Patterns) => "too many patterns below the gap",
                    Some(milp::close::Stop::Nodes) => "the search ran out of nodes",
                    Some(milp::close::Stop::Time) => "the time ran out",
                    None => "no finite dual bound",
                }
            ));
            return None;
        }
    };
    notes.push(format!(
        "reduced-cost enumeration below {:.4}: integer solve over {} patterns: {}{}",
        closed.target,
        closed.patterns,
        if closed.proven {
            "optimal"
        } else {
            "time-limit"
        },
        closed
            .objective
            .map_or(String::new(), |o| format!(", a plan at {o:.4}"))
    ));
    Some(closed.bound)
}
