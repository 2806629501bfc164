//! Property tests of the decision core (`joiner::optimizer::solve`) on small random instances, for both
//! strategies (greedy and MILP).
//!
//! An instance is 1-4 pod classes of 1-8 pods each (cpu and memory from small sets, optionally a zone
//! topology spread, DoNotSchedule or ScheduleAnyway, hostname anti-affinity, a zone nodeSelector or
//! a preferred instance type)
//! against a hand-written catalog of
//! 3-6 instance types x 2 zones x {on-demand, spot}, some offerings randomly missing. Every type has an
//! explicit overhead, so allocatable is known exactly, and every offering a distinct, "generic" price,
//! so cost ties (which would make the chosen nodes legitimately arbitrary) practically never occur.
//!
//! Properties:
//! - determinism: the same input solved twice gives byte-identical plan JSON, `solver.seconds` aside;
//! - input-order independence: pod order in the snapshot is irrelevant (pods are grouped into classes
//!   and sorted), so the nodes, each with its sorted pod list, are the same up to node ids; under a
//!   reordered catalog (types, and offerings within a type) the cost, the launched offerings and the
//!   unschedulable pods stay the same for both strategies, and greedy's nodes hold the same pods (with
//!   distinct prices no choice of it should depend on the order; the MILP may legitimately swap pods
//!   between nodes at equal total cost, so only its offerings are compared);
//! - feasibility: the independent checker in `support/builders.rs` (every pod once, fit within the
//!   exact allocatable, selectors, anti-affinity, DoNotSchedule spread skew, prices, no needless
//!   unschedulable pod);
//! - quality: the MILP never scores worse than greedy (it places at least as many pods and, placing as
//!   many, its objective is no higher: it may cost more where it meets a preference greedy gave up),
//!   and `lower_bound <= objective` for both.
//!
//! Cases come from a fixed seed (32-48 per property, a few seconds in release mode); `PROPTEST_CASES`
//! and `PROPTEST_RNG_SEED` explore further. Regressions are not persisted to files: a shrunk
//! counterexample belongs in a named test below. Tests marked `#[ignore]` state an optimizer bug and pass
//! once it is fixed (`cargo test --release --test properties -- --ignored`): catalog-order independence
//! fails for greedy (its claim's zone follows the catalog order) and, less often, for the MILP.

#[path = "support/builders.rs"]
mod builders;

use builders::*;
use joiner::catalog::CapacityType;
use joiner::optimizer::{solve, SolveSettings, Strategy};
use proptest::prelude::*;
use proptest::sample::subsequence;
use proptest::strategy::Strategy as _;

const STRATEGIES: [Strategy; 2] = [Strategy::Greedy, Strategy::Milp];
const CPU_M: [i64; 6] = [100, 250, 500, 1000, 1500, 2500];
const MEM_MIB: [i64; 6] = [128, 256, 512, 1024, 2048, 3072];
/// (name, vcpu, memory MiB, max pods, on-demand price in zone-a)
const TYPES: [(&str, u32, i64, u32, f64); 6] = [
    ("t3.small", 1, 2048, 4, 0.0213),
    ("m5.medium", 2, 4096, 8, 0.0417),
    ("c5.large", 4, 4096, 16, 0.0731),
    ("m5.large", 4, 8192, 16, 0.0829),
    ("r5.large", 2, 16384, 16, 0.1013),
    ("m5.xlarge", 8, 16384, 32, 0.1693),
];
const PRIMES: [u32; 24] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89,
];

/// A distinct, generic price: zone-b about 4% dearer, spot about 37% of on-demand, plus up to 1% of
/// jitter from the fractional part of a prime's square root, rounded to 6 decimals.
fn price(t: usize, z: usize, ct: usize) -> f64 {
    let p = f64::from(PRIMES[t * 4 + z * 2 + ct]).sqrt();
    let raw = TYPES[t].4 * [1.0, 1.04][z] * [1.0, 0.37][ct] * (1.0 + 0.01 * p.fract());
    (raw * 1e6).round() / 1e6
}

fn catalog_types(chosen: &[usize], present: &[bool]) -> Vec<TypeSpec> {
    chosen
        .iter()
        .map(|&t| {
            let (name, vcpu, mem_mib, max_pods, _) = TYPES[t];
            let mut offerings = Vec::new();
            for z in 0..2 {
                for (c, ct) in [CapacityType::OnDemand, CapacityType::Spot]
                    .into_iter()
                    .enumerate()
                {
                    if present[t * 4 + z * 2 + c] {
                        offerings.push(OfferingSpec {
                            zone: ZONES[z].into(),
                            ct,
                            price: price(t, z, c),
                        });
                    }
                }
            }
            TypeSpec {
                name: name.into(),
                vcpu,
                mem_mib,
                max_pods,
                ovh_cpu_m: 100,
                ovh_mem_mib: 256,
                offerings,
            }
        })
        .collect()
}

