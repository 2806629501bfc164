//! Holding zone self-affinity groups to one zone before rounding.
//!
//! The master LP may split a zone-affinity group across zones (its zone choice is fractional). A
//! rounding of that LP keeps the split, and the replay, which must put the whole group in one zone,
//! sends the pods planned elsewhere to the greedy repair (2,853 of 10,000 pods in the bench once).
//! Here each group gets the zone where the LP puts most of its pods, the choice variables of the
//! other zones are fixed at zero, and column generation goes on from the same basis, so the
//! patterns adapt before the rounding. The fixed LP is a restriction, never a bound.

use std::collections::BTreeMap;

use super::super::problem::Problem;
use super::columns::{Bin, BinInfo, Column};
use super::master::{AuxKind, Master};

/// A group's zone-choice variables: (aux column, domain).
type Choices<'p> = Vec<(usize, &'p str)>;

/// The zones zone-affinity groups are held to: (topology key, members, zone).
pub(super) struct ZoneFix<'p>(Vec<(&'p str, &'p [usize], &'p str)>);

impl ZoneFix<'_> {
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether a pattern on `bin` keeps every held group in its zone.
    pub(super) fn allows(&self, p: &Problem, bin: &BinInfo, counts: &[(usize, u32)]) -> bool {
        let labels = bin.labels(p);
        self.0.iter().all(|&(key, members, zone)| {
            labels.get(key).is_some_and(|d| d == zone)
                || counts
                    .iter()
                    .all(|(k, _)| members.binary_search(k).is_err())
        })
    }
}

