//! Exactness of the MILP on instances small enough to solve by exhaustive search.
//!
//! Instances have 2-6 pending pods, 1-3 instance types, 1-2 zones, on-demand and spot offerings and no
//! existing nodes. Every type carries an explicit `overhead`, so a node's allocatable is exactly
//! capacity - overhead (docs/catalog.md) and the search below needs nothing from the optimizer. The
//! search enumerates every partition of the pods into nodes (at most one node per pod, so no optimum is
//! missed) and, for each partition, every offering for every node; it keeps the assignments where each
//! node's pods fit its allocatable (cpu, memory, pods), meet their zone nodeSelectors and hostname
//! anti-affinity, and where every zone-spread class keeps its skew within maxSkew over its eligible
//! zones (zones with an offering its selector admits, as Karpenter counts domains). The optimum is the
//! least total price plus the penalty of preferred hostname anti-affinity (a class may prefer its pods
//! apart: each pod sharing a node with another of its class costs the term's weight times the default
//! `preferredPodAntiAffinity`), and the plans' objectives are held to it.
//!
//! For each instance: both plans pass the independent checker of `support/builders.rs`; when a
//! placement of every pod exists, the MILP places every pod at exactly the optimum (within 1e-6), its
//! lower bound does not exceed the optimum, and greedy, when it places every pod, costs at least the
//! optimum; when none exists, both plans leave a pod unschedulable. Hand-picked cases (including two
//! small nodes beating one big one) also assert the hand-computed optimum, which guards the search
//! itself. A proptest family of 32 tiny random instances (fixed seed; `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` explore further) checks all of this except exactness, a second family of 32
//! does so with preferred anti-affinity on some classes, and an ignored family of 200 checks
//! exactness too.
//!
//! Tests marked `#[ignore]` state an optimizer bug and pass once it is fixed
//! (`cargo test --release --test bruteforce -- --ignored`): the MILP misses the optimum on some tiny
//! instances because column generation stops before generating the patterns the optimum needs.

#[path = "support/builders.rs"]
mod builders;

use builders::*;
use joiner::catalog::CapacityType;
use joiner::optimizer::Strategy;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

// ------------------------------------------------------------------ exhaustive search

/// One way to buy a node: its zone, price and allocatable (cpu m, memory MiB, pods).
struct Offer {
    zone: String,
    price: f64,
    alloc: (i64, i64, i64),
}

struct Search<'a> {
    inst: &'a Instance,
    pods: Vec<usize>,
    offers: Vec<Offer>,
    best: Option<f64>,
}

