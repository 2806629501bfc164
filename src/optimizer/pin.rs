//! Zone pins: a plan candidate that decides every zone-ruled pod's zone before any node is priced.
//!
//! The relaxation's candidate (`milp::lift`) drops zone spread and zone affinity, prices patterns
//! for the pods' requests alone, and only then spreads its nodes over zones (`milp::zonal`) and
//! hands each slot to a pod. Slots and zones rarely meet exactly: on 1,000 pods of the diverse mix
//! the replay refused or never got 74-93 pods (299 at 5,000), mostly zone spread pods, and the
//! greedy repair placed them at about twice their LP share.
//!
//! Here the zones come first. A zone spread group gets counts per eligible zone, filled one pod at
//! a time into the zone with the fewest (running pods included), ties to the zone its pods cost
//! least in; then the dearest zone takes the group's pods that lose least by going there, and so
//! on. A zone self-affinity group gets the zone that holds its pods cheapest (one where matching
//! pods run, if any do). Each pod then carries its zone as a node selector instead of the rule, the
//! problem is rebuilt from that snapshot with the same shapes, and its relaxation has no zone rule
//! left to break: its lifted nodes are handed back pod by pod to the classes of the real problem,
//! whose replay checks every rule as for any candidate.
//!
//! A group is pinned only when its pods obey no other zone rule and no other zone rule counts them,
//! every member owns the same rule, and its counts can be balanced; the others keep their rules.
//! Pinning restricts the plan, so this is a candidate, never a bound.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::domain::labels::{Operator, Requirement, ZONE};
use crate::domain::ClusterSnapshot;

use super::milp::columns::Column;
use super::milp::lift::{Candidates, Tally};
use super::problem::{room_share, Problem, ShapeCache};
use super::topology::{AffinityRule, SpreadGroup};
use super::SolveSettings;

/// Pod key -> the zone it is held to.
type Pins = BTreeMap<String, String>;

/// Per class: the cheapest share of a node it costs in each zone it may use.
type ZoneCosts<'p> = Vec<BTreeMap<&'p str, f64>>;

/// The relaxation's candidates for `snapshot` with its zone rules turned into pins, as patterns of
/// `p` (built from the same snapshot and catalog); None when no group can be pinned, the pinned
/// problem does not share `p`'s shapes or its relaxation gives no candidate in `seconds`.
pub fn candidates(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    p: &Problem,
    settings: &SolveSettings,
    seconds: f64,
) -> Option<Candidates> {
    let began = std::time::Instant::now();
    let pins = pins(p);
    if pins.is_empty() {
        return None;
    }
    let cache = ShapeCache::holding(&p.dims, p.shapes.clone());
    let q = Problem::build_with(&pinned(snapshot, &pins), catalog, Some(&cache));
    if !Arc::ptr_eq(&q.shapes, &p.shapes) || q.existing.len() != p.existing.len() {
        return None;
    }
    tracing::debug!(
        seconds = began.elapsed().as_secs_f64(),
        classes = q.classes.len(),
        "pinned problem built"
    );
    let demand: Vec<u32> = q.classes.iter().map(|c| c.demand() as u32).collect();
    let lifted = super::milp::lift::candidates(
        &q,
        &demand,
        settings,
        seconds - began.elapsed().as_secs_f64(),
    )?;
    tracing::debug!(
        pinned = pins.len(),
        seconds = began.elapsed().as_secs_f64(),
        "zone-pinned candidates"
    );
    let back = |c: Option<Vec<(Column, u32)>>| c.map(|c| hand_back(p, &q, &c));
    Some(Candidates {
        zones: back(lifted.zones),
        cover: back(lifted.cover),
        extended: back(lifted.extended),
        ..lifted
    })
}

