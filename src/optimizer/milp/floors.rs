//! A third certified bound: the relaxation of `relax.rs` with what zone spreads force on every
//! zone.
//!
//! The relaxed bound drops zone spreads, and its LP buys nearly every node in the cheapest zones.
//! Yet a hard zone spread of N pods with max skew s over E eligible zones leaves at least ⌈(N −
//! (E−1)·s) / E⌉ of them in every eligible zone, whatever the plan (a zone above the emptiest one
//! by more than s never takes a pod, so N ≤ E·min + (E−1)·s). At 1,000 pods of the diverse mix that
//! is 3 of each Deployment's 20 zone-spread pods in us-east-1e, where the cheap types are not
//! offered. Here those floors are rows of the relaxed LP ([`super::master`]'s `domain_floor`): the
//! spread's classes merge only with classes of the same spreads, and each floor counts them per
//! zone.
//!
//! Zones apart cost bins: every zone is a bin set of its own. Zones where the relaxed LP's nodes
//! can be bought at no more cost ([`cheap_zones`]) are one domain, with the sum of their floors,
//! and only the dearer zones stay apart. Any such grouping is a relaxation (a plan that meets every
//! zone's floor meets their sum), so the LP's certified value (exact pricing or Farley's ratio, as
//! in `relax.rs`) bounds every plan that places the same pods.
//!
//! Only spreads whose pods can go nowhere but their eligible zones, with no matching pod running,
//! and whose every counted class owns the rule give floors; spreads whose classes overlap an
//! earlier one's are left out (floors of two spreads that count the same pod would count it twice).
//!
//! It runs after the plain relaxed LP on the bound's core, with what is left of its clock, and the
//! larger certified value is reported. The plain LP's patterns seed it, so its column generation
//! has mostly the dear zones' nodes left to price: at 1,000 pods of the diverse mix it certifies
//! in about 3 s (4.4-6.0 s from greedy's patterns alone).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::domain::labels::ZONE;

use super::super::problem::Problem;
use super::super::topology::Floor;
use super::super::SolveSettings;
use super::columns::{Bin, Column};
use super::relax::{self, Relaxed};
use super::{Generation, MilpError};

/// A hard zone spread's classes, its eligible zones and the pods each must get at least.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadFloor {
    pub members: Vec<usize>,
    pub eligible: BTreeSet<String>,
    pub least: u32,
}

/// The floors `p`'s hard zone spreads force when `demand[k]` pods of each class are placed, one per
/// distinct spread, spreads that share a class with an earlier one left out.
pub fn spread_floors(p: &Problem, demand: &[u32]) -> Vec<SpreadFloor> {
    // (members, eligible zones) -> the largest skew among the spread's owners, and the owners
    type Spreads<'p> = BTreeMap<(&'p [usize], &'p BTreeSet<String>), (i64, BTreeSet<usize>)>;
    let mut spreads: Spreads<'_> = BTreeMap::new();
    for g in &p.topology.spreads {
        let usable = g.hard
            && g.key == ZONE
            && g.members.contains(&g.owner)
            && !g.min_is_zero()
            && g.eligible.len() > 1
            && g.existing.values().all(|&n| n == 0);
        if usable {
            let (s, owners) = spreads
                .entry((g.members.as_slice(), &g.eligible))
                .or_insert((g.max_skew, BTreeSet::new()));
            *s = (*s).max(g.max_skew);
            owners.insert(g.owner);
        }
    }
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut out = Vec::new();
    for ((members, eligible), (s, owners)) in spreads {
        // kube-scheduler checks the skew only when it places an owner's pod: every pod counted must
        // be one, and a zone's last pod may come from the owner with the largest skew
        // a domain no member can reach (one the spread counts under nodeAffinityPolicy or
        // nodeTaintsPolicy Ignore) stays at its running count, so no floor fills it
        let reached: BTreeSet<String> = members.iter().flat_map(|&k| zones_of(p, k)).collect();
        if members.iter().any(|k| taken.contains(k))
            || !owners.iter().eq(members.iter())
            || !members.iter().all(|&k| zones_of(p, k).is_subset(eligible))
            || !eligible.is_subset(&reached)
        {
            continue;
        }
        let n: i64 = members.iter().map(|&k| i64::from(demand[k])).sum();
        let e = eligible.len() as i64;
        let least = (n - (e - 1) * s.max(0)).max(0);
        let least = (least + e - 1) / e;
        if least > 0 {
            taken.extend(members.iter().copied());
            out.push(SpreadFloor {
                members: members.to_vec(),
                eligible: eligible.clone(),
                least: least as u32,
            });
        }
    }
    out
}