impl Search<'_> {
    /// Whether the pods in `block` may share a node of `offer`.
    fn fits(&self, block: &[usize], offer: &Offer) -> bool {
        let classes = &self.inst.classes;
        let cpu: i64 = block.iter().map(|&p| classes[self.pods[p]].cpu_m).sum();
        let mem: i64 = block.iter().map(|&p| classes[self.pods[p]].mem_mib).sum();
        cpu <= offer.alloc.0
            && mem <= offer.alloc.1
            && block.len() as i64 <= offer.alloc.2
            && block.iter().all(|&p| {
                classes[self.pods[p]]
                    .zone
                    .as_ref()
                    .is_none_or(|z| *z == offer.zone)
            })
    }

    /// Whether the pods in `block` may share a node at all: some offering holds them and no
    /// anti-affinity class appears twice.
    fn block_ok(&self, block: &[usize]) -> bool {
        let classes = &self.inst.classes;
        let mut anti = std::collections::BTreeSet::new();
        block
            .iter()
            .all(|&p| !classes[self.pods[p]].anti || anti.insert(self.pods[p]))
            && self.offers.iter().any(|o| self.fits(block, o))
    }

    /// The preferred anti-affinity penalty of a node holding `block`: every pod of a class that
    /// prefers to be apart pays the term's weight when another of its class shares the node.
    fn penalty(&self, block: &[usize]) -> f64 {
        let per_weight = joiner::domain::CostWeights::default().preferred_pod_anti_affinity;
        let classes = &self.inst.classes;
        let mut per_class = std::collections::BTreeMap::new();
        for &p in block {
            *per_class.entry(self.pods[p]).or_insert(0usize) += 1;
        }
        per_class
            .into_iter()
            .filter_map(|(k, n)| {
                classes[k]
                    .prefer_apart
                    .filter(|_| n >= 2)
                    .map(|w| n as f64 * f64::from(w) * per_weight)
            })
            .sum()
    }

    /// Assigns pod `i` to an existing block or a new one (restricted growth: each partition once).
    fn partitions(&mut self, i: usize, blocks: &mut Vec<Vec<usize>>) {
        if i == self.pods.len() {
            let choices: Vec<Vec<usize>> = blocks
                .iter()
                .map(|b| {
                    (0..self.offers.len())
                        .filter(|&o| self.fits(b, &self.offers[o]))
                        .collect()
                })
                .collect();
            let penalty = blocks.iter().map(|b| self.penalty(b)).sum();
            self.offerings(blocks, &choices, &mut Vec::new(), penalty);
            return;
        }
        for b in 0..=blocks.len() {
            if b == blocks.len() {
                blocks.push(vec![i]);
            } else {
                blocks[b].push(i);
            }
            if self.block_ok(&blocks[b]) {
                self.partitions(i + 1, blocks);
            }
            if blocks[b].len() == 1 {
                blocks.pop();
            } else {
                blocks[b].pop();
            }
        }
    }

    /// Chooses an offering for every block, then checks zone spread and keeps the cheapest.
    fn offerings(
        &mut self,
        blocks: &[Vec<usize>],
        choices: &[Vec<usize>],
        chosen: &mut Vec<usize>,
        cost: f64,
    ) {
        if self.best.is_some_and(|b| cost >= b + 1e-12) {
            return; // prices are non-negative: this branch cannot become cheaper
        }
        let j = chosen.len();
        if j == blocks.len() {
            if self.spread_ok(blocks, chosen) {
                self.best = Some(cost);
            }
            return;
        }
        for &o in &choices[j] {
            chosen.push(o);
            self.offerings(blocks, choices, chosen, cost + self.offers[o].price);
            chosen.pop();
        }
    }

    fn spread_ok(&self, blocks: &[Vec<usize>], chosen: &[usize]) -> bool {
        self.inst.classes.iter().enumerate().all(|(k, c)| {
            let Some(skew) = c.spread else { return true };
            let mut counts: std::collections::BTreeMap<String, i64> = self
                .inst
                .eligible_zones(k)
                .into_iter()
                .map(|z| (z, 0))
                .collect();
            for (b, &o) in blocks.iter().zip(chosen) {
                let n = b.iter().filter(|&&p| self.pods[p] == k).count() as i64;
                if n > 0 {
                    *counts.entry(self.offers[o].zone.clone()).or_insert(0) += n;
                }
            }
            counts.values().max().unwrap_or(&0) - counts.values().min().unwrap_or(&0)
                <= i64::from(skew)
        })
    }
}

/// The cheapest total price of a plan placing every pod, or `None` when no such plan exists.
fn brute_force(inst: &Instance) -> Option<f64> {
    let offers = inst
        .types
        .iter()
        .flat_map(|t| {
            t.offerings.iter().map(move |o| Offer {
                zone: o.zone.clone(),
                price: o.price,
                alloc: t.alloc(),
            })
        })
        .collect();
    let pods = inst.pods().into_iter().map(|p| p.class).collect();
    let mut s = Search {
        inst,
        pods,
        offers,
        best: None,
    };
    s.partitions(0, &mut Vec::new());
    s.best
}

// ------------------------------------------------------------------ the assertion

