//! A second certified bound: the pattern LP of a relaxation with far fewer pod classes.
//!
//! Karpenter's diverse mix at 1,000 pods has about 600 classes, because the pods of each Deployment
//! are tied together by its zone spread, zone affinity or hostname spread and differ in requests.
//! Column generation over that many classes does not converge within seconds, so the only bound
//! left is the aggregated LP (`bound.rs`), which lets pods share nodes fractionally and is far
//! below any plan. Here every rule that ties pods of different nodes together is dropped (zone
//! spread and zone (anti-)affinity, hostname spread, required hostname affinity, running pods'
//! rules toward the class) along with every preference, and the classes that are then alike (same
//! requests, same offerings, existing nodes and node-level terms) become one. Required hostname
//! anti-affinity is kept, with its classes as they are: it is what forces one node per pod of a
//! clique. The relaxed problem has a few dozen classes, column generation converges on it, and its
//! value is certified by exact pricing (or bounded by Farley's ratio) as in the full model. As
//! nothing but the bound waits for it, it runs in a mode of its own ([`super::Unproven::Any`]):
//! every improving pattern the exact search or HiGHS finds enters, HiGHS is asked about every bin
//! the search leaves open, and offerings that differ only in zone are one bin
//! ([`super::bins_across_zones`]).
//!
//! Dropping rows and nonnegative penalties only lowers the optimum, and a plan of the full problem
//! is a plan of the relaxation with the same node costs, so the relaxed pattern LP bounds every
//! plan that places the same pods. It charges what the full model's aggregated LP does not: that
//! pods come in whole per node, in every resource at once. What is left of its clock goes to the
//! same relaxation with the zone spreads' floors per zone (`floors.rs`), seeded with this LP's
//! patterns.

use std::collections::BTreeMap;

use crate::domain::labels::HOSTNAME;

use super::super::greedy;
use super::super::problem::{PodClass, Problem};
use super::super::sets::DisjointSets;
use super::super::state::State;
use super::super::topology::{SpreadGroup, Topology};
use super::super::SolveSettings;
use super::MilpError;

/// The relaxation of `p` and, per class of `p`, its class there. With `host_caps`, the classes
/// hostname spreads count merge only among themselves and keep a per-node cap ([`capped_spreads`]),
/// and each family of them that spreads tie together one more ([`family_caps`]).
pub fn relax(p: &Problem, host_caps: bool) -> (Problem, Vec<usize>) {
    relax_tagged(p, host_caps, &[])
}

/// [`relax`], where two classes merge only when their `tags` (per class of `p`; empty: none) agree.
pub fn relax_tagged(p: &Problem, host_caps: bool, tags: &[Vec<usize>]) -> (Problem, Vec<usize>) {
    let kept: Vec<_> = p
        .topology
        .affinities
        .iter()
        .filter(|r| r.anti && r.key == HOSTNAME)
        .cloned()
        .collect();
    let mut pinned = vec![false; p.classes.len()];
    for r in &kept {
        pinned[r.owner] = true;
        for &m in &r.members {
            pinned[m] = true;
        }
    }
    let host = if host_caps {
        host_spreads(p)
    } else {
        Vec::new()
    };
    let mut classes: Vec<PodClass> = Vec::new();
    let mut by_key: BTreeMap<MergeKey, usize> = BTreeMap::new();
    let mut of_class = Vec::with_capacity(p.classes.len());
    for (k, c) in p.classes.iter().enumerate() {
        let target = if pinned[k] {
            classes.push(c.clone());
            classes.len() - 1
        } else {
            match by_key.entry(merge_key(
                c,
                host.iter().any(|(members, _)| members.contains(&k)),
                tags.get(k).cloned().unwrap_or_default(),
            )) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    classes[*e.get()].pods.extend(c.pods.iter().cloned());
                    *e.get()
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    classes.push(unruled(c));
                    *e.insert(classes.len() - 1)
                }
            }
        };
        of_class.push(target);
    }
    let mut affinities = kept;
    for r in &mut affinities {
        r.owner = of_class[r.owner];
        r.members = r.members.iter().map(|&m| of_class[m]).collect();
    }
    let n = classes.len();
    let topology = Topology {
        spreads: capped_spreads(&host, &of_class),
        affinities,
        inverse_forbidden: vec![Vec::new(); n],
        preferred_of: vec![Vec::new(); n],
        preferred_counting: vec![Vec::new(); n],
        ..Default::default()
    };
    let mut existing = p.existing.clone();
    for e in &mut existing {
        let mut home: BTreeMap<usize, u32> = BTreeMap::new();
        for &(k, c) in &e.home {
            *home.entry(of_class[k]).or_default() += c;
        }
        e.home = home.into_iter().collect();
    }
    let relaxed = Problem {
        region: p.region.clone(),
        dims: p.dims.clone(),
        classes,
        shapes: p.shapes.clone(),
        existing,
        pools: p.pools.clone(),
        topology,
        weights: p.weights.clone(),
        rejected: Vec::new(),
        label_groups: p.label_groups.clone(),
        by_price: p.by_price.clone(),
        by_cost: p.by_cost.clone(),
    };
    (relaxed, of_class)
}