/// Zones class `k` may use: its offerings' and its existing nodes'.
fn zones_of(p: &Problem, k: usize) -> BTreeSet<String> {
    let c = &p.classes[k];
    let mut zones: BTreeSet<String> = c
        .offerings
        .iter()
        .map(|&(s, o)| p.offering(s, o).zone.clone())
        .collect();
    zones.extend(
        c.existing
            .iter()
            .filter_map(|&e| p.existing[e].labels.get(ZONE).cloned()),
    );
    zones
}

/// Zones where every node the plain relaxed LP (`generated`, over `relaxed`) buys is offered as the
/// same type and capacity type at no more cost: these are one domain of the floored relaxation.
pub fn cheap_zones(relaxed: &Problem, generated: &Generation) -> BTreeSet<String> {
    let mut cheap: BTreeSet<String> = relaxed
        .shapes
        .iter()
        .flat_map(|s| s.offerings.iter().map(|o| o.zone.clone()))
        .collect();
    for (c, &v) in generated.columns.iter().zip(&generated.lp_values) {
        let Bin::New { shape, offering } = c.bin else {
            continue;
        };
        if v <= 1e-9 {
            continue;
        }
        let bought = relaxed.offering(shape, offering);
        let there: BTreeSet<&String> = relaxed.shapes[shape]
            .offerings
            .iter()
            .filter(|o| {
                o.capacity_type == bought.capacity_type && o.cost <= bought.cost * (1.0 + 1e-9)
            })
            .map(|o| &o.zone)
            .collect();
        cheap.retain(|z| there.contains(z));
    }
    cheap
}

/// The relaxation with floors for placing `demand[k]` pods of each class of `p`; None when no
/// spread gives a floor.
///
/// Spreads over the same zones share one floor per domain, their floors summed (their classes are
/// disjoint), and their classes merge by requests as in `relax.rs`, apart from other classes.
pub fn relaxation(p: &Problem, demand: &[u32], cheap: &BTreeSet<String>) -> Option<Relaxed> {
    let floors = spread_floors(p, demand);
    if floors.is_empty() {
        return None;
    }
    let sets: Vec<&BTreeSet<String>> = floors
        .iter()
        .map(|f| &f.eligible)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let set_of = |f: &SpreadFloor| sets.iter().position(|s| *s == &f.eligible).unwrap_or(0);
    let mut tags: Vec<Vec<usize>> = vec![Vec::new(); p.classes.len()];
    for f in &floors {
        for &k in &f.members {
            tags[k].push(set_of(f));
        }
    }
    for t in &mut tags {
        t.sort_unstable();
        t.dedup();
    }
    let (mut problem, of_class) = relax::relax_tagged(p, false, &tags);
    let joined = cheap.iter().cloned().collect::<Vec<_>>().join("+");
    let domain = |zone: &str| {
        if cheap.contains(zone) {
            joined.clone()
        } else {
            zone.to_string()
        }
    };
    let mut shapes = (*problem.shapes).clone();
    for o in shapes.iter_mut().flat_map(|s| s.offerings.iter_mut()) {
        o.zone = domain(&o.zone);
        o.labels.insert(ZONE.to_string(), o.zone.clone());
    }
    problem.shapes = Arc::new(shapes);
    for e in &mut problem.existing {
        if let Some(z) = e.labels.get(ZONE).map(|z| domain(z)) {
            e.labels.insert(ZONE.to_string(), z);
        }
    }
    problem.topology.floors = (0..sets.len())
        .map(|i| {
            let mut members: BTreeSet<usize> = BTreeSet::new();
            let mut least: BTreeMap<String, u32> = BTreeMap::new();
            for f in floors.iter().filter(|f| set_of(f) == i) {
                members.extend(f.members.iter().map(|&k| of_class[k]));
                for z in &f.eligible {
                    *least.entry(domain(z)).or_default() += f.least;
                }
            }
            Floor {
                key: ZONE.to_string(),
                members: members.into_iter().collect(),
                least,
            }
        })
        .collect();
    Some(Relaxed::new((problem, of_class), demand))
}