/// Solves with both strategies and holds them to the exhaustive optimum; returns it. With `exact` false
/// the MILP may cost more than the optimum (never less); everything else is checked all the same.
fn assert_matches_brute_force(inst: &Instance, exact: bool) -> Result<Option<f64>, String> {
    let best = brute_force(inst);
    let (snap, cat) = (inst.snapshot(), inst.catalog());
    let total = inst.pods().len();
    let mut report = format!("optimum by exhaustive search: {best:?}\n");
    let mut failures = Vec::new();
    for s in [Strategy::Milp, Strategy::Greedy] {
        let plan = solve_with(&snap, &cat, s);
        report += &format!("{}:\n{}", label(s), summary(&plan));
        if let Err(e) = check_plan(inst, &plan) {
            failures.push(format!("{}: infeasible plan: {e}", label(s)));
        }
        let all = placed(&plan) == total;
        match (best, s) {
            (None, _) if all => failures.push(format!(
                "{}: places every pod, which the search says is impossible",
                label(s)
            )),
            (None, _) => {}
            (Some(opt), Strategy::Milp) => {
                if !all {
                    failures.push(format!("milp leaves pods unplaced; ${opt} places them all"));
                } else if plan.objective < opt - EPS || (exact && plan.objective > opt + EPS) {
                    failures.push(format!(
                        "milp's objective is ${}, the optimum is ${opt}",
                        plan.objective
                    ));
                }
                if plan.lower_bound > opt + EPS {
                    failures.push(format!(
                        "milp lower bound {} is above the optimum ${opt}",
                        plan.lower_bound
                    ));
                }
            }
            (Some(opt), Strategy::Greedy) => {
                if all && plan.objective < opt - EPS {
                    failures.push(format!(
                        "greedy's objective is ${}, below the optimum ${opt}: the search or the checker is wrong",
                        plan.objective
                    ));
                }
            }
        }
    }
    if failures.is_empty() {
        Ok(best)
    } else {
        Err(format!(
            "{}\n{report}instance: {inst:#?}",
            failures.join("\n")
        ))
    }
}

/// A hand-picked case: the search must find `expected`, and the plans must match it.
fn hand_case(inst: Instance, expected: Option<f64>) {
    let found = brute_force(&inst);
    match (found, expected) {
        (Some(f), Some(e)) => assert!(
            (f - e).abs() < 1e-9,
            "the search finds ${f}, the hand computation ${e}"
        ),
        (f, e) => assert_eq!(f, e, "the search and the hand computation disagree"),
    }
    if let Err(e) = assert_matches_brute_force(&inst, true) {
        panic!("{e}");
    }
}

// ------------------------------------------------------------------ builders for the hand cases

fn off(zone: &str, ct: CapacityType, price: f64) -> OfferingSpec {
    OfferingSpec {
        zone: zone.into(),
        ct,
        price,
    }
}

fn od(zone: &str, price: f64) -> OfferingSpec {
    off(zone, CapacityType::OnDemand, price)
}

/// A type with 100m / 256Mi overhead: allocatable is (vcpu * 1000 - 100)m, (mem - 256)Mi.
fn ty(
    name: &str,
    vcpu: u32,
    mem_mib: i64,
    max_pods: u32,
    offerings: Vec<OfferingSpec>,
) -> TypeSpec {
    TypeSpec {
        name: name.into(),
        vcpu,
        mem_mib,
        max_pods,
        ovh_cpu_m: 100,
        ovh_mem_mib: 256,
        offerings,
    }
}

fn with(mut c: ClassSpec, f: impl FnOnce(&mut ClassSpec)) -> ClassSpec {
    f(&mut c);
    c
}

// ------------------------------------------------------------------ hand-picked cases

#[test]
fn two_small_nodes_beat_one_big() {
    // 2 x 1500m: a small node (1900m) holds one, a big one (3900m) both; 2 x $0.04 < $0.10
    hand_case(
        Instance {
            classes: vec![ClassSpec::plain("web", 2, 1500, 1024)],
            types: vec![
                ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)]),
                ty("b.big", 4, 8192, 16, vec![od("zone-a", 0.10)]),
            ],
        },
        Some(0.08),
    );
}