/// Fixes the zone choice of every zone-affinity group in `model` (aux variables first, then
/// `columns`, valued by `values`) to the domain holding most of its pods.
pub(super) fn fix_zone_affinity<'p>(
    p: &'p Problem,
    master: &'p Master,
    bins: &[BinInfo],
    bin_index: &BTreeMap<Bin, usize>,
    columns: &[Column],
    values: &[f64],
    model: &mut highs::Model,
) -> ZoneFix<'p> {
    // every member of a deployment owns an identical rule: they share one choice, so the rules are
    // grouped by (key, members) and decided together
    let mut groups: BTreeMap<(&str, &[usize]), Choices<'_>> = BTreeMap::new();
    for (i, a) in master.aux.iter().enumerate() {
        if let AuxKind::AffinityUse { rule, domain } = &a.kind {
            let r = &p.topology.affinities[*rule];
            groups
                .entry((r.key.as_str(), r.members.as_slice()))
                .or_default()
                .push((i, domain.as_str()));
        }
    }
    let offset = master.aux.len();
    let mut fixed = Vec::new();
    for ((key, members), choices) in groups {
        let mut pods: BTreeMap<&'p str, f64> = BTreeMap::new();
        for (j, c) in columns.iter().enumerate() {
            let x = values.get(offset + j).copied().unwrap_or(0.0);
            if x <= 1e-9 {
                continue;
            }
            let n: u32 = c
                .counts
                .iter()
                .filter(|(k, _)| members.binary_search(k).is_ok())
                .map(|&(_, n)| n)
                .sum();
            if n == 0 {
                continue;
            }
            if let Some(d) = bins[bin_index[&c.bin]].labels(p).get(key) {
                *pods.entry(d.as_str()).or_insert(0.0) += x * f64::from(n);
            }
        }
        // the LP placed none of the group (all left unplaced): nothing to follow
        let Some((zone, _)) = pods
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)))
        else {
            continue;
        };
        for &(i, domain) in &choices {
            if domain != zone {
                // SAFETY: the pointer comes from a live HiGHS model and `i` is one of its columns
                unsafe { highs_sys::Highs_changeColBounds(model.as_mut_ptr(), i as i32, 0.0, 0.0) };
            }
        }
        fixed.push((key, members, zone));
    }
    ZoneFix(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Arch, CapacityType, Catalog, InstanceType, Offering};
    use crate::optimizer::milp::{bins, build_lp, columns::column_cost};
    use highs::Sense;

    /// Zone-affinity members' pods per zone in an LP answer over single-pod patterns.
    fn member_pods(
        p: &Problem,
        bins: &[BinInfo],
        index: &BTreeMap<Bin, usize>,
        columns: &[Column],
        values: &[f64],
        offset: usize,
    ) -> BTreeMap<String, f64> {
        let members: Vec<usize> = p
            .topology
            .affinities
            .iter()
            .filter(|r| !r.anti && !r.is_host())
            .flat_map(|r| r.members.clone())
            .collect();
        let mut out = BTreeMap::new();
        for (j, c) in columns.iter().enumerate() {
            if c.counts.iter().any(|(k, _)| members.contains(k)) {
                let zone = bins[index[&c.bin]].labels(p)[crate::domain::labels::ZONE].clone();
                *out.entry(zone).or_insert(0.0) += values[offset + j];
            }
        }
        out
    }

    #[test]
    fn groups_are_held_to_the_zone_the_lp_favours_even_against_a_cheaper_one() {
        let mut it = InstanceType::new("mid.xlarge", 4, 8192, Arch::Amd64);
        it.max_pods = Some(20);
        for (zone, price) in [("z1", 0.04), ("z2", 0.05)] {
            it.offerings.push(Offering {
                zone: zone.into(),
                capacity_type: CapacityType::OnDemand,
                price,
                available: true,
                price_estimated: false,
                interruption_band: None,
            });
        }
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![it],
            provenance: None,
        };
        // 100 pods of the diverse mix: ten zone-affinity groups of two pods each
        let p = Problem::build(&crate::workload::diverse(100, 7), &catalog);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let bins = bins(&p);
        let index: BTreeMap<Bin, usize> =
            bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
        let master = Master::build(&p, &demand, &bins);
        let q = &p;
        let columns: Vec<Column> = bins
            .iter()
            .flat_map(|b| {
                b.classes.iter().map(move |&(k, _)| Column {
                    bin: b.bin,
                    counts: vec![(k, 1)],
                    cost: column_cost(q, b, &[(k, 1)]),
                })
            })
            .collect();
        let offset = master.aux.len();
        // an LP answer that put every group's pods in z2
        let mut values = vec![0.0; offset + columns.len()];
        for (j, c) in columns.iter().enumerate() {
            values[offset + j] =
                if bins[index[&c.bin]].labels(&p)[crate::domain::labels::ZONE] == "z2" {
                    0.6
                } else {
                    0.4
                };
        }
        let solve = |fix: bool| {
            let mut model =
                build_lp(&p, &master, &bins, &index, &columns, false).optimise(Sense::Minimise);
            model.make_quiet();
            let held = fix.then(|| {
                fix_zone_affinity(&p, &master, &bins, &index, &columns, &values, &mut model).len()
            });
            let solved = model.solve();
            (
                held,
                member_pods(
                    &p,
                    &bins,
                    &index,
                    &columns,
                    solved.get_solution().columns(),
                    offset,
                ),
            )
        };
        // free, the groups go to the cheaper zone: the fixing below has something to undo
        let (_, free) = solve(false);
        assert!(free.get("z1").copied().unwrap_or(0.0) > 1.0, "{free:?}");
        let (held, pods) = solve(true);
        assert_eq!(held, Some(10));
        assert!(pods.get("z1").copied().unwrap_or(0.0) < 1e-9, "{pods:?}");
        assert!((pods["z2"] - 20.0).abs() < 1e-6, "{pods:?}");
        // a held pattern elsewhere is refused; one without members is not
        let fix = fix_zone_affinity(
            &p,
            &master,
            &bins,
            &index,
            &columns,
            &values,
            &mut build_lp(&p, &master, &bins, &index, &columns, false).optimise(Sense::Minimise),
        );
        let member = p
            .topology
            .affinities
            .iter()
            .find(|r| !r.anti && !r.is_host())
            .unwrap()
            .owner;
        let other = (0..p.classes.len())
            .find(|k| {
                p.topology
                    .affinities
                    .iter()
                    .all(|r| r.anti || r.is_host() || !r.members.contains(k))
            })
            .unwrap();
        for b in &bins {
            let in_z2 = b.labels(&p)[crate::domain::labels::ZONE] == "z2";
            assert_eq!(fix.allows(&p, b, &[(member, 1)]), in_z2);
            assert!(fix.allows(&p, b, &[(other, 1)]));
        }
    }
}