/// What a zone rule ties together: spread groups and self-affinity groups are pinned, anything else
/// on the zone key leaves its classes alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tie<'p> {
    Spread(&'p [usize]),
    Affinity(&'p [usize]),
    Other,
}

/// The zone of every pod in a group that can be pinned.
fn pins(p: &Problem) -> Pins {
    let t = &p.topology;
    let n = p.classes.len();
    let mut ties: Vec<BTreeSet<Tie<'_>>> = vec![BTreeSet::new(); n];
    let mut spreads: BTreeMap<&[usize], Vec<&SpreadGroup>> = BTreeMap::new();
    let mut affinities: BTreeMap<&[usize], Vec<&AffinityRule>> = BTreeMap::new();
    fn tie<'p>(tie: Tie<'p>, owner: usize, members: &[usize], ties: &mut [BTreeSet<Tie<'p>>]) {
        ties[owner].insert(tie);
        for &m in members {
            ties[m].insert(tie);
        }
    }
    for g in t.spreads.iter().filter(|g| g.key == ZONE) {
        tie(Tie::Spread(&g.members), g.owner, &g.members, &mut ties);
        spreads.entry(&g.members).or_default().push(g);
    }
    for r in t.affinities.iter().filter(|r| r.key == ZONE) {
        if r.anti || !r.self_selecting() {
            tie(Tie::Other, r.owner, &r.members, &mut ties);
        } else {
            tie(Tie::Affinity(&r.members), r.owner, &r.members, &mut ties);
            affinities.entry(&r.members).or_default().push(r);
        }
    }
    for r in t.preferred.iter().filter(|r| r.key == ZONE) {
        tie(Tie::Other, r.owner, &r.members, &mut ties);
    }
    for s in t.shunned.iter().filter(|s| s.key == ZONE) {
        for &m in &s.members {
            ties[m].insert(Tie::Other);
        }
    }
    for (k, forbidden) in t.inverse_forbidden.iter().enumerate() {
        if forbidden.iter().any(|(key, _)| key == ZONE) {
            ties[k].insert(Tie::Other);
        }
    }
    let costs: ZoneCosts<'_> = (0..n).map(|k| zone_costs(p, k)).collect();
    // a group is pinned when it is all its members' only zone tie and every member owns its rule
    let alone = |tie: Tie<'_>, members: &[usize], owners: BTreeSet<usize>| {
        members
            .iter()
            .all(|&m| ties[m].len() == 1 && ties[m].contains(&tie))
            && owners.into_iter().eq(members.iter().copied())
    };
    let mut pins = Pins::new();
    for (members, rules) in &spreads {
        let g = rules[0];
        let same = rules.iter().all(|r| {
            r.hard
                && r.max_skew == g.max_skew
                && r.min_domains == g.min_domains
                && r.eligible == g.eligible
        });
        if same
            && !g.min_is_zero()
            && alone(
                Tie::Spread(members),
                members,
                rules.iter().map(|r| r.owner).collect(),
            )
        {
            if let Some(got) = spread_pins(p, g, &costs) {
                pins.extend(got);
            }
        }
    }
    if tracing::enabled!(tracing::Level::TRACE) {
        let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for z in pins.values() {
            *per_zone.entry(z.as_str()).or_default() += 1;
        }
        tracing::trace!(?per_zone, "spread pins");
    }
    for (members, rules) in &affinities {
        if alone(
            Tie::Affinity(members),
            members,
            rules.iter().map(|r| r.owner).collect(),
        ) {
            if let Some(got) = affinity_pins(p, rules[0], &costs) {
                tracing::trace!(
                    zone = got.values().next(),
                    pods = got.len(),
                    "affinity pins"
                );
                pins.extend(got);
            }
        }
    }
    pins
}

/// Per zone, the least share of a node's cost a pod of class `k` takes there: its largest fraction
/// of an offering's room times the offering's cost; nothing on an existing node with room for it.
fn zone_costs(p: &Problem, k: usize) -> BTreeMap<&str, f64> {
    let c = &p.classes[k];
    let mut best: BTreeMap<&str, f64> = BTreeMap::new();
    for &(s, o) in &c.offerings {
        let off = p.offering(s, o);
        let v = off.cost * room_share(&c.req, &off.alloc);
        best.entry(off.zone.as_str())
            .and_modify(|b| *b = b.min(v))
            .or_insert(v);
    }
    for &e in &c.existing {
        if let Some(z) = p.existing[e].labels.get(ZONE) {
            best.insert(z.as_str(), 0.0);
        }
    }
    best
}