/// Whether the relaxation can say more than `p`'s own pattern LP: it has at most three quarters of
/// the classes, or `p`'s LP cannot bound plans at all (soft spreads, preferred pod terms).
pub fn worth_it(p: &Problem, relaxed: &Problem) -> bool {
    4 * relaxed.classes.len() <= 3 * p.classes.len() || !super::lp_bounds_plans(p)
}

/// The relaxed pattern LP's certified value for placing `demand[k]` pods of each class of `p`,
/// within `seconds`: `Ok(None)` when column generation neither converged nor got Farley's ratio.
pub fn lower_bound(
    p: &Problem,
    demand: &[u32],
    settings: &SolveSettings,
    seconds: f64,
) -> Result<Option<f64>, MilpError> {
    let start = std::time::Instant::now();
    let Some(relaxed) = Relaxed::of(p, demand, false) else {
        return Ok(None);
    };
    let (generated, plain) = relaxed.certify(
        super::bins_across_zones(&relaxed.problem),
        &[],
        settings,
        seconds,
    )?;
    // what is left goes to the relaxation with the zone spreads' floors, seeded by this LP. It
    // took 1.2-1.6 times as long as this one (5,000 and 1,000 pods of the diverse mix); with less
    // left it would not finish and only hold the solve at its join
    let took = start.elapsed().as_secs_f64();
    let left = seconds - took;
    let floored = match plain {
        Some(_) if left > took.max(MIN_FLOORED_SECONDS) => {
            super::floors::lower_bound(p, demand, (&relaxed, &generated), settings, left)
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "no floored bound");
                    None
                })
        }
        _ => None,
    };
    Ok(plain.into_iter().chain(floored).reduce(f64::max))
}

/// Below this the floored relaxation (`floors.rs`) is not tried: its column generation prices a
/// bin set per dear zone.
const MIN_FLOORED_SECONDS: f64 = 0.5;

/// The relaxation of a problem set up for column generation: what the bound and the plan candidate
/// (`lift.rs`) both start from.
pub struct Relaxed {
    pub problem: Problem,
    /// Per class of the full problem, its class in the relaxation.
    pub of_class: Vec<usize>,
    /// Pods to place per relaxed class: the full problem's demand summed over merged classes.
    pub demand: Vec<u32>,
}

impl Relaxed {
    /// The relaxation of `p` for placing `demand[k]` pods of each class, when it is [`worth_it`];
    /// `host_caps` as for [`relax`]. The plan candidate keeps the caps and the bound does not: with
    /// them its classes grow (at 1,000 pods of the diverse mix, zones pinned, 622 classes become
    /// 179 rather than 149), and at 10,000 pods its LP was not certified within the solve (36.49
    /// reported, the aggregated bound, against 37.86), for a tightening of 0.01% where it was
    /// (3.7107 to 3.7110).
    pub fn of(p: &Problem, demand: &[u32], host_caps: bool) -> Option<Relaxed> {
        let (problem, of_class) = relax(p, host_caps);
        worth_it(p, &problem).then(|| Relaxed::new((problem, of_class), demand))
    }

    /// A relaxation (as [`relax`] returns it) for placing `demand[k]` pods of each class of the
    /// full problem.
    pub fn new((problem, of_class): (Problem, Vec<usize>), demand: &[u32]) -> Relaxed {
        let mut merged = vec![0u32; problem.classes.len()];
        for (k, &d) in demand.iter().enumerate() {
            merged[of_class[k]] += d;
        }
        Relaxed {
            problem,
            of_class,
            demand: merged,
        }
    }

