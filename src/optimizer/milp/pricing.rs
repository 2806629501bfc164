//! Pricing one bin under the master's duals: the greedy fill, the depth-first exact search, or
//! HiGHS on the bin's knapsack, and the reduced cost of the pattern found. Column generation
//! (`mod.rs`) chooses which per round.

use std::time::Instant;

use super::super::problem::Problem;
use super::columns::{column_cost, pack, BinInfo, Column, NodeRules};
use super::master::Master;
use super::{exact, existing_host, prove};

/// Search nodes the exact pricer may spend per bin before giving up on proving its answer.
const EXACT_PRICING_NODES: usize = 20_000;

/// How [`price`] packs a bin.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pricing {
    /// The greedy fill: fast, proves nothing.
    Greedy,
    /// The depth-first exact search within [`EXACT_PRICING_NODES`]; a bin it does not settle is
    /// marked unsettled and answered with the best pattern found.
    Exact,
    /// HiGHS on the bin's knapsack, while the deadline allows (bins with a preload take the
    /// exact search instead).
    Proof(Instant),
}

/// The improving patterns the pricer finds for one bin, with their reduced costs, most improving
/// first: the best it finds, and with [`Pricing::Exact`] up to [`RUNNERS_UP`] more.
#[allow(clippy::too_many_arguments)]
pub(super) fn price(
    p: &Problem,
    rules: &NodeRules,
    master: &Master,
    b: &BinInfo,
    duals: &[f64],
    limit: &[u32],
    pricing: Pricing,
    unsettled: &mut bool,
) -> Vec<(f64, Column)> {
    let values = master.pod_values(p, b, duals);
    let existing_host = existing_host(p, rules, b);
    let bin_dual = master.bin_dual(p, b, duals);
    let improving = |counts: Vec<(usize, u32)>| -> Option<(f64, Column)> {
        if counts.is_empty() && b.preload.is_empty() {
            return None;
        }
        let counts = if b.preload.is_empty() {
            counts
        } else {
            b.with_preload(&counts)
        };
        let cost = column_cost(p, b, &counts);
        let gain: f64 = counts.iter().map(|&(k, n)| values[k] * f64::from(n)).sum();
        let rc = cost - bin_dual - gain;
        (rc < -1e-7).then_some((
            rc,
            Column {
                bin: b.bin,
                counts,
                cost,
            },
        ))
    };
    let mut fill = |limit: &[u32]| -> Vec<(f64, Column)> {
        let (best, runners_up) = if let Pricing::Greedy = pricing {
            (pack(p, rules, b, &values, limit, &existing_host), vec![])
        } else {
            // only patterns that would price in matter: at least the bin's cost less its dual
            let floor = if b.preload.is_empty() {
                b.cost - bin_dual
            } else {
                0.0
            };
            // a preload's value is outside the knapsack HiGHS is given
            let (best, settled, runners_up) = match pricing {
                Pricing::Proof(until) if b.preload.is_empty() => {
                    match prove::until(p, rules, b, &values, limit, &existing_host, until) {
                        Some(k) if k.upper <= floor + 1e-7 => (vec![], true, vec![]),
                        Some(k) => (k.best, k.proven, vec![]),
                        None => (vec![], false, vec![]),
                    }
                }
                _ => {
                    let packed = exact::pack_ranked(
                        p,
                        rules,
                        b,
                        &values,
                        limit,
                        &existing_host,
                        (floor, EXACT_PRICING_NODES),
                        RUNNERS_UP,
                    );
                    (packed.best, packed.settled, packed.runners_up)
                }
            };
            *unsettled |= !settled;
            (best, runners_up)
        };
        let mut out: Vec<(f64, Column)> = std::iter::once(best)
            .chain(runners_up)
            .filter_map(improving)
            .collect();
        // the knapsack ranks by value; the true cost (preferred pod terms) may rank otherwise
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    };
    let mut found = fill(limit);
    // the knapsack does not see preferred anti-affinity: also offer the pattern that keeps each
    // such class to one pod, and take whichever best prices better under the true cost
    if !b
        .classes
        .iter()
        .any(|&(k, _)| rules.prefers_alone[k] && limit[k] > 1)
    {
        return found;
    }
    let single: Vec<u32> = limit
        .iter()
        .enumerate()
        .map(|(k, &l)| if rules.prefers_alone[k] { l.min(1) } else { l })
        .collect();
    if let Some(capped) = fill(&single).into_iter().next() {
        match found.first_mut() {
            Some(plain) if plain.0 <= capped.0 => {}
            Some(plain) => *plain = capped,
            None => found.push(capped),
        }
    }
    found
}