/// The floored relaxation's certified value within `seconds`, or None (no floor, or column
/// generation neither converged nor got Farley's ratio). `plain` is the plain relaxation of `p` and
/// its LP (`relax.rs`): its zones tell which are cheap, and its patterns seed this LP, which then
/// has only the dear zones' nodes left to price.
pub fn lower_bound(
    p: &Problem,
    demand: &[u32],
    plain: (&Relaxed, &Generation),
    settings: &SolveSettings,
    seconds: f64,
) -> Result<Option<f64>, MilpError> {
    let start = std::time::Instant::now();
    let cheap = cheap_zones(&plain.0.problem, plain.1);
    let Some(relaxed) = relaxation(p, demand, &cheap) else {
        return Ok(None);
    };
    let seeds = carried(p, plain, &relaxed);
    let bound = certified(
        &relaxed,
        &seeds,
        settings,
        seconds - start.elapsed().as_secs_f64(),
    );
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        ?cheap,
        classes = relaxed.problem.classes.len(),
        seeds = seeds.len(),
        ?bound,
        "floored relaxation"
    );
    bound
}

/// The certified value of the floored `relaxed`'s pattern LP (every zone's bins apart) within
/// `seconds`, `seeds` among its first patterns.
fn certified(
    relaxed: &Relaxed,
    seeds: &[Column],
    settings: &SolveSettings,
    seconds: f64,
) -> Result<Option<f64>, MilpError> {
    Ok(relaxed
        .certify(super::bins(&relaxed.problem), seeds, settings, seconds)?
        .1)
}