#[test]
fn one_big_node_beats_two_small() {
    hand_case(
        Instance {
            classes: vec![ClassSpec::plain("web", 2, 1500, 1024)],
            types: vec![
                ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)]),
                ty("b.big", 4, 8192, 16, vec![od("zone-a", 0.07)]),
            ],
        },
        Some(0.07),
    );
}

/// Two pods that prefer separate nodes with `weight`, and one node type at $0.04 that holds both.
fn prefer_apart_pair(weight: i32) -> Instance {
    Instance {
        classes: vec![with(ClassSpec::plain("web", 2, 500, 512), |c| {
            c.prefer_apart = Some(weight)
        })],
        types: vec![ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)])],
    }
}

#[test]
fn a_preferred_anti_affinity_buys_a_second_node_when_it_costs_less_than_the_penalty() {
    // sharing: $0.04 + 2 pods x weight 100 x $0.001 = $0.24; apart: 2 x $0.04
    hand_case(prefer_apart_pair(100), Some(0.08));
}

#[test]
fn a_light_preferred_anti_affinity_is_paid_rather_than_a_node() {
    // weight 10: sharing costs $0.04 + 2 x $0.01 = $0.06 against $0.08 apart
    hand_case(prefer_apart_pair(10), Some(0.06));
}

#[test]
fn anti_affinity_takes_one_node_per_pod() {
    // one small node would hold all three by size; anti-affinity needs three
    hand_case(
        Instance {
            classes: vec![with(ClassSpec::plain("db", 3, 500, 512), |c| c.anti = true)],
            types: vec![
                ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)]),
                ty("b.big", 4, 8192, 16, vec![od("zone-a", 0.10)]),
            ],
        },
        Some(0.12),
    );
}

#[test]
fn pod_count_cap_makes_three_tiny_nodes_cheapest() {
    // 5 tiny pods: 3 nodes of 2 pods ($0.03) beat a 4-pod node plus a 2-pod node ($0.04)
    hand_case(
        Instance {
            classes: vec![ClassSpec::plain("tiny", 5, 100, 128)],
            types: vec![
                ty("p.two", 2, 4096, 2, vec![od("zone-a", 0.01)]),
                ty("p.four", 2, 4096, 4, vec![od("zone-a", 0.03)]),
            ],
        },
        Some(0.03),
    );
}

#[test]
fn cpu_heavy_and_memory_heavy_pods_take_matching_types() {
    // c: 3900m/3840Mi $0.07, r: 1900m/16128Mi $0.09, m: 3900m/16128Mi $0.15;
    // c(2 cpu-heavy) + r(2 memory-heavy) = $0.16 beats m + c = $0.22
    hand_case(
        Instance {
            classes: vec![
                ClassSpec::plain("cpu", 2, 1800, 512),
                ClassSpec::plain("mem", 2, 200, 7000),
            ],
            types: vec![
                ty("c.large", 4, 4096, 16, vec![od("zone-a", 0.07)]),
                ty("r.large", 2, 16384, 16, vec![od("zone-a", 0.09)]),
                ty("m.xlarge", 4, 16384, 16, vec![od("zone-a", 0.15)]),
            ],
        },
        Some(0.16),
    );
}

#[test]
fn zone_selector_makes_a_shared_node_in_the_dearer_zone_cheapest() {
    // the pinned pod must go to zone-b; one big zone-b node for both ($0.06) beats two smalls ($0.09)
    hand_case(
        Instance {
            classes: vec![
                with(ClassSpec::plain("pinned", 1, 1500, 512), |c| {
                    c.zone = Some("zone-b".into())
                }),
                ClassSpec::plain("free", 1, 1500, 512),
            ],
            types: vec![
                ty(
                    "s.small",
                    2,
                    4096,
                    8,
                    vec![od("zone-a", 0.04), od("zone-b", 0.05)],
                ),
                ty("b.big", 4, 8192, 16, vec![od("zone-b", 0.06)]),
            ],
        },
        Some(0.06),
    );
}