/// Patterns the exact search displaced last that [`price`] offers besides its best, per bin. Column
/// generation ends each exact pass by adding the most improving patterns found, and one per bin was
/// 10-30 patterns a pass on the pinned candidate of 1,000 pods of the diverse mix, where a pass
/// costs about 0.16 s; with two more the candidate's generation ended on its own in 2.7-3.2 s
/// instead of 3.9-4.8, at about the same LP.
const RUNNERS_UP: usize = 2;

/// Each of `bins` priced under `duals` by `pricing` ([`price`]), the bins split into `threads` runs
/// of consecutive bins: per bin, whether the pricer left it unsettled and the improving pattern it
/// found there. A run whose thread panicked counts its bins unsettled with nothing found.
pub(super) fn price_all(
    (p, rules, master, limit): (&Problem, &NodeRules, &Master, &[u32]),
    bins: Vec<&BinInfo>,
    duals: &[f64],
    pricing: Pricing,
    threads: usize,
) -> Vec<(bool, Vec<(f64, Column)>)> {
    let ask = |b: &BinInfo| {
        let mut unsettled = false;
        let gain = price(p, rules, master, b, duals, limit, pricing, &mut unsettled);
        (unsettled, gain)
    };
    if threads < 2 || bins.len() < 2 {
        return bins.into_iter().map(ask).collect();
    }
    std::thread::scope(|scope| {
        let runs: Vec<_> = bins
            .chunks(bins.len().div_ceil(threads))
            .map(|run| {
                (
                    run.len(),
                    scope.spawn(move || run.iter().map(|b| ask(b)).collect::<Vec<_>>()),
                )
            })
            .collect();
        runs.into_iter()
            .flat_map(|(n, h)| h.join().unwrap_or_else(|_| vec![(true, vec![]); n]))
            .collect()
    })
}

/// An unsettled bin's best pattern enters the LP only when it holds at least this many pods. On
/// large nodes (hundreds of pods of a few classes) the search rarely settles and the greedy fill
/// stalls, so these patterns are what moves the LP; on small ones they only kept generation going
/// past the point where the integer solve had its time (100 pods of the benchmark mix: plans of
/// $0.3748-0.3890/h against a steady $0.3764/h without them).
pub(super) const UNPROVEN_MIN_PODS: u32 = 20;

/// Which patterns the exact pricer found, but did not prove best, on a bin it left open enter the
/// LP (every one of them prices in: each is a valid pattern with negative reduced cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unproven {
    /// Those of at least [`UNPROVEN_MIN_PODS`] pods, where the greedy fill stalls on large nodes.
    Large,
    /// All of them, and HiGHS's proof pass asks every bin the search leaves open: for an LP that
    /// only bounds (no integer solve follows), where an improving pattern left out keeps Farley's
    /// ratio high, and for a candidate's generation resumed once the exact search alone stops
    /// finding patterns (`lift::extend`).
    Any,
}

impl Unproven {
    pub(super) fn admits(self, pods: u32) -> bool {
        match self {
            Unproven::Large => pods >= UNPROVEN_MIN_PODS,
            Unproven::Any => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::milp::bins;
    use crate::optimizer::milp::master::AuxKind;

    #[test]
    fn pricing_bins_on_two_threads_answers_each_bin_as_one_thread_does_in_the_same_order() {
        let p = Problem::build(
            &crate::workload::diverse(120, 4),
            &crate::optimizer::fixtures::tiny_catalog(),
        );
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let all = bins(&p);
        let (rules, master) = (NodeRules::build(&p), Master::build(&p, &demand, &all));
        // duals that make pods worth more than the nodes that hold them, so most bins price in
        let mut duals = vec![0.0; master.rows.len()];
        for a in master
            .aux
            .iter()
            .filter(|a| matches!(a.kind, AuxKind::Unplaced(_)))
        {
            for &(r, _) in &a.rows {
                duals[r] = 0.1 * (r % 7 + 1) as f64;
            }
        }
        let ask = |threads| {
            price_all(
                (&p, &rules, &master, &demand),
                all.iter().collect(),
                &duals,
                Pricing::Exact,
                threads,
            )
        };
        let (one, two) = (ask(1), ask(2));
        assert_eq!(one.len(), all.len());
        let priced = one.iter().filter(|(_, gains)| !gains.is_empty()).count();
        assert!(
            priced > all.len() / 2,
            "{priced} of {} bins price in: too few to tell the runs apart",
            all.len()
        );
        let key = |answers: &[(bool, Vec<(f64, Column)>)]| {
            answers
                .iter()
                .map(|(open, gains)| {
                    (
                        *open,
                        gains
                            .iter()
                            .map(|(rc, c)| (rc.to_bits(), c.bin, c.counts.clone()))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&one), key(&two));
    }
}
