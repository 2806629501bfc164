//! The master problem over node patterns: rows (demand, existing-node convexity, NodePool limits,
//! zone-like topology spread, zone self-affinity and self-anti-affinity), auxiliary variables, and
//! the coefficients a pattern contributes to each row. The same description builds the
//! column-generation LP, the final integer program and the `.lp`/`.mps` dumps.

use std::collections::BTreeMap;

use crate::domain::labels::HOSTNAME;

use super::super::problem::Problem;
use super::columns::{Bin, BinInfo, Column};

#[derive(Debug, Clone, PartialEq)]
pub enum RowKind {
    Demand(usize),
    Convexity(usize),
    Limit { pool: usize, resource: String },
    SpreadLow { group: usize, domain: String },
    SpreadHigh { group: usize, domain: String },
    AffinityZone { rule: usize, domain: String },
    AffinityOne { rule: usize },
    AntiZone { rule: usize, domain: String },
    Floor { floor: usize, domain: String },
}

impl RowKind {
    pub fn family(&self) -> &'static str {
        match self {
            RowKind::Demand(_) => "demand",
            RowKind::Convexity(_) => "existing_node_once",
            RowKind::Limit { .. } => "nodepool_limit",
            RowKind::SpreadLow { .. } => "spread_min",
            RowKind::SpreadHigh { .. } => "spread_max_skew",
            RowKind::AffinityZone { .. } => "zone_affinity_link",
            RowKind::AffinityOne { .. } => "zone_affinity_one_domain",
            RowKind::AntiZone { .. } => "zone_anti_affinity",
            RowKind::Floor { .. } => "domain_floor",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RowDef {
    pub kind: RowKind,
    pub lower: f64,
    pub upper: f64,
}

/// Variables other than patterns.
#[derive(Debug, Clone, PartialEq)]
pub enum AuxKind {
    /// Unplaced pods of a class.
    Unplaced(usize),
    /// A spread group's global minimum.
    SpreadMin(usize),
    /// Excess skew of a ScheduleAnyway group in a domain.
    SpreadSlack { group: usize, domain: String },
    /// Whether a zone-affinity group uses a domain.
    AffinityUse { rule: usize, domain: String },
    /// Pods a relaxation's floor is short of in a domain.
    FloorShort { floor: usize, domain: String },
}

impl AuxKind {
    pub fn family(&self) -> &'static str {
        match self {
            AuxKind::Unplaced(_) => "unplaced_pods",
            AuxKind::SpreadMin(_) => "spread_global_min",
            AuxKind::SpreadSlack { .. } => "spread_soft_excess",
            AuxKind::AffinityUse { .. } => "zone_affinity_choice",
            AuxKind::FloorShort { .. } => "domain_floor_short",
        }
    }
}

#[derive(Debug, Clone)]
pub struct AuxVar {
    pub kind: AuxKind,
    pub cost: f64,
    pub lower: f64,
    pub upper: f64,
    pub integer: bool,
    pub rows: Vec<(usize, f64)>,
}

/// Rows of one topology domain: (row, member classes ascending).
type DomainRows = Vec<(usize, Vec<usize>)>;

pub struct Master {
    pub rows: Vec<RowDef>,
    pub aux: Vec<AuxVar>,
    demand_row: Vec<usize>,
    convexity_row: BTreeMap<usize, usize>,
    limit_rows: BTreeMap<usize, Vec<(usize, String)>>,
    /// key -> domain -> [(row, members ascending)]
    domain_rows: BTreeMap<String, BTreeMap<String, DomainRows>>,
}

impl Master {
    pub fn build(p: &Problem, demand: &[u32], bins: &[BinInfo]) -> Master {
        let mut m = Master {
            rows: Vec::new(),
            aux: Vec::new(),
            demand_row: Vec::new(),
            convexity_row: BTreeMap::new(),
            limit_rows: BTreeMap::new(),
            domain_rows: BTreeMap::new(),
        };
        for (k, &d) in demand.iter().enumerate() {
            let r = m.row(RowKind::Demand(k), f64::from(d), f64::INFINITY);
            m.demand_row.push(r);
            m.aux.push(AuxVar {
                kind: AuxKind::Unplaced(k),
                cost: p.classes[k].unplaced_cost,
                lower: 0.0,
                upper: f64::INFINITY,
                integer: false,
                rows: vec![(r, 1.0)],
            });
        }
        for b in bins {
            if let Bin::Existing(e) = b.bin {
                let r = m.row(RowKind::Convexity(e), f64::NEG_INFINITY, 1.0);
                m.convexity_row.insert(e, r);
            }
        }
        for (pi, pool) in p.pools.iter().enumerate() {
            for (name, left) in pool.remaining.iter().flat_map(|r| r.iter()) {
                let r = m.row(
                    RowKind::Limit {
                        pool: pi,
                        resource: name.to_string(),
                    },
                    f64::NEG_INFINITY,
                    left.as_f64().max(0.0),
                );
                m.limit_rows
                    .entry(pi)
                    .or_default()
                    .push((r, name.to_string()));
            }
        }
        m.spread_rows(p);
        m.affinity_rows(p, bins);
        m.floor_rows(p, bins);
        m
    }