/// (pods, cpu index, memory index, spread maxSkew, anti-affinity, zone index, soft spread, preferred
/// type: index into TYPES and weight)
type ClassDraw = (
    usize,
    usize,
    usize,
    Option<u32>,
    bool,
    Option<usize>,
    bool,
    Option<(usize, i32)>,
);

fn class_strategy() -> impl proptest::strategy::Strategy<Value = ClassDraw> {
    (
        1usize..=8,
        0..CPU_M.len(),
        0..MEM_MIB.len(),
        prop_oneof![3 => Just(None), 1 => Just(Some(1u32)), 1 => Just(Some(2u32))],
        proptest::bool::weighted(0.25),
        prop_oneof![3 => Just(None), 1 => Just(Some(0usize)), 1 => Just(Some(1usize))],
        // a spread made ScheduleAnyway: the baseline holds it while it can, the MILP prices it
        proptest::bool::weighted(0.3),
        // a preferred instance type (maybe not in the catalog), held by the baseline, priced by the
        // MILP (0.01-0.10 $/h a pod: of the order of the price differences between types)
        prop_oneof![3 => Just(None), 1 => (0..TYPES.len(), prop_oneof![Just(10), Just(50), Just(100)]).prop_map(Some)],
    )
}

fn instance_strategy() -> impl proptest::strategy::Strategy<Value = Instance> {
    (
        proptest::collection::vec(class_strategy(), 1..=4),
        subsequence((0..TYPES.len()).collect::<Vec<_>>(), 3..=TYPES.len()),
        proptest::collection::vec(proptest::bool::weighted(0.85), 24),
    )
        .prop_map(|(classes, chosen, present)| Instance {
            classes: classes
                .into_iter()
                .enumerate()
                .map(
                    |(i, (count, cpu, mem, spread, anti, zone, soft_spread, prefer_type))| {
                        ClassSpec {
                            name: format!("c{i}"),
                            count,
                            cpu_m: CPU_M[cpu],
                            mem_mib: MEM_MIB[mem],
                            spread,
                            soft_spread,
                            anti,
                            zone: zone.map(|z| ZONES[z].to_string()),
                            prefer_apart: None,
                            prefer_type: prefer_type.map(|(t, w)| (TYPES[t].0.to_string(), w)),
                        }
                    },
                )
                .collect(),
            types: catalog_types(&chosen, &present),
        })
}

/// A seeded permutation of 0..n (SplitMix64 + Fisher-Yates), so shrinking keeps the seed meaningful.
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

fn config(cases: u32) -> ProptestConfig {
    proptest_config(cases, 0x6a6f_696e_6572)
}

// ------------------------------------------------------------------ the properties, as plain checks

fn check_determinism(inst: &Instance) -> Result<(), TestCaseError> {
    let (snap, cat) = (inst.snapshot(), inst.catalog());
    for s in STRATEGIES {
        let a = json_without_time(&solve_with(&snap, &cat, s));
        let b = json_without_time(&solve_with(&snap, &cat, s));
        prop_assert!(
            a == b,
            "{}: two solves of the same input differ\nfirst:\n{a}\nsecond:\n{b}",
            label(s)
        );
    }
    Ok(())
}

fn check_pod_order(inst: &Instance, seed: u64) -> Result<(), TestCaseError> {
    let cat = inst.catalog();
    let n = inst.pods().len();
    for s in STRATEGIES {
        let base = solve_with(&inst.snapshot(), &cat, s);
        let shuffled = solve_with(&inst.snapshot_ordered(&permutation(n, seed)), &cat, s);
        prop_assert!(
            nodes_canonical(&base) == nodes_canonical(&shuffled)
                && unschedulable_set(&base) == unschedulable_set(&shuffled)
                && (base.cost_per_hour - shuffled.cost_per_hour).abs() <= EPS,
            "{}: reordering the pods changes the plan\nmodel order:\n{}shuffled:\n{}",
            label(s),
            summary(&base),
            summary(&shuffled)
        );
    }
    Ok(())
}