    /// Column generation over `bins` in the bound's own mode ([`super::Unproven::Any`]), `seeds`
    /// among the first patterns, within `seconds`: the LP and its certified value made safe to
    /// report, if any (see the module's notes).
    pub fn certify(
        &self,
        bins: Vec<super::columns::BinInfo>,
        seeds: &[super::columns::Column],
        settings: &SolveSettings,
        seconds: f64,
    ) -> Result<(super::Generation, Option<f64>), MilpError> {
        let settings = SolveSettings {
            time_limit: std::time::Duration::from_secs_f64(seconds.max(0.05)),
            lower_bound: true,
            ..settings.clone()
        };
        let generated = super::columns_and_bound_seeded(
            &self.problem,
            &settings,
            &self.seed(),
            &self.demand,
            (super::Unproven::Any, 1),
            bins,
            seeds,
        )?;
        let pods: u32 = self.demand.iter().sum();
        let bound = generated
            .bound
            .map(|b| super::safe_pattern_bound(b, f64::from(pods)));
        Ok((generated, bound))
    }

    /// The greedy start column generation seeds its patterns from.
    pub fn seed(&self) -> State<'_> {
        let todo: Vec<(usize, usize)> = self
            .demand
            .iter()
            .enumerate()
            .filter(|(_, &d)| d > 0)
            .map(|(k, &d)| (k, d as usize))
            .collect();
        greedy::seed(&self.problem, State::new(&self.problem), &todo).0
    }
}

/// What makes two classes alike once the rules between nodes are gone.
type MergeKey = (
    Vec<i64>,
    Vec<(usize, usize)>,
    Vec<usize>,
    usize,
    String,
    bool,
    Vec<usize>,
);

/// `host_capped`: a hard hostname spread counts the class; such classes merge only among
/// themselves. `tag`: what else must agree (see [`relax_tagged`]).
fn merge_key(c: &PodClass, host_capped: bool, tag: Vec<usize>) -> MergeKey {
    let k = &c.constraints;
    // the node-level terms decide fit and penalties; pod labels and rules between pods no longer
    // matter
    let terms = format!(
        "{:?}",
        (
            &k.node_selector,
            &k.node_affinity,
            &k.volume_requirements,
            &k.preferred_node_affinity,
            &k.tolerations,
            &k.host_ports
        )
    );
    (
        c.req.clone(),
        c.offerings.clone(),
        c.existing.clone(),
        c.group,
        terms,
        host_capped,
        tag,
    )
}

/// The hard hostname spreads of `p` as (members, max skew), one per set of members: every owner of
/// a Deployment's spread has a group of its own, all alike.
fn host_spreads(p: &Problem) -> Vec<(Vec<usize>, i64)> {
    let mut seen: BTreeMap<&[usize], i64> = BTreeMap::new();
    for g in p.topology.spreads.iter().filter(|g| g.hard && g.is_host()) {
        let skew = seen.entry(g.members.as_slice()).or_insert(g.max_skew);
        *skew = (*skew).min(g.max_skew);
    }
    seen.into_iter().map(|(m, s)| (m.to_vec(), s)).collect()
}

/// A per-node cap for each relaxed class that merges pods hostname spreads count: a node holds at
/// most max skew pods of each spread, so at most their sum of the merged class. The rule between
/// nodes is gone, the single-node one it implies is kept: without it the relaxed patterns put more
/// pods of one request on a node than its spreads allow, and at 1,000 pods of the diverse mix,
/// zones pinned, the lifting left 24-25 such pods for the greedy repair (0.15 $/h of a 3.84 $/h
/// candidate).
fn capped_spreads(host: &[(Vec<usize>, i64)], of_class: &[usize]) -> Vec<SpreadGroup> {
    let mut caps: BTreeMap<usize, i64> = BTreeMap::new();
    for (members, skew) in host {
        let merged: std::collections::BTreeSet<usize> =
            members.iter().map(|&m| of_class[m]).collect();
        for r in merged {
            *caps.entry(r).or_default() += skew;
        }
    }
    let mut out: Vec<SpreadGroup> = caps
        .iter()
        .map(|(&r, &cap)| host_cap(vec![r], cap))
        .collect();
    out.extend(family_caps(host, of_class, &caps));
    out
}

/// A hard hostname spread of `members` with skew `cap` and nothing running: at most `cap` of their
/// pods per node.
fn host_cap(members: Vec<usize>, cap: i64) -> SpreadGroup {
    SpreadGroup {
        owner: members[0],
        members,
        key: HOSTNAME.to_string(),
        max_skew: cap,
        hard: true,
        min_domains: None,
        existing: BTreeMap::new(),
        eligible: std::collections::BTreeSet::new(),
    }
}