    /// A row per floor and domain, with a slack that keeps the LP feasible before patterns reach
    /// the domain. The slack costs what the dearest member's pod costs on a node of its own there:
    /// the LP can always meet the floor for no more, so the slack changes nothing once such a
    /// pattern is priced, and it keeps the duals (and the pricer) away from the unplaced penalty.
    /// A domain no member can use gets no row: no plan meets its floor, and leaving it out only
    /// relaxes the LP.
    fn floor_rows(&mut self, p: &Problem, bins: &[BinInfo]) {
        for (fi, f) in p.topology.floors.iter().enumerate() {
            for (domain, &least) in &f.least {
                let alone = f
                    .members
                    .iter()
                    .filter_map(|&k| {
                        bins.iter()
                            .filter(|b| {
                                b.labels(p).get(&f.key) == Some(domain)
                                    && b.classes.iter().any(|&(j, _)| j == k)
                            })
                            .map(|b| b.cost)
                            .min_by(f64::total_cmp)
                    })
                    .max_by(f64::total_cmp);
                let (Some(cost), true) = (alone, least > 0) else {
                    continue;
                };
                let row = self.row(
                    RowKind::Floor {
                        floor: fi,
                        domain: domain.clone(),
                    },
                    f64::from(least),
                    f64::INFINITY,
                );
                self.aux.push(AuxVar {
                    kind: AuxKind::FloorShort {
                        floor: fi,
                        domain: domain.clone(),
                    },
                    cost,
                    lower: 0.0,
                    upper: f64::INFINITY,
                    integer: false,
                    rows: vec![(row, 1.0)],
                });
                self.domain_rows
                    .entry(f.key.clone())
                    .or_default()
                    .entry(domain.clone())
                    .or_default()
                    .push((row, f.members.clone()));
            }
        }
    }

    fn row(&mut self, kind: RowKind, lower: f64, upper: f64) -> usize {
        self.rows.push(RowDef { kind, lower, upper });
        self.rows.len() - 1
    }

    fn spread_rows(&mut self, p: &Problem) {
        for (gi, g) in p.topology.spreads.iter().enumerate() {
            if g.is_host() || !g.members.contains(&g.owner) || g.eligible.is_empty() {
                continue;
            }
            let fixed_zero = g.min_is_zero();
            // Kubernetes checks skew when a pod is placed, not on the final state: a domain already
            // more than maxSkew above the emptiest one takes no pod, but its count is no violation.
            // Its row is relaxed to "no more pods than the minimum rises" (count - min <= -m0),
            // which every placement kube-scheduler allows satisfies; the plain row would make the
            // LP infeasible after an uneven scale-in.
            let m0 = g
                .eligible
                .iter()
                .map(|d| g.existing.get(d).copied().unwrap_or(0) as f64)
                .fold(f64::INFINITY, f64::min);
            let min_var = self.aux.len();
            self.aux.push(AuxVar {
                kind: AuxKind::SpreadMin(gi),
                cost: 0.0,
                lower: 0.0,
                upper: if fixed_zero { 0.0 } else { f64::INFINITY },
                integer: false,
                rows: vec![],
            });
            for d in &g.eligible {
                let e = g.existing.get(d).copied().unwrap_or(0) as f64;
                let low = self.row(
                    RowKind::SpreadLow {
                        group: gi,
                        domain: d.clone(),
                    },
                    -e,
                    f64::INFINITY,
                );
                self.aux[min_var].rows.push((low, -1.0));
                self.domain_rows
                    .entry(g.key.clone())
                    .or_default()
                    .entry(d.clone())
                    .or_default()
                    .push((low, g.members.clone()));
                let high = self.row(
                    RowKind::SpreadHigh {
                        group: gi,
                        domain: d.clone(),
                    },
                    f64::NEG_INFINITY,
                    (g.max_skew as f64 - e).max(-m0),
                );
                self.aux[min_var].rows.push((high, -1.0));
                self.domain_rows
                    .entry(g.key.clone())
                    .or_default()
                    .entry(d.clone())
                    .or_default()
                    .push((high, g.members.clone()));
                if !g.hard {
                    self.aux.push(AuxVar {
                        kind: AuxKind::SpreadSlack {
                            group: gi,
                            domain: d.clone(),
                        },
                        cost: p.weights.schedule_anyway_skew,
                        lower: 0.0,
                        upper: f64::INFINITY,
                        integer: false,
                        rows: vec![(high, -1.0)],
                    });
                }
            }
        }
    }