/// A spread group's pods per zone: balanced counts, the dearest zones filled first with the pods
/// that lose least there. None when the counts cannot be balanced or a zone finds too few pods.
fn spread_pins(p: &Problem, g: &SpreadGroup, costs: &ZoneCosts<'_>) -> Option<Pins> {
    let zones: Vec<&str> = g.eligible.iter().map(String::as_str).collect();
    let pods: Vec<(usize, &str)> = g
        .members
        .iter()
        .flat_map(|&k| p.classes[k].pods.iter().map(move |pod| (k, pod.as_str())))
        .collect();
    if zones.is_empty() || pods.is_empty() {
        return None;
    }
    // what a pod of class k loses by going to zone z rather than its cheapest zone
    let premium = |k: usize, z: &str| {
        let cheapest = costs[k].values().copied().fold(f64::INFINITY, f64::min);
        costs[k].get(z).map(|v| v - cheapest)
    };
    let dearness: BTreeMap<&str, f64> = zones
        .iter()
        .map(|&z| {
            (
                z,
                g.members
                    .iter()
                    .map(|&k| premium(k, z).unwrap_or(1e6))
                    .sum(),
            )
        })
        .collect();
    let mut count: BTreeMap<&str, i64> = zones
        .iter()
        .map(|&z| (z, g.existing.get(z).copied().unwrap_or(0)))
        .collect();
    let mut quota: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in &pods {
        let z = *zones.iter().min_by(|a, b| {
            count[*a]
                .cmp(&count[*b])
                .then(dearness[*a].total_cmp(&dearness[*b]))
                .then(a.cmp(b))
        })?;
        *count.get_mut(z)? += 1;
        *quota.entry(z).or_default() += 1;
    }
    let (lo, hi) = (count.values().min()?, count.values().max()?);
    if hi - lo > g.max_skew {
        return None;
    }
    let mut order = zones.clone();
    order.sort_by(|a, b| dearness[*b].total_cmp(&dearness[*a]).then(a.cmp(b)));
    let mut taken = vec![false; pods.len()];
    let mut pins = Pins::new();
    for z in order {
        let want = quota.get(z).copied().unwrap_or(0);
        let mut fit: Vec<(f64, usize)> = pods
            .iter()
            .enumerate()
            .filter(|(i, _)| !taken[*i])
            .filter_map(|(i, &(k, _))| premium(k, z).map(|v| (v, i)))
            .collect();
        if fit.len() < want {
            return None;
        }
        fit.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, i) in &fit[..want] {
            taken[i] = true;
            pins.insert(pods[i].1.to_string(), z.to_string());
        }
    }
    Some(pins)
}

/// A self-affinity group's zone: where its pods cost least, among the zones where matching pods
/// already run when any do. None when no zone takes every member.
fn affinity_pins(p: &Problem, r: &AffinityRule, costs: &ZoneCosts<'_>) -> Option<Pins> {
    let total = |z: &str| {
        r.members
            .iter()
            .map(|&k| costs[k].get(z).map(|v| v * p.classes[k].demand() as f64))
            .sum::<Option<f64>>()
    };
    let zones: BTreeSet<&str> = if r.running.values().any(|&c| c > 0) {
        r.running
            .iter()
            .filter(|(_, &c)| c > 0)
            .map(|(z, _)| z.as_str())
            .collect()
    } else {
        r.members
            .iter()
            .flat_map(|&k| costs[k].keys().copied())
            .collect()
    };
    let (zone, _) = zones
        .into_iter()
        .filter_map(|z| total(z).map(|v| (z, v)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)))?;
    Some(
        r.members
            .iter()
            .flat_map(|&k| {
                p.classes[k]
                    .pods
                    .iter()
                    .map(|pod| (pod.clone(), zone.to_string()))
            })
            .collect(),
    )
}