#[test]
fn spot_offering_wins_where_it_exists() {
    hand_case(
        Instance {
            classes: vec![ClassSpec::plain("web", 3, 1000, 1024)],
            types: vec![
                ty(
                    "m.large",
                    4,
                    8192,
                    16,
                    vec![
                        od("zone-a", 0.10),
                        off("zone-a", CapacityType::Spot, 0.035),
                        od("zone-b", 0.10),
                    ],
                ),
                ty(
                    "s.small",
                    2,
                    4096,
                    8,
                    vec![od("zone-a", 0.04), od("zone-b", 0.04)],
                ),
            ],
        },
        Some(0.035),
    );
}

#[test]
fn zone_spread_puts_half_the_pods_in_the_dearer_zone() {
    // 4 pods, maxSkew 1 over zone-a and zone-b: 2 + 2, one small node per zone ($0.04 + $0.05)
    hand_case(
        Instance {
            classes: vec![with(ClassSpec::plain("web", 4, 500, 512), |c| {
                c.spread = Some(1)
            })],
            types: vec![
                ty(
                    "s.small",
                    2,
                    4096,
                    8,
                    vec![od("zone-a", 0.04), od("zone-b", 0.05)],
                ),
                ty("b.big", 4, 8192, 16, vec![od("zone-a", 0.07)]),
            ],
        },
        Some(0.09),
    );
}

#[test]
fn imbalanced_packing_mixes_a_big_and_a_small_node() {
    // 3 x 1200m + 3 x 600m: three smalls (1200+600 each) cost $0.12; a big (2x1200 + 2x600 = 3600m)
    // plus a small (1200+600) cost $0.115
    hand_case(
        Instance {
            classes: vec![
                ClassSpec::plain("large", 3, 1200, 512),
                ClassSpec::plain("small", 3, 600, 512),
            ],
            types: vec![
                ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)]),
                ty("b.big", 4, 8192, 16, vec![od("zone-a", 0.075)]),
            ],
        },
        Some(0.115),
    );
}

// Optimizer bug (the MILP's column generation stops early): it plans 4 nodes ($0.02) where 3 suffice.
// Classes in the model: c1 (1000m), c2 (500m/1Gi), c0 (250m/3Gi). After the greedy seed the LP is 3.33
// nodes with demand duals ~ (c1 0.00333, c2 0.00167, c0 0.005); the pattern {c0, c1} (1250m, 3328Mi)
// has reduced cost 0.005 - 0.005 - 0.00333 < 0, but the greedy knapsack pricer (`columns::pack`, by
// value per unit of scarcest resource) takes c1 then c2 and then cannot fit c0, finds nothing improving
// and column generation ends; the integer solve over the 6 seed patterns cannot do better than 4.
#[test]
fn milp_packs_six_pods_into_three_nodes() {
    // one offering, 1900m / 3840Mi: {c0, c1} (1250m, 3328Mi), {c1, c2} (1500m, 1280Mi), {c2, c2}
    hand_case(
        Instance {
            classes: vec![
                ClassSpec::plain("c0", 1, 250, 3072),
                ClassSpec::plain("c1", 2, 1000, 256),
                ClassSpec::plain("c2", 3, 500, 1024),
            ],
            types: vec![ty("t1.x", 2, 4096, 8, vec![od("zone-b", 0.005)])],
        },
        Some(0.015),
    );
}