/// One cap over each family of relaxed classes that hostname spreads tie together: a node holds at
/// most max skew pods of each spread, and every pod of the family's classes is counted by one of
/// its spreads, so at most their sum of the family. The per-class caps alone let a node hold the
/// sum over classes, which a spread whose pods differ in requests (several relaxed classes) never
/// allows.
fn family_caps(
    host: &[(Vec<usize>, i64)],
    of_class: &[usize],
    caps: &BTreeMap<usize, i64>,
) -> Vec<SpreadGroup> {
    let mut sets = DisjointSets::new(of_class.iter().max().map_or(0, |&m| m + 1));
    for (members, _) in host {
        if let Some((&first, rest)) = members.split_first() {
            for &m in rest {
                sets.join(of_class[first], of_class[m]);
            }
        }
    }
    let mut families: BTreeMap<usize, (Vec<usize>, i64, i64)> = BTreeMap::new(); // root -> (classes, cap, sum of class caps)
    for (&r, &cap) in caps {
        let f = families.entry(sets.root(r)).or_default();
        f.0.push(r);
        f.2 += cap;
    }
    for (members, skew) in host {
        if let Some(f) = members
            .first()
            .and_then(|&m| families.get_mut(&sets.root(of_class[m])))
        {
            f.1 += skew;
        }
    }
    families
        .into_values()
        .filter(|(classes, cap, sum)| classes.len() > 1 && cap < sum)
        .map(|(classes, cap, _)| host_cap(classes, cap))
        .collect()
}