/// `snapshot` with each pinned pod's zone rules replaced by a node selector on its zone.
fn pinned(snapshot: &ClusterSnapshot, pins: &Pins) -> ClusterSnapshot {
    let mut s = snapshot.clone();
    for pod in &mut s.pods {
        let Some(zone) = pod.is_pending().then(|| pins.get(&pod.key())).flatten() else {
            continue;
        };
        let mut copy = (**pod).clone();
        let c = Arc::make_mut(&mut copy.constraints);
        c.spread.retain(|sp| sp.topology_key != ZONE);
        c.pod_affinity.retain(|t| t.topology_key != ZONE);
        c.node_selector.push(Requirement {
            key: ZONE.into(),
            operator: Operator::In,
            values: vec![zone.clone()],
            min_values: None,
        });
        *pod = Arc::new(copy);
    }
    s
}

/// `q`'s patterns as patterns of `p`: each slot of a class of `q` goes to the class of `p` of its
/// next pod not yet handed out.
fn hand_back(p: &Problem, q: &Problem, lifted: &[(Column, u32)]) -> Vec<(Column, u32)> {
    let class_of = p.class_of_pods();
    let mut pods: Vec<VecDeque<usize>> = q
        .classes
        .iter()
        .map(|c| {
            c.pods
                .iter()
                .filter_map(|pod| class_of.get(pod.as_str()).copied())
                .collect()
        })
        .collect();
    let mut out = Tally::default();
    for (col, copies) in lifted {
        for _ in 0..*copies {
            let mut here: BTreeMap<usize, u32> = BTreeMap::new();
            for &(k, n) in &col.counts {
                for j in (0..n).filter_map(|_| pods[k].pop_front()) {
                    *here.entry(j).or_default() += 1;
                }
            }
            out.add(col.bin, here, col.cost);
        }
    }
    out.into_columns()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Arch, CapacityType, InstanceType, Offering};
    use crate::domain::PodAffinityTerm;

    /// The diverse mix's 8 vCPU type in three zones, z3 half again as dear as the others.
    fn three_zones() -> Catalog {
        let mut it = InstanceType::new("eight.xlarge", 8, 32768, Arch::Amd64);
        it.max_pods = Some(58);
        for (zone, price) in [("z1", 0.3), ("z2", 0.3), ("z3", 0.45)] {
            it.offerings.push(Offering {
                zone: zone.into(),
                capacity_type: CapacityType::OnDemand,
                price,
                available: true,
                price_estimated: false,
                interruption_band: None,
            });
        }
        Catalog {
            region: "test".into(),
            instance_types: vec![it],
            provenance: None,
        }
    }

    fn app_of(p: &Problem, k: usize) -> String {
        p.classes[k].constraints.labels["app"].clone()
    }

    #[test]
    fn spread_groups_get_balanced_counts_and_the_dear_zone_the_pods_that_lose_least_there() {
        let p = Problem::build(&crate::workload::diverse(300, 11), &three_zones());
        let pins = pins(&p);
        let costs: ZoneCosts<'_> = (0..p.classes.len()).map(|k| zone_costs(&p, k)).collect();
        let mut groups: BTreeMap<String, Vec<(f64, &str)>> = BTreeMap::new();
        for (k, c) in p
            .classes
            .iter()
            .enumerate()
            .filter(|(k, _)| app_of(&p, *k).starts_with("zone-spread"))
        {
            for pod in &c.pods {
                let zone = pins
                    .get(pod)
                    .unwrap_or_else(|| panic!("{pod} is not pinned"));
                groups
                    .entry(app_of(&p, k))
                    .or_default()
                    .push((costs[k]["z3"] - costs[k]["z1"], zone));
            }
        }
        assert_eq!(groups.len(), 10);
        for (app, pods) in groups {
            let count = |z: &str| pods.iter().filter(|(_, zone)| *zone == z).count();
            let counts = [count("z1"), count("z2"), count("z3")];
            assert!(
                counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
                "{app}: {counts:?}"
            );
            // z3 never gets one of the extra pods, and gets the pods its premium hurts least
            assert!(counts[2] <= counts[0].min(counts[1]), "{app}: {counts:?}");
            let worst_in_z3 = pods
                .iter()
                .filter(|(_, z)| *z == "z3")
                .map(|p| p.0)
                .fold(0.0, f64::max);
            let best_elsewhere = pods
                .iter()
                .filter(|(_, z)| *z != "z3")
                .map(|p| p.0)
                .fold(f64::INFINITY, f64::min);
            assert!(
                worst_in_z3 <= best_elsewhere + 1e-12,
                "{app}: {worst_in_z3} in z3, {best_elsewhere} kept out"
            );
        }
    }

    #[test]
    fn a_zone_affinity_group_goes_whole_to_a_cheap_zone() {
        let p = Problem::build(&crate::workload::diverse(300, 11), &three_zones());
        let pins = pins(&p);
        let mut zones: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for (k, c) in p
            .classes
            .iter()
            .enumerate()
            .filter(|(k, _)| app_of(&p, *k).starts_with("zone-affinity"))
        {
            zones
                .entry(app_of(&p, k))
                .or_default()
                .extend(c.pods.iter().map(|pod| pins[pod].as_str()));
        }
        assert_eq!(zones.len(), 10);
        assert!(
            zones.values().all(|z| z.len() == 1 && !z.contains("z3")),
            "{zones:?}"
        );
        // nothing else is pinned: the other pods obey no zone rule
        let ruled = p
            .classes
            .iter()
            .enumerate()
            .filter(|(k, _)| app_of(&p, *k).starts_with("zone-"))
            .map(|(_, c)| c.pods.len())
            .sum::<usize>();
        assert_eq!(pins.len(), ruled);
    }

    #[test]
    fn a_group_whose_pods_obey_another_zone_rule_keeps_its_rules() {
        let mut snapshot = crate::workload::diverse(300, 11);
        let other = PodAffinityTerm {
            selector: crate::domain::LabelSelector {
                match_labels: [("app".to_string(), "elsewhere".to_string())].into(),
                match_expressions: vec![],
            },
            namespaces: vec![],
            all_namespaces: false,
            topology_key: ZONE.into(),
        };
        for pod in snapshot
            .pods
            .iter_mut()
            .filter(|pod| pod.labels["app"] == "zone-spread-3")
        {
            Arc::make_mut(&mut Arc::make_mut(pod).constraints)
                .pod_anti_affinity
                .push(other.clone());
        }
        let p = Problem::build(&snapshot, &three_zones());
        let pins = pins(&p);
        let of_app = |app: &str| {
            p.classes
                .iter()
                .enumerate()
                .filter(|(k, _)| app_of(&p, *k) == app)
                .flat_map(|(_, c)| c.pods.iter())
                .filter(|pod| pins.contains_key(*pod))
                .count()
        };
        assert_eq!(of_app("zone-spread-3"), 0);
        assert!(of_app("zone-spread-4") > 0);
    }

    #[test]
    fn the_pinned_candidates_hand_back_each_lifted_pod_once_and_the_repair_completes_them() {
        let snapshot = crate::workload::diverse(200, 7);
        let catalog = three_zones();
        let p = Problem::build(&snapshot, &catalog);
        let found = candidates(&snapshot, &catalog, &p, &SolveSettings::default(), 2.0)
            .expect("the mix's zone groups can all be pinned");
        assert!(found.zones.is_some(), "the zone program answers");
        for (_, lifted) in found.named("zones", "cover") {
            handed_back_once_and_completed(&p, &lifted);
        }
    }

    fn handed_back_once_and_completed(p: &Problem, lifted: &[(Column, u32)]) {
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let mut placed = vec![0u32; p.classes.len()];
        for (c, copies) in lifted {
            for &(k, n) in &c.counts {
                placed[k] += n * copies;
            }
        }
        assert!(
            placed.iter().zip(&demand).all(|(got, want)| got <= want),
            "{placed:?} against {demand:?}"
        );
        assert!(
            placed.iter().sum::<u32>() * 4 >= demand.iter().sum::<u32>() * 3,
            "only {} of {} pods lifted",
            placed.iter().sum::<u32>(),
            demand.iter().sum::<u32>()
        );
        let (state, rejected) = super::super::milp::replay(p, lifted);
        let (state, left) = super::super::greedy::repair(p, state, &rejected);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(
            (0..p.classes.len())
                .map(|k| state.placed_of(k) as u32)
                .sum::<u32>(),
            demand.iter().sum::<u32>()
        );
    }
}