/// The plain LP's patterns as patterns of the floored relaxation: each plain class becomes one of
/// its floored classes with the same requests, one outside every floor where there is one (so the
/// floors start unmet, as nothing is known of them).
fn carried(p: &Problem, plain: (&Relaxed, &Generation), floored: &Relaxed) -> Vec<Column> {
    let counted: BTreeSet<usize> = floored
        .problem
        .topology
        .floors
        .iter()
        .flat_map(|f| f.members.iter().copied())
        .collect();
    let mut to: BTreeMap<usize, usize> = BTreeMap::new();
    for k in 0..p.classes.len() {
        let (r, f) = (plain.0.of_class[k], floored.of_class[k]);
        let e = to.entry(r).or_insert(f);
        if counted.contains(e) && !counted.contains(&f) {
            *e = f;
        }
    }
    plain
        .1
        .columns
        .iter()
        .filter_map(|c| {
            let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
            for &(r, n) in &c.counts {
                *counts.entry(*to.get(&r)?).or_default() += n;
            }
            Some(Column {
                bin: c.bin,
                counts: counts.into_iter().collect(),
                cost: c.cost,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::fixtures::{dear_zone_catalog, zone_spread_priced};
    use crate::optimizer::greedy;
    use crate::optimizer::state::{NodeKind, State};

    fn zones(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|z| z.to_string()).collect()
    }

    #[test]
    fn a_zone_spread_leaves_its_floor_in_every_eligible_zone() {
        // 12 pods, skew 1 over three zones: no zone below 4 (13 would allow 4, 4, 5; 11 allows 3,
        // 4, 4)
        let p = zone_spread_priced(12, &[("z1", 0.1), ("z2", 0.1), ("z3", 0.3)]);
        for (pods, least) in [(12, 4), (13, 4), (11, 3), (2, 0)] {
            let demand: Vec<u32> = p.classes.iter().map(|_| pods).collect();
            let floors = spread_floors(&p, &demand);
            assert_eq!(
                floors.iter().map(|f| f.least).collect::<Vec<_>>(),
                if least > 0 { vec![least] } else { vec![] },
                "{pods} pods"
            );
        }
        // two zones alike form one domain with the sum of their floors
        let demand: Vec<u32> = vec![12; p.classes.len()];
        let relaxed = relaxation(&p, &demand, &zones(&["z1", "z2"])).expect("a floor");
        let floors = &relaxed.problem.topology.floors;
        assert_eq!(floors.len(), 1);
        assert_eq!(
            floors[0].least,
            [("z1+z2".to_string(), 8), ("z3".to_string(), 4)].into()
        );
    }

    #[test]
    fn a_spread_counting_pods_that_do_not_own_it_gives_no_floor() {
        // kube-scheduler does not check the skew when it places a pod that only matches the
        // selector
        let mut p = zone_spread_priced(12, &[("z1", 0.1), ("z2", 0.1), ("z3", 0.3)]);
        p.classes.push(p.classes[0].clone());
        p.topology.spreads[0].members = vec![0, 1];
        assert!(spread_floors(&p, &[6, 6]).is_empty());
        // once the second class owns the rule too (skew 2), the larger skew counts: ceil((12 - 2
        // x 2) / 3)
        let mut second = p.topology.spreads[0].clone();
        second.owner = 1;
        second.max_skew = 2;
        p.topology.spreads.push(second);
        assert_eq!(
            spread_floors(&p, &[6, 6])
                .iter()
                .map(|f| f.least)
                .collect::<Vec<_>>(),
            vec![3]
        );
    }

    #[test]
    fn the_floored_bound_charges_the_dear_zone_its_floor_and_no_plan_beats_it() {
        // a node holds two pods; 4 of the 12 must go to z3 at three times the price: 2 x 0.3 + 4 x
        // 0.1
        let p = zone_spread_priced(12, &[("z1", 0.1), ("z2", 0.1), ("z3", 0.3)]);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let floored = relaxation(&p, &demand, &zones(&["z1", "z2"])).expect("a floor");
        let bound = certified(&floored, &[], &SolveSettings::default(), 5.0)
            .expect("solves")
            .expect("certified");
        assert!((bound - 1.0).abs() < 1e-5, "{bound}");
        // the same relaxation without its floors puts every pod where nodes are cheapest: 6 x 0.1
        let mut plain = relaxation(&p, &demand, &zones(&["z1", "z2"])).expect("a floor");
        plain.problem.topology.floors.clear();
        let (generated, _) = plain
            .certify(
                super::super::bins(&plain.problem),
                &[],
                &SolveSettings::default(),
                5.0,
            )
            .expect("solves");
        assert!(
            (generated.bound.expect("certified") - 0.6).abs() < 1e-6,
            "{:?}",
            generated.bound
        );
        let (state, left) = greedy::place_all(&p, State::new(&p), &p.class_demands());
        assert!(left.is_empty());
        let cost: f64 = state
            .nodes
            .iter()
            .map(|n| {
                if let NodeKind::New { shape, offering } = n.kind {
                    p.offering(shape, offering).cost
                } else {
                    0.0
                }
            })
            .sum();
        assert!(bound <= cost + 1e-9, "bound {bound} above a plan at {cost}");
    }

    #[test]
    fn every_plan_keeps_the_floors_of_the_relaxation_of_the_diverse_mix() {
        let snapshot = crate::workload::diverse(150, 11);
        let p = Problem::build(&snapshot, &dear_zone_catalog());
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let floors = spread_floors(&p, &demand);
        assert_eq!(floors.len(), 10, "one per zone-spread Deployment");
        let relaxed = relaxation(&p, &demand, &zones(&["z1", "z2"])).expect("floors");
        let (state, left) = greedy::place_all(&p, State::new(&p), &p.class_demands());
        assert!(left.is_empty());
        for f in &relaxed.problem.topology.floors {
            for (domain, &least) in &f.least {
                let held: usize = state
                    .nodes
                    .iter()
                    .filter(|n| {
                        n.labels
                            .get(ZONE)
                            .is_some_and(|z| domain.split('+').any(|d| d == z))
                    })
                    .flat_map(|n| n.placed.iter())
                    .filter(|(&k, _)| f.members.contains(&relaxed.of_class[k]))
                    .map(|(_, &c)| c)
                    .sum();
                assert!(
                    held >= least as usize,
                    "{held} pods in {domain}, floor {least}"
                );
            }
        }
        // and the bound stays below the optimizer's plan
        let settings = SolveSettings {
            time_limit: std::time::Duration::from_secs(5),
            ..Default::default()
        };
        let bound = certified(&relaxed, &[], &settings, 5.0)
            .expect("solves")
            .expect("certified");
        // seeded with the plain relaxation's patterns, the same LP certifies the same value
        let plain = Relaxed::of(&p, &demand, false).expect("the plain relaxation");
        let (generated, plain_bound) = plain
            .certify(
                super::super::bins_across_zones(&plain.problem),
                &[],
                &settings,
                5.0,
            )
            .expect("solves");
        let seeded = lower_bound(&p, &demand, (&plain, &generated), &settings, 5.0)
            .expect("solves")
            .expect("certified");
        assert!(
            (seeded - bound).abs() <= 1e-6 * bound,
            "seeded {seeded}, unseeded {bound}"
        );
        assert!(
            plain_bound.expect("certified") < bound - 1e-3,
            "the floors in z3 cost more than the plain relaxation's {plain_bound:?}"
        );
        let plan =
            crate::optimizer::solve(&snapshot, &dear_zone_catalog(), &settings).expect("plans");
        assert!(plan.unschedulable.is_empty());
        assert!(
            bound <= plan.objective + 1e-6,
            "bound {bound} above the plan's {}",
            plan.objective
        );
    }
}