#[test]
fn spread_pods_share_a_node_with_big_pods_in_one_zone() {
    // From a properties.rs counterexample: the spread pods go 2 + 2; the cheapest plan puts both big
    // pods with two spread pods on an m5.large in zone-a and the other two on an m5.medium in zone-b.
    let spot = |zone: &str, price| off(zone, CapacityType::Spot, price);
    hand_case(
        Instance {
            classes: vec![
                ClassSpec::plain("big", 2, 1500, 128),
                with(ClassSpec::plain("spread", 4, 250, 128), |c| {
                    c.spread = Some(1)
                }),
            ],
            types: vec![
                ty("m5.medium", 2, 4096, 8, vec![spot("zone-b", 0.016104)]),
                ty(
                    "m5.large",
                    4,
                    8192,
                    16,
                    vec![spot("zone-a", 0.030844), spot("zone-b", 0.031989)],
                ),
            ],
        },
        Some(0.046948),
    );
}

// Optimizer bug, same family: the MILP plan is greedy's 5 nodes ($0.046): c2-1 alone on a zone-a node.
// The generated patterns hold no zone-a pattern with a 500m pod and a c2 pod, so the integer solve
// cannot share the dear zone-a node.
#[test]
#[ignore = "known limit: column generation converges on LP-optimal patterns and the integer solve runs over those only (no branch-and-price); $0.046 where $0.041 is optimal"]
fn spread_pair_needs_one_node_in_the_dear_zone() {
    // Shrunk from the random family: four 500m pods need four 900m nodes (two never fit together);
    // the spread pair puts one 250m pod in each zone, so one node goes to the dear zone-a ($0.026) and
    // three to zone-b ($0.005 each): $0.041.
    let spot = |zone: &str, price| off(zone, CapacityType::Spot, price);
    hand_case(
        Instance {
            classes: vec![
                ClassSpec::plain("c0", 1, 500, 512),
                ClassSpec::plain("c1", 3, 500, 512),
                with(ClassSpec::plain("c2", 2, 250, 256), |c| c.spread = Some(1)),
            ],
            types: vec![
                ty("t0.x", 1, 2048, 2, vec![]),
                ty(
                    "t1.x",
                    1,
                    2048,
                    2,
                    vec![spot("zone-a", 0.026), spot("zone-b", 0.005)],
                ),
            ],
        },
        Some(0.041),
    );
}

#[test]
fn no_full_placement_leaves_a_pod_unschedulable() {
    // zone spread: zone-b only offers a type too small for the pods, so the global
    // minimum stays 0 there and maxSkew 1 admits one pod in zone-a; the second cannot be placed
    hand_case(
        Instance {
            classes: vec![with(ClassSpec::plain("db", 2, 1500, 512), |c| {
                c.spread = Some(1)
            })],
            types: vec![
                ty("s.small", 2, 4096, 8, vec![od("zone-a", 0.04)]),
                ty("t.tiny", 1, 2048, 4, vec![od("zone-b", 0.02)]),
            ],
        },
        None,
    );
}

// ------------------------------------------------------------------ random tiny cases