/// `c` with the rules between pods cleared (only the topology reads them; cleared for clarity in
/// dumps).
fn unruled(c: &PodClass) -> PodClass {
    let mut out = c.clone();
    let k = &mut out.constraints;
    k.labels.clear();
    k.spread.clear();
    k.pod_affinity.clear();
    k.pod_anti_affinity.clear();
    k.preferred_pod_affinity.clear();
    k.preferred_pod_anti_affinity.clear();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::fixtures::two_zone_catalog as two_zones;

    #[test]
    fn classes_tied_only_by_rules_between_nodes_merge_and_anti_affinity_cliques_stay() {
        let p = Problem::build(&crate::workload::diverse(200, 3), &two_zones());
        let (r, of_class) = relax(&p, false);
        assert!(
            r.classes.len() < p.classes.len() / 2,
            "{} of {} classes",
            r.classes.len(),
            p.classes.len()
        );
        assert_eq!(r.total_pods(), p.total_pods());
        assert!(
            r.topology
                .spreads
                .iter()
                .all(|g| g.is_host() && g.members == [g.owner])
                && r.topology.preferred.is_empty()
        );
        let anti: Vec<_> = p
            .topology
            .affinities
            .iter()
            .filter(|a| a.anti && a.key == HOSTNAME)
            .collect();
        assert_eq!(r.topology.affinities.len(), anti.len());
        for a in anti {
            // the clique's classes keep their own index in the relaxation, one class each
            let mapped: std::collections::BTreeSet<usize> =
                a.members.iter().map(|&m| of_class[m]).collect();
            assert_eq!(mapped.len(), a.members.len());
        }
        for (k, c) in p.classes.iter().enumerate() {
            assert_eq!(r.classes[of_class[k]].req, c.req);
        }
    }

    #[test]
    fn hostname_spread_classes_merge_among_themselves_under_a_cap_of_their_spreads_skews() {
        let p = Problem::build(&crate::workload::diverse(200, 3), &two_zones());
        let (plain, _) = relax(&p, false);
        assert!(plain.topology.spreads.is_empty());
        let (r, of_class) = relax(&p, true);
        let host = host_spreads(&p);
        assert!(!host.is_empty(), "the mix has hostname spreads");
        let capped = |k: usize| host.iter().any(|(m, _)| m.contains(&k));
        for (k, c) in p.classes.iter().enumerate() {
            assert_eq!(r.classes[of_class[k]].req, c.req);
            // a capped class never shares its relaxed class with an uncapped one
            assert!((0..p.classes.len())
                .filter(|&j| of_class[j] == of_class[k])
                .all(|j| capped(j) == capped(k)));
        }
        for g in r.topology.spreads.iter().filter(|g| g.members.len() == 1) {
            // one pod per node of each Deployment whose pods the class merges (the mix's skew is 1)
            let deployments = host
                .iter()
                .filter(|(m, _)| m.iter().any(|&k| of_class[k] == g.owner))
                .count();
            assert_eq!(g.max_skew, deployments as i64, "relaxed class {}", g.owner);
            assert!(g.hard && g.is_host() && g.members == [g.owner]);
        }
        assert_eq!(
            r.topology
                .spreads
                .iter()
                .filter(|g| g.members.len() == 1)
                .count(),
            (0..p.classes.len())
                .filter(|&k| capped(k))
                .map(|k| of_class[k])
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
        // the knapsack's rules see the cap
        let rules = super::super::columns::NodeRules::build(&r);
        for g in r.topology.spreads.iter().filter(|g| g.members.len() == 1) {
            assert_eq!(rules.per_node_cap[g.owner], g.max_skew as u32);
        }
    }

    #[test]
    fn a_family_of_classes_tied_by_hostname_spreads_gets_the_sum_of_their_skews_and_every_plan_keeps_it(
    ) {
        let p = Problem::build(&crate::workload::diverse(300, 5), &two_zones());
        let (r, of_class) = relax(&p, true);
        let host = host_spreads(&p);
        let single: BTreeMap<usize, i64> = r
            .topology
            .spreads
            .iter()
            .filter(|g| g.members.len() == 1)
            .map(|g| (g.owner, g.max_skew))
            .collect();
        let families: Vec<&SpreadGroup> = r
            .topology
            .spreads
            .iter()
            .filter(|g| g.members.len() > 1)
            .collect();
        assert!(
            !families.is_empty(),
            "the mix's Deployments have pods of several requests"
        );
        for f in &families {
            // every spread lies wholly in or out of the family, and the cap is its spreads' skews
            let mut skews = 0;
            for (members, skew) in &host {
                let inside = members
                    .iter()
                    .filter(|&&k| f.members.contains(&of_class[k]))
                    .count();
                assert!(
                    inside == 0 || inside == members.len(),
                    "a spread straddles family {:?}",
                    f.members
                );
                skews += if inside > 0 { *skew } else { 0 };
            }
            assert_eq!(f.max_skew, skews);
            assert!(
                f.max_skew < f.members.iter().map(|m| single[m]).sum::<i64>(),
                "a family cap no tighter than its classes' is left out"
            );
            assert!(f.hard && f.is_host());
        }
        // a plan of the full problem, which keeps each spread's cap, keeps the family's
        let (state, left) = greedy::place_all(&p, State::new(&p), &p.class_demands());
        assert!(left.is_empty());
        for node in &state.nodes {
            for f in &families {
                let held: usize = node
                    .placed
                    .iter()
                    .filter(|(&k, _)| f.members.contains(&of_class[k]))
                    .map(|(_, &n)| n)
                    .sum();
                assert!(
                    held as i64 <= f.max_skew,
                    "{held} pods of family {:?} on {}",
                    f.members,
                    node.hostname()
                );
            }
        }
    }

    #[test]
    fn the_relaxed_bound_is_certified_between_the_anti_affinity_floor_and_every_plan() {
        // 60 pods of the diverse mix: 12 share one hostname anti-affinity, so any plan buys at
        // least 12 of the catalog's one node type (0.3 $/h); the relaxation keeps that clique
        let snapshot = crate::workload::diverse(60, 7);
        let catalog = two_zones();
        let p = Problem::build(&snapshot, &catalog);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.pods.len() as u32).collect();
        let bound = lower_bound(&p, &demand, &SolveSettings::default(), 5.0)
            .expect("solves")
            .expect("certified");
        // (less the tolerance the certified value gives up for the LP's own)
        assert!(bound >= 12.0 * 0.3 * (1.0 - 1e-5), "{bound}");
        for strategy in [
            crate::optimizer::Strategy::Milp,
            crate::optimizer::Strategy::Greedy,
        ] {
            let settings = SolveSettings {
                strategy,
                time_limit: std::time::Duration::from_secs(5),
                ..Default::default()
            };
            let plan = crate::optimizer::solve(&snapshot, &catalog, &settings).expect("plans");
            assert!(plan.unschedulable.is_empty());
            assert!(
                bound <= plan.objective + 1e-6,
                "{strategy:?}: bound {bound} above the plan's {}",
                plan.objective
            );
        }
    }
}
