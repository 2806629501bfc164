//! The closing step after the neighbourhood search: where the
//! certified pattern LP leaves few patterns that could beat the best plan so far, HiGHS's integer
//! program over all of them (`milp::close`) gives the cheapest plan there is, or a lower bound that
//! holds for every plan, on the clock that is left. Its answer is replayed like any candidate and
//! kept when cheaper; its bound goes to the plan's certificate.

use std::time::{Duration, Instant};

use super::milp;
use super::problem::Problem;
use super::state::State;
use super::{best_candidate, score, Leftover, SolveSettings};

/// The share of the time left after the neighbourhood search that the closing step may use; the
/// rest is for replaying its answer.
const CLOSE_SHARE: f64 = 0.9;
/// Where the closing step can run, the share of the time left after the replays that the
/// neighbourhood search gets first: it lowers the best plan's objective, and with it how many
/// patterns the step must list.
const SEARCH_SHARE: f64 = 0.4;

/// Below this many seconds the step is not tried.
const MIN_CLOSE_SECONDS: f64 = 0.05;
/// A plan within this share of the LP's bound is proven enough: the step is skipped.
const PROVEN: f64 = 1e-4;

/// Past this relative gap between the best plan and the pattern LP, the patterns below the gap
/// are far more than a program can take (8 classes of the small bench mix at 31%: the time ran
/// out before the first level was listed): the neighbourhood search keeps all its time.
const CLOSE_WITHIN: f64 = 0.1;

/// When the neighbourhood search must end: where the closing step can run (the LP's duals are
/// certified and bound plans, and the best plan so far, scored `best`, is within [`CLOSE_WITHIN`]
/// of the LP's value), after [`SEARCH_SHARE`] of the time left; otherwise at `until`.
pub(super) fn search_until(
    p: &Problem,
    (duals, lp_bound, best): (Option<&[f64]>, Option<f64>, f64),
    (start, until): (Instant, Duration),
) -> Duration {
    let near = lp_bound.is_some_and(|b| best <= b * (1.0 + CLOSE_WITHIN));
    if duals.is_none() || !near || !milp::lp_bounds_plans(p) {
        return until;
    }
    let now = start.elapsed();
    now + until.saturating_sub(now).mul_f64(SEARCH_SHARE)
}

/// Runs the closing step on the best plan so far (`state`, `left`) when the pattern LP's duals
/// are certified (`duals`) and the plan places every pod: the plan, cheaper if the program found
/// one, and the bound it proves.
#[allow(clippy::too_many_arguments)]
pub(super) fn close_gap<'p>(
    p: &'p Problem,
    settings: &SolveSettings,
    (start, until): (Instant, Duration),
    model: &milp::Model_,
    (duals, lp_bound): (Option<&[f64]>, Option<f64>),
    demand: &[u32],
    (state, left): (State<'p>, Leftover),
    notes: &mut Vec<String>,
) -> (State<'p>, Leftover, Option<f64>) {
    let target = score(p, &state, &left);
    let open = lp_bound.is_none_or(|b| target > b * (1.0 + PROVEN) + 1e-9);
    let seconds = until.saturating_sub(start.elapsed()).as_secs_f64() * CLOSE_SHARE;
    let Some(duals) = duals.filter(|_| {
        open && left.is_empty() && milp::lp_bounds_plans(p) && seconds >= MIN_CLOSE_SECONDS
    }) else {
        return (state, left, None);
    };
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
            return (state, left, None);
        }
    };
    notes.push(format!(
        "reduced-cost enumeration below {:.4}: integer solve over {} patterns: {}",
        closed.target,
        closed.patterns,
        if closed.proven {
            "optimal"
        } else {
            "time-limit"
        }
    ));
    let Some(nodes) = closed.nodes else {
        return (state, left, Some(closed.bound));
    };
    let candidates = vec![("enumerated-mip".to_string(), nodes)];
    let (state, left, origin, _) = best_candidate(
        p,
        settings,
        (start, until),
        (&candidates, 1),
        state,
        left,
        notes,
    );
    if origin != "greedy" {
        let after = score(p, &state, &left);
        notes.push(format!("plan from {origin} ({target:.4} -> {after:.4})"));
    }
    (state, left, Some(closed.bound))
}