fn tiny_instance() -> impl proptest::strategy::Strategy<Value = Instance> {
    let class = (
        1usize..=3,
        prop::sample::select(vec![250i64, 500, 1000, 1500]),
        prop::sample::select(vec![256i64, 512, 1024, 2048, 3072]),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.2),
        prop::option::weighted(0.15, 0usize..2),
    );
    // (vcpu, memory, max pods) and, per zone x capacity type, an optional price in thousandths
    let type_spec = (
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![2048i64, 4096, 8192]),
        prop::sample::select(vec![2u32, 3, 8]),
        prop::collection::vec(prop::option::weighted(0.6, 5u32..=120), 4),
    );
    (
        prop::collection::vec(class, 1..=3),
        prop::collection::vec(type_spec, 2..=3),
        1usize..=2,
    )
        .prop_map(|(classes, types, zones)| {
            let mut left = 6usize;
            let classes = classes
                .into_iter()
                .enumerate()
                .filter_map(|(i, (count, cpu, mem, anti, spread, zone))| {
                    let count = count.min(left);
                    left -= count;
                    (count > 0).then(|| ClassSpec {
                        name: format!("c{i}"),
                        count,
                        cpu_m: cpu,
                        mem_mib: mem,
                        spread: spread.then_some(1),
                        anti,
                        zone: zone.filter(|&z| z < zones).map(|z| ZONES[z].to_string()),
                        prefer_apart: None,
                        prefer_type: None,
                        soft_spread: false,
                    })
                })
                .collect();
            let types = types
                .into_iter()
                .enumerate()
                .map(|(i, (vcpu, mem, max_pods, prices))| {
                    let mut offerings = Vec::new();
                    for (j, p) in prices.into_iter().enumerate() {
                        let (z, ct) = (
                            j / 2,
                            if j % 2 == 0 {
                                CapacityType::OnDemand
                            } else {
                                CapacityType::Spot
                            },
                        );
                        if let (true, Some(p)) = (z < zones, p) {
                            offerings.push(off(ZONES[z], ct, f64::from(p) / 1000.0));
                        }
                    }
                    ty(&format!("t{i}.x"), vcpu, mem, max_pods, offerings)
                })
                .collect();
            Instance { classes, types }
        })
        .prop_filter("at least two pods", |inst| inst.pods().len() >= 2)
}

/// A tiny instance whose classes without required anti-affinity may prefer to be apart.
fn tiny_preferring_instance() -> impl proptest::strategy::Strategy<Value = Instance> {
    let weights = prop::collection::vec(
        prop::option::weighted(0.5, prop::sample::select(vec![1i32, 10, 40, 100])),
        3,
    );
    (tiny_instance(), weights).prop_map(|(mut inst, weights)| {
        for (c, w) in inst.classes.iter_mut().zip(weights) {
            c.prefer_apart = w.filter(|_| !c.anti);
        }
        inst
    })
}

fn config(cases: u32) -> ProptestConfig {
    proptest_config(cases, 0x62_7275_7465)
}

proptest! {
    #![proptest_config(config(32))]

    /// Everything but exactness: both plans feasible, the MILP places every pod whenever some plan
    /// can and never costs less than the optimum (that would mean the search or the checker is
    /// wrong), its lower bound stays below the optimum, greedy never beats it.
    #[test]
    fn plans_are_sound_against_exhaustive_search(inst in tiny_instance()) {
        if let Err(e) = assert_matches_brute_force(&inst, false) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The same soundness with preferred hostname anti-affinity priced in: the search minimises
    /// price plus penalty, and the plans' objectives are held to it.
    #[test]
    fn plans_with_preferred_anti_affinity_are_sound_against_exhaustive_search(inst in tiny_preferring_instance()) {
        if let Err(e) = assert_matches_brute_force(&inst, false) {
            return Err(TestCaseError::fail(e));
        }
    }
}

proptest! {
    // 200 cases: at the fixed seed the first miss shows up after 100 (with 300 cases every seed tried
    // finds one). Shrunk misses are the ignored hand cases above; more seen while exploring, all
    // "plan from greedy" with the integer solve "optimal" over the generated patterns:
    // - c0 2 x (250m, 256Mi) zone spread, c1 2 x (500m, 256Mi) hostname anti-affinity; t0.x (1 vcpu,
    //   2 pods) zone-a on-demand $0.005, t1.x (same) zone-b spot $0.010: $0.02 planned, $0.015 optimal;
    // - c0 3 x (250m, 1Gi), c1 2 x (250m, 512Mi) zone spread, c2 1 x (250m, 512Mi); 1 vcpu / 4096Mi /
    //   3 pods in zone-a and zone-b at $0.005 each: $0.015 planned, $0.01 optimal.
    #![proptest_config(config(200))]

    #[test]
    fn milp_matches_exhaustive_search_on_tiny_instances(inst in tiny_instance()) {
        if let Err(e) = assert_matches_brute_force(&inst, true) {
            return Err(TestCaseError::fail(e));
        }
    }
}