    fn affinity_rows(&mut self, p: &Problem, bins: &[BinInfo]) {
        for (ri, r) in p.topology.affinities.iter().enumerate() {
            if r.key == HOSTNAME || !r.self_selecting() {
                continue;
            }
            let domains: std::collections::BTreeSet<String> = bins
                .iter()
                .filter(|b| b.classes.iter().any(|(k, _)| *k == r.owner))
                .filter_map(|b| b.labels(p).get(&r.key).cloned())
                .collect();
            if r.anti {
                for d in domains {
                    let cap = if r.running.contains_key(&d) { 0.0 } else { 1.0 };
                    let row = self.row(
                        RowKind::AntiZone {
                            rule: ri,
                            domain: d.clone(),
                        },
                        f64::NEG_INFINITY,
                        cap,
                    );
                    self.domain_rows
                        .entry(r.key.clone())
                        .or_default()
                        .entry(d)
                        .or_default()
                        .push((row, r.members.clone()));
                }
            } else if r.running.is_empty() {
                let total: f64 = r
                    .members
                    .iter()
                    .map(|&k| p.classes[k].demand() as f64)
                    .sum();
                let one = self.row(RowKind::AffinityOne { rule: ri }, f64::NEG_INFINITY, 1.0);
                for d in domains {
                    let row = self.row(
                        RowKind::AffinityZone {
                            rule: ri,
                            domain: d.clone(),
                        },
                        f64::NEG_INFINITY,
                        0.0,
                    );
                    self.domain_rows
                        .entry(r.key.clone())
                        .or_default()
                        .entry(d.clone())
                        .or_default()
                        .push((row, r.members.clone()));
                    self.aux.push(AuxVar {
                        kind: AuxKind::AffinityUse {
                            rule: ri,
                            domain: d,
                        },
                        cost: 0.0,
                        lower: 0.0,
                        upper: 1.0,
                        integer: true,
                        rows: vec![(row, -total), (one, 1.0)],
                    });
                }
            }
        }
    }

    /// The zone-like rows of the domains this bin's labels fall in.
    fn rows_of<'a>(
        &'a self,
        p: &'a Problem,
        bin: &'a BinInfo,
    ) -> impl Iterator<Item = &'a Vec<(usize, Vec<usize>)>> + 'a {
        let labels = bin.labels(p);
        self.domain_rows
            .iter()
            .filter_map(move |(key, domains)| labels.get(key).and_then(|d| domains.get(d)))
    }

    /// The rows a pattern touches, with coefficients.
    pub fn coefficients(
        &self,
        p: &Problem,
        bin: &BinInfo,
        counts: &[(usize, u32)],
    ) -> Vec<(usize, f64)> {
        let mut out: Vec<(usize, f64)> = counts
            .iter()
            .map(|&(k, n)| (self.demand_row[k], f64::from(n)))
            .collect();
        match bin.bin {
            Bin::Existing(e) => out.extend(self.convexity_row.get(&e).map(|&r| (r, 1.0))),
            Bin::New { shape, .. } => {
                let s = &p.shapes[shape];
                for (r, name) in self.limit_rows.get(&s.pool).into_iter().flatten() {
                    let amount = if name == "nodes" {
                        1.0
                    } else {
                        s.capacity.get(name).as_f64()
                    };
                    out.push((*r, amount));
                }
            }
        }
        for rows in self.rows_of(p, bin) {
            for (row, members) in rows {
                let n: u32 = counts
                    .iter()
                    .filter(|(k, _)| members.binary_search(k).is_ok())
                    .map(|(_, n)| n)
                    .sum();
                if n > 0 {
                    out.push((*row, f64::from(n)));
                }
            }
        }
        out
    }

    /// Per-class value of one pod in `bin` under row duals (HiGHS sign convention: rc = c - y.a).
    pub fn pod_values(&self, p: &Problem, bin: &BinInfo, duals: &[f64]) -> Vec<f64> {
        let mut v: Vec<f64> = self.demand_row.iter().map(|&r| duals[r]).collect();
        for rows in self.rows_of(p, bin) {
            for (row, members) in rows {
                for &k in members {
                    v[k] += duals[*row];
                }
            }
        }
        v
    }

    /// The dual of class `k`'s demand row.
    pub fn demand_dual(&self, duals: &[f64], k: usize) -> f64 {
        duals[self.demand_row[k]]
    }

    /// The part of a pattern's reduced cost that does not depend on its pods.
    pub fn bin_dual(&self, p: &Problem, bin: &BinInfo, duals: &[f64]) -> f64 {
        match bin.bin {
            Bin::Existing(e) => self.convexity_row.get(&e).map_or(0.0, |&r| duals[r]),
            Bin::New { shape, .. } => {
                let s = &p.shapes[shape];
                self.limit_rows
                    .get(&s.pool)
                    .into_iter()
                    .flatten()
                    .map(|(r, name)| {
                        duals[*r]
                            * if name == "nodes" {
                                1.0
                            } else {
                                s.capacity.get(name).as_f64()
                            }
                    })
                    .sum()
            }
        }
    }

    pub fn column_bounds(bin: &Bin) -> (f64, f64) {
        match bin {
            Bin::Existing(_) => (0.0, 1.0),
            Bin::New { .. } => (0.0, f64::INFINITY),
        }
    }
}

/// A column with its coefficients, ready for a solver.
pub struct BuiltColumn<'a> {
    pub column: &'a Column,
    pub rows: Vec<(usize, f64)>,
}