fn check_catalog_order(inst: &Instance, seed: u64, s: Strategy) -> Result<(), TestCaseError> {
    let snap = inst.snapshot();
    let order = permutation(inst.types.len(), seed);
    let base = solve_with(&snap, &inst.catalog(), s);
    let shuffled = solve_with(&snap, &inst.catalog_ordered(&order), s);
    let why = format!(
        "{}: catalog order {order:?} changes the plan\nmodel order:\n{}shuffled:\n{}",
        label(s),
        summary(&base),
        summary(&shuffled)
    );
    prop_assert!(
        (base.cost_per_hour - shuffled.cost_per_hour).abs() <= EPS,
        "cost: {why}"
    );
    prop_assert_eq!(
        unschedulable_set(&base),
        unschedulable_set(&shuffled),
        "unschedulable: {}",
        why
    );
    prop_assert_eq!(
        offerings_canonical(&base),
        offerings_canonical(&shuffled),
        "offerings: {}",
        why
    );
    if s == Strategy::Greedy {
        prop_assert_eq!(
            nodes_canonical(&base),
            nodes_canonical(&shuffled),
            "nodes: {}",
            why
        );
    }
    Ok(())
}

fn check_feasible(inst: &Instance) -> Result<(), TestCaseError> {
    let (snap, cat) = (inst.snapshot(), inst.catalog());
    for s in STRATEGIES {
        let plan = solve_with(&snap, &cat, s);
        if let Err(e) = check_plan(inst, &plan) {
            return Err(TestCaseError::fail(format!(
                "{}: {e}\n{}",
                label(s),
                summary(&plan)
            )));
        }
    }
    Ok(())
}

fn check_milp_vs_greedy(inst: &Instance) -> Result<(), TestCaseError> {
    let (snap, cat) = (inst.snapshot(), inst.catalog());
    let g = solve_with(&snap, &cat, Strategy::Greedy);
    let m = solve_with(&snap, &cat, Strategy::Milp);
    let why = format!("\ngreedy:\n{}milp:\n{}", summary(&g), summary(&m));
    for p in [&g, &m] {
        prop_assert!(
            p.lower_bound <= p.objective + EPS,
            "{:?}: lower bound above objective{why}",
            p.strategy
        );
    }
    prop_assert!(
        placed(&m) >= placed(&g),
        "milp places fewer pods than greedy{why}"
    );
    if placed(&m) == placed(&g) {
        prop_assert!(
            m.objective <= g.objective + EPS,
            "milp objective above greedy's{why}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn solving_twice_gives_identical_plans(inst in instance_strategy()) {
        check_determinism(&inst)?;
    }

    #[test]
    fn pod_order_does_not_matter(inst in instance_strategy(), seed in any::<u64>()) {
        check_pod_order(&inst, seed)?;
    }
}

/// Two neighbourhood searches side by side (`SolveSettings::searches`): the plan is feasible, no
/// worse than greedy's (each search only keeps what scores lower than the plan it starts from), and,
/// as long as both searches end before the clock, the choice between them is deterministic.
fn check_side_by_side_searches(inst: &Instance) -> Result<(), TestCaseError> {
    let (snap, cat) = (inst.snapshot(), inst.catalog());
    let two = SolveSettings {
        searches: 2,
        ..settings(Strategy::Milp)
    };
    let g = solve_with(&snap, &cat, Strategy::Greedy);
    let a = solve(&snap, &cat, &two).expect("solve returns a plan");
    let b = solve(&snap, &cat, &two).expect("solve returns a plan");
    let why = format!("\ngreedy:\n{}two searches:\n{}", summary(&g), summary(&a));
    if let Err(e) = check_plan(inst, &a) {
        return Err(TestCaseError::fail(format!("two searches: {e}{why}")));
    }
    prop_assert!(
        placed(&a) >= placed(&g),
        "two searches place fewer pods than greedy{why}"
    );
    if placed(&a) == placed(&g) {
        prop_assert!(
            a.objective <= g.objective + EPS,
            "two searches score above greedy{why}"
        );
    }
    prop_assert!(
        json_without_time(&a) == json_without_time(&b),
        "two solves with two searches differ{why}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn side_by_side_searches_are_feasible_and_deterministic(inst in instance_strategy()) {
        check_side_by_side_searches(&inst)?;
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn plans_are_feasible(inst in instance_strategy()) {
        check_feasible(&inst)?;
    }

    #[test]
    fn milp_is_never_worse_than_greedy_and_bounds_hold(inst in instance_strategy()) {
        check_milp_vs_greedy(&inst)?;
    }
}

proptest! {
    // 100 cases: at the fixed seed the first violation shows up after 32 (other seeds find one sooner).
    // Greedy fails it: see `greedy_claim_zone_follows_offering_order`. The MILP fails it too, less
    // often, as a consequence of not being exact (tests/bruteforce.rs): e.g. a 17-pod, 4-class instance
    // whose MILP plan cost changes with the type order although the integer solve over the generated
    // patterns reports "optimal" both times.
    #![proptest_config(config(100))]

    #[test]
    fn catalog_order_does_not_matter(inst in instance_strategy(), seed in any::<u64>()) {
        for s in STRATEGIES {
            check_catalog_order(&inst, seed, s)?;
        }
    }
}

// ------------------------------------------------------------------ fixed cases

/// Every constraint kind at once, on the full catalog: a smoke test that runs all properties on one
/// known instance, so a broken generator cannot hide everything.
#[test]
fn all_properties_hold_on_a_mixed_instance() {
    let all = vec![true; 24];
    let mut spread = ClassSpec::plain("web", 4, 500, 512);
    spread.spread = Some(1);
    let mut anti = ClassSpec::plain("db", 3, 1000, 2048);
    anti.anti = true;
    let mut pinned = ClassSpec::plain("cache", 2, 250, 3072);
    pinned.zone = Some("zone-b".into());
    let inst = Instance {
        classes: vec![
            spread,
            anti,
            pinned,
            ClassSpec::plain("batch", 5, 1500, 1024),
        ],
        types: catalog_types(&[0, 1, 2, 3, 4, 5], &all),
    };
    let run = |r: Result<(), TestCaseError>| r.unwrap_or_else(|e| panic!("{e}"));
    run(check_determinism(&inst));
    run(check_pod_order(&inst, 7));
    for s in STRATEGIES {
        run(check_catalog_order(&inst, 11, s));
    }
    run(check_feasible(&inst));
    run(check_milp_vs_greedy(&inst));
    let m = solve_with(&inst.snapshot(), &inst.catalog(), Strategy::Milp);
    assert!(m.unschedulable.is_empty(), "{}", summary(&m));
}

fn spot(zone: &str, price: f64) -> OfferingSpec {
    OfferingSpec {
        zone: zone.into(),
        ct: CapacityType::Spot,
        price,
    }
}

fn small_type(name: &str, vcpu: u32, mem_mib: i64, offerings: Vec<OfferingSpec>) -> TypeSpec {
    TypeSpec {
        name: name.into(),
        vcpu,
        mem_mib,
        max_pods: 16,
        ovh_cpu_m: 100,
        ovh_mem_mib: 256,
        offerings,
    }
}

/// Shrunk counterexamples of `catalog_order_does_not_matter` for greedy. Greedy takes the `c1` pods
/// (no topology rule, larger) first: they open one claim whose candidates are every offering. Adding
/// the second `c1` pod re-represents the claim by its *first* surviving candidate in (type, offering)
/// index order, not its cheapest, and the zone-spread pod `c0` then keeps only candidates in that
/// representative's zone, although either zone satisfies the spread (both are empty).
/// - one type, c5.large, zone-a $0.027151 and zone-b $0.028152: listing zone-b first launches zone-b;
/// - m5.large zone-b spot $0.031989 and m5.xlarge zone-a on-demand $0.170221: listing m5.xlarge first
///   launches the m5.xlarge, 5.3 times the price.
#[test]
fn greedy_claim_zone_follows_offering_order() {
    let mut c0 = ClassSpec::plain("c0", 1, 100, 128);
    c0.spread = Some(1);
    let cases = [
        (
            vec![small_type(
                "c5.large",
                4,
                4096,
                vec![spot("zone-a", 0.027151), spot("zone-b", 0.028152)],
            )],
            0.027151,
        ),
        (
            vec![small_type(
                "c5.large",
                4,
                4096,
                vec![spot("zone-b", 0.028152), spot("zone-a", 0.027151)],
            )],
            0.027151,
        ),
        (
            vec![
                small_type("m5.large", 4, 8192, vec![spot("zone-b", 0.031989)]),
                small_type(
                    "m5.xlarge",
                    8,
                    16384,
                    vec![OfferingSpec {
                        zone: "zone-a".into(),
                        ct: CapacityType::OnDemand,
                        price: 0.170221,
                    }],
                ),
            ],
            0.031989,
        ),
    ];
    let mut failures = Vec::new();
    for (types, best) in cases {
        let inst = Instance {
            classes: vec![c0.clone(), ClassSpec::plain("c1", 2, 500, 1024)],
            types,
        };
        let orders = if inst.types.len() == 1 {
            vec![vec![0]]
        } else {
            vec![vec![0, 1], vec![1, 0]]
        };
        for order in orders {
            let (snap, cat) = (inst.snapshot(), inst.catalog_ordered(&order));
            for s in STRATEGIES {
                let plan = solve_with(&snap, &cat, s);
                check_plan(&inst, &plan)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", label(s), summary(&plan)));
                let listed: Vec<String> = cat
                    .instance_types
                    .iter()
                    .flat_map(|t| {
                        t.offerings
                            .iter()
                            .map(move |o| format!("{} {}", t.name, o.zone))
                    })
                    .collect();
                if (plan.cost_per_hour - best).abs() > EPS {
                    failures.push(format!(
                        "{}, offerings listed {listed:?}: one node at ${best} holds all three pods\n{}",
                        label(s),
                        summary(&plan)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
