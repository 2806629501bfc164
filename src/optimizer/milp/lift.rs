//! A plan candidate from the relaxation (`relax.rs`): its pattern LP, its patterns' copies bought
//! and spread over zones by a small integer program (`zonal.rs`), and each relaxed pod slot given
//! back to a pod of the full problem. Where no zone rule is left (zones pinned first, `pin.rs`) and
//! there is time for it, the copies are bought instead by HiGHS's integer program over the relaxed
//! patterns (`restricted.rs`), which places every pod, over a relaxation that keeps the hostname
//! spreads' per-node caps.
//!
//! On Karpenter's diverse mix at 1,000 pods the full model's 600 classes keep column generation
//! far from converged when its share of a 10 s solve runs out (an LP of about 4.9 $/h), and its
//! roundings replay at 5.8 $/h or more; the relaxation's 60-odd classes reach an LP of about
//! 3.85 $/h within a second. Its patterns say which nodes to buy and how many pods of each request
//! go on each; the zone program says how many copies of each and in which zone, and how many pods
//! of each zone spread group a zone takes; the lifting chooses the pods. A slot of a merged class
//! goes to a member class the node's own rules admit (hostname spread caps, anti-affinity
//! conflicts) and the zones allow (its zone affinity's zone, its spread group's quota there):
//! first the classes whose kind of pod (spread group and allowed zones) the program put in that
//! zone with that request, most still wanted first, then classes bound to zones, then the one with
//! the most pods still unassigned. Without the first rule the slots of a dear zone went to the
//! spread group with the most pods left, whose pods the program had put elsewhere, while the
//! group it had planned there ran out of pods of that request in the cheaper zones' nodes filled
//! before: at 10,000 pods of the diverse mix the groups' quotas in us-east-1e went 20-26 of 27-29
//! pods unfilled, and the replay refused 1,506 of the 2,000 zone-spread pods. A slot
//! whose every member is blocked by a pod of its own Deployment in another slot is traded for
//! with the node's other slots and with earlier nodes (`Lifting::trade`). A pod still left once
//! every node is filled is placed by a short path of displacements over all the nodes
//! (`Lifting::augment`). The lifted
//! patterns are then replayed like any other candidate: the replay checks every rule pod by pod,
//! and the greedy repair places what it refuses or what the lifting left out.
//!
//! Without the zone program (the LP's copies rounded to the nearest, in the LP's zones) the
//! candidate replayed at 5.2-5.3 $/h at 1,000 pods, the repair placing the zone-spread pods the
//! replay refused; with the copies rounded but moved between zones, at about 4.6.

use std::collections::{BTreeMap, BTreeSet};

use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::{Bin, Column, NodeRules};
use super::zonal::{self, Zoned};
use super::{primal, relax, restricted};

/// The relaxation's candidates: its zone program's, and where no zone rule is left for that
/// program to settle (a problem whose zones were pinned first, `pin.rs`) and either it did not
/// prove its answer in time or the time limit is under [`COVER_SECONDS_PER_POD`] per pod, its LP's
/// copies rounded down with the rest covered by whole patterns (`primal::cover_counts`). Both are
/// replayed and the cheaper plan is kept. Where no zone rule is left and the candidate has
/// [`MIN_INTEGER_SECONDS`] after its column generation, the first is the restricted master's
/// integer program's (started from the cover) instead of the zone program's; the cover is kept
/// under the same conditions, with "proved" meaning the integer program's proof. Where column
/// generation stopped on its own and time is left after that program, a third candidate comes from
/// the generation resumed in the bound's pricing mode and a second integer program ([`extend`]).
///
/// The zone program values each pod it leaves out at twice its LP dual, and at 1,000 pods of the
/// diverse mix (zones pinned, 10 s) it left 43 for the greedy repair, whose nodes took its
/// candidate from 3.797 $/h planned to 4.038 replayed; the integer program planned 3.843 with every
/// pod placed and replayed at 3.996, the lifting leaving 24-25 hostname spread pods without a slot.
/// With the relaxation's per-node caps (`relax::capped_spreads`) it planned 3.844 and replayed at
/// 3.872 (10 pods repaired).
///
/// On Karpenter's diverse mix with pinned zones at 10 s, at 5,000 pods the zone program often stops
/// at its limit, and the cover's candidate then replayed at 21.31 $/h against 21.87-21.94 (four
/// runs). At 1,000 pods the program mostly proves its answer; when the cover ran there too it won 2
/// of 3 runs by at most 0.13, and the neighbourhood search then improved those plans less
/// (objective 3.97 and 4.01, against 3.98 in the run the program's won).
pub struct Candidates {
    pub zones: Option<Vec<(Column, u32)>>,
    pub cover: Option<Vec<(Column, u32)>>,
    pub extended: Option<Vec<(Column, u32)>>,
    pub run: Run,
}

/// How the relaxation's search went: its pattern LP's size, and whether it ended on its own (column
/// generation found no more improving patterns and the copies were proven best over them).
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub variables: usize,
    pub constraints: usize,
    pub finished: bool,
}

impl Candidates {
    /// Each candidate there is, the zone program's first, named `zones` or `cover` after its
    /// rounding.
    pub fn named(self, zones: &str, cover: &str) -> Vec<(String, Vec<(Column, u32)>)> {
        let extended = format!("{zones}-extended");
        [
            (zones, self.zones),
            (extended.as_str(), self.extended),
            (cover, self.cover),
        ]
        .into_iter()
        .filter_map(|(name, c)| c.map(|c| (name.to_string(), c)))
        .collect()
    }
}

/// The candidates for placing `demand[k]` pods of each class of `p`, from a relaxation, its greedy
/// start, its column generation and the zones for its nodes within `seconds` in all; None when the
/// relaxation does not shrink the problem (the full model's own LP is then as good), its LP fails
/// or no time is left for it.
pub fn candidates(
    p: &Problem,
    demand: &[u32],
    settings: &SolveSettings,
    seconds: f64,
) -> Option<Candidates> {
    let began = std::time::Instant::now();
    let short = settings.time_limit.as_secs_f64() < COVER_SECONDS_PER_POD * p.total_pods() as f64;
    // with no zone rule left and time for it, the integer program buys the copies (see
    // `restricted`), over patterns that keep the hostname spreads' per-node caps
    // (`relax::capped_spreads`)
    let integer = zonal::zoneless(p) && seconds * (1.0 - COLUMN_SHARE) >= MIN_INTEGER_SECONDS;
    let relaxed = relax::Relaxed::of(p, demand, integer)?;
    let seed = relaxed.seed();
    tracing::debug!(
        seconds = began.elapsed().as_secs_f64(),
        classes = relaxed.problem.classes.len(),
        "relaxation and its greedy seed built"
    );
    let left = seconds - began.elapsed().as_secs_f64();
    if left < 0.05 {
        return None;
    }
    let settings = SolveSettings {
        time_limit: std::time::Duration::from_secs_f64(left * COLUMN_SHARE),
        lower_bound: false,
        ..settings.clone()
    };
    let generated = super::columns_and_bound(
        &relaxed.problem,
        &settings,
        &seed,
        &relaxed.demand,
        super::Unproven::Large,
    )
    .ok()?;
    tracing::debug!(
        seconds = began.elapsed().as_secs_f64(),
        columns = generated.columns.len(),
        "relaxation's columns generated"
    );
    let for_zones = (seconds - began.elapsed().as_secs_f64()).max(MIN_ZONE_SECONDS);
    let mut extended = None;
    let (zones, proven, start) = if integer {
        // nothing for the zone program to settle but the copies: the integer program buys them
        // with every pod placed, from the cover
        let start = cover_counts(&relaxed.demand, &generated);
        let bought = restricted::copies(
            &relaxed.problem,
            &relaxed.demand,
            &generated,
            &start,
            &settings,
            for_zones,
        );
        let proven = bought.as_ref().is_some_and(|b| b.proven);
        if let Some(b) = bought.as_ref().filter(|_| !generated.timed_out) {
            extended = extend(
                &relaxed,
                &seed,
                &generated,
                &b.copies,
                &settings,
                seconds - began.elapsed().as_secs_f64(),
            )
            .map(|(more, copies)| lifted(p, &relaxed, demand, &more, &copies));
        }
        (
            bought.map(|b| lifted(p, &relaxed, demand, &generated, &b.copies)),
            proven,
            Some(start),
        )
    } else {
        // every pattern the LP uses: the zone program decides how many copies to buy (see zonal.rs)
        let chosen: Vec<(&Column, f64)> = generated
            .columns
            .iter()
            .zip(&generated.lp_values)
            .filter(|(_, &v)| v > 1e-6)
            .map(|(c, &v)| (c, v))
            .collect();
        let zoned = zonal::assign(
            p,
            &relaxed.problem,
            &relaxed.of_class,
            demand,
            &chosen,
            &generated.pod_prices,
            for_zones,
        );
        let proven = zoned.as_ref().is_some_and(|z| z.proven);
        (
            zoned.map(|zoned| lift(p, &relaxed.of_class, demand, &zoned, &chosen)),
            proven,
            None,
        )
    };
    let cover = (zonal::zoneless(p) && (short || !proven)).then(|| {
        let copies = start.unwrap_or_else(|| cover_counts(&relaxed.demand, &generated));
        lifted(p, &relaxed, demand, &generated, &copies)
    });
    let run = Run {
        variables: generated.size.0,
        constraints: generated.size.1,
        finished: proven && !generated.timed_out,
    };
    (zones.is_some() || cover.is_some()).then_some(Candidates {
        zones,
        cover,
        extended,
        run,
    })
}

/// Column generation resumed from `generated`'s patterns, once it stopped on its own (the exact
/// search found no improving pattern it could prove or that was large enough), in the bound's
/// pricing mode: every improving pattern the search finds enters, and HiGHS asks every bin the
/// search leaves open, both on every core. Then the integer program over all the patterns, from
/// `bought` (copies of `generated`'s): the extended patterns and their copies; None when fewer than
/// [`MIN_EXTENSION_SECONDS`] are left, the LP did not move or HiGHS has no answer.
///
/// At 1,000 pods of the diverse mix the pinned candidate's generation ends at about 3.776 $/h after
/// 3 s, and in a 10 s solve the extension's integer program plans 3.778. It runs only with
/// [`MIN_EXTENSION_SECONDS`] left (docs/optimizer.md): where that generation stopped at 3.800 $/h
/// after 4.4 s (35 bins open, its integer program proving 3.823), a 10 s solve left the extension
/// about 2.5 s, two HiGHS passes on two cores (one on one), an LP of 3.785 and an integer program
/// that found nothing cheaper than 3.823; given 20 s, the resumed generation took the LP to
/// 3.772-3.777 in 8.7-9.2 s (five HiGHS passes) and the integer program proved 3.782-3.796 with
/// every pod lifted.
fn extend(
    relaxed: &relax::Relaxed,
    seed: &super::super::state::State<'_>,
    generated: &super::Generation,
    bought: &[u32],
    settings: &SolveSettings,
    seconds: f64,
) -> Option<(super::Generation, Vec<u32>)> {
    if seconds < MIN_EXTENSION_SECONDS {
        return None;
    }
    let began = std::time::Instant::now();
    let lp = |g: &super::Generation| {
        g.columns
            .iter()
            .zip(&g.lp_values)
            .map(|(c, v)| c.cost * v)
            .sum::<f64>()
    };
    let columns = SolveSettings {
        time_limit: std::time::Duration::from_secs_f64(seconds * EXTENSION_COLUMN_SHARE),
        ..settings.clone()
    };
    // the bound's thread is the only other one, and at 1,000 pods of the diverse mix it is done by
    // now
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let more = super::columns_and_bound_seeded(
        &relaxed.problem,
        &columns,
        seed,
        &relaxed.demand,
        (super::Unproven::Any, threads),
        super::bins(&relaxed.problem),
        &generated.columns,
    )
    .ok()?;
    tracing::debug!(
        seconds = began.elapsed().as_secs_f64(),
        columns = more.columns.len(),
        lp = lp(&more),
        before = lp(generated),
        "relaxation's columns extended"
    );
    if lp(&more) > lp(generated) - 1e-6 {
        return None;
    }
    let at: BTreeMap<PatternRef<'_>, u32> = generated
        .columns
        .iter()
        .zip(bought)
        .filter(|(_, &n)| n > 0)
        .map(|(c, &n)| ((c.bin, c.counts.as_slice()), n))
        .collect();
    let start: Vec<u32> = more
        .columns
        .iter()
        .map(|c| at.get(&(c.bin, c.counts.as_slice())).copied().unwrap_or(0))
        .collect();
    let tight = SolveSettings {
        gap: settings.gap.min(EXTENSION_GAP),
        ..settings.clone()
    };
    let copies = restricted::copies(
        &relaxed.problem,
        &relaxed.demand,
        &more,
        &start,
        &tight,
        seconds - began.elapsed().as_secs_f64(),
    )?;
    Some((more, copies.copies))
}

/// A pattern's bin and counts, borrowed.
type PatternRef<'a> = (Bin, &'a [(usize, u32)]);

/// The least time left after the candidate's integer program for [`extend`]. Where that left it
/// about 3.2 s (1,000 pods of the diverse mix, 10 s, a generation that stopped after 4.4 s), its
/// candidate never won in 21 runs of its variants, while the neighbourhood search, left with 1.3 s
/// instead of 4, lost the step that takes the plan from 3.8356 to 3.8318 $/h in two runs of five
/// (none of four without the extension). The candidate's generation there ends after about 3 s, so
/// the extension runs at 10 s too.
const MIN_EXTENSION_SECONDS: f64 = 5.0;
/// The share of [`extend`]'s time its column generation gets; the integer program has the rest.
const EXTENSION_COLUMN_SHARE: f64 = 0.8;
/// The gap target of [`extend`]'s integer program, when the solve's is wider. Started from the
/// first program's answer, at the solve's 1% HiGHS proved that start within 0.03 s at 1,000 pods of
/// the diverse mix (3.8231 $/h against an LP of 3.7873), and the extension bought nothing new.
const EXTENSION_GAP: f64 = 0.001;

/// The relaxed LP's copies rounded down and the rest covered by whole patterns, best value per
/// dollar first: copies per pattern of `generated`.
fn cover_counts(demand: &[u32], generated: &super::Generation) -> Vec<u32> {
    let values: Vec<f64> = generated
        .pod_prices
        .iter()
        .map(|v| v.max(primal::MIN_POD_VALUE))
        .collect();
    primal::cover_counts(&generated.columns, &generated.lp_values, 0, demand, &values)
}

/// `copies` of `generated`'s patterns, lifted to the classes of `p`.
fn lifted(
    p: &Problem,
    relaxed: &relax::Relaxed,
    demand: &[u32],
    generated: &super::Generation,
    copies: &[u32],
) -> Vec<(Column, u32)> {
    let bought: Vec<(&Column, f64)> = generated
        .columns
        .iter()
        .zip(copies)
        .filter(|(_, &n)| n > 0)
        .map(|(c, &n)| (c, f64::from(n)))
        .collect();
    lift(
        p,
        &relaxed.of_class,
        demand,
        &Zoned::bought(p, &bought),
        &bought,
    )
}

/// The relaxed LP's copies rounded down, the rest covered by whole patterns, and lifted.
#[cfg(test)]
fn covered(
    p: &Problem,
    relaxed: &relax::Relaxed,
    demand: &[u32],
    generated: &super::Generation,
) -> Vec<(Column, u32)> {
    lifted(
        p,
        relaxed,
        demand,
        generated,
        &cover_counts(&relaxed.demand, generated),
    )
}

/// Under this time limit per pod the cover is built even where the zone program proved its answer:
/// the neighbourhood search then has too little time to improve whichever candidate the replay
/// keeps. At 5,000 pods of the diverse mix and 10 s (2 ms per pod) it ran 3 steps and improved
/// nothing, and a proven zone program's candidate was planned at 21.41 $/h where the cover's
/// replayed at 20.70; at 1,000 pods (10 ms) the search improves plans, and less from the cover's
/// start (see [`Candidates`]).
const COVER_SECONDS_PER_POD: f64 = 0.005;

/// The share of the candidate's time its column generation gets; the zones get the rest. At 0.75
/// the zone program stopped at its limit after 0.32-0.69 s at 10,000 pods of the diverse mix, and 5
/// of 21 runs of the benchmark at 10,000 and 5,000 pods planned at 59.3 $/h (29.2-29.4 at 5,000)
/// instead of about 41 (21.5), the candidate leaving 885 pods to the repair in the two logged ones.
/// At 0.6 the zones got 0.62-0.84 s and none of 17 runs did so (docs/optimizer.md, section 4).
const COLUMN_SHARE: f64 = 0.6;
/// The least time the restricted master's integer program must have (the candidate's time after
/// its column generation) for the zoneless relaxation to use it instead of the zone program. At
/// 100 pods of the diverse mix and a 0.5 s limit it had 0.05 s and handed back its start, the cover
/// (0.4063 $/h planned, against 0.3874 from the zone program and the repair). At 0.25 s (until stop
/// 47) 1,000 pods at 1 s just missed it (0.24 s) and were planned at 4.1841-4.2384; with 0.1 s the
/// program, in 0.09 s and unproven, planned 4.1387 in five runs of five.
const MIN_INTEGER_SECONDS: f64 = 0.1;
/// How many pods deep [`Lifting::augment`] displaces others to place one left over.
const AUGMENT_DEPTH: usize = 3;
/// The work [`Lifting::augment`] may do in one lifting: a displacement tried costs 1, and a look
/// for room costs 1 per [`AUGMENT_NODES_PER_TRY`] nodes. At 10,000 pods of the diverse mix (zones
/// pinned, 10 s) the costliest lifting placed 11 pods with 60,627 displacements tried and 621,600
/// nodes looked at, in 7.6 ms: 122,787 of this budget.
const AUGMENT_TRIES: usize = 300_000;
/// Nodes looked at for room that cost as much as one displacement tried (a few vector compares
/// against a release, a check and an occupy).
const AUGMENT_NODES_PER_TRY: usize = 10;
/// The least time the zones' integer program gets, seconds.
const MIN_ZONE_SECONDS: f64 = 0.05;

/// A lifted node: its bin and (class, pods), classes ascending.
type Pattern = (Bin, Vec<(usize, u32)>);

/// Lifted nodes counted into patterns with their copies (alike nodes are one pattern).
#[derive(Default)]
pub(crate) struct Tally(BTreeMap<Pattern, (f64, u32)>);

impl Tally {
    /// One more node on `bin` at `cost` holding `pods` per class; an empty one is not bought.
    pub(crate) fn add(&mut self, bin: Bin, pods: BTreeMap<usize, u32>, cost: f64) {
        if !pods.is_empty() {
            self.0
                .entry((bin, pods.into_iter().collect()))
                .or_insert((cost, 0))
                .1 += 1;
        }
    }

    pub(crate) fn into_columns(self) -> Vec<(Column, u32)> {
        self.0
            .into_iter()
            .map(|((bin, counts), (cost, n))| (Column { bin, counts, cost }, n))
            .collect()
    }
}

/// The zoned patterns with their slots given to classes of `p` (see the module doc).
fn lift(
    p: &Problem,
    of_class: &[usize],
    demand: &[u32],
    zoned: &Zoned,
    chosen: &[(&Column, f64)],
) -> Vec<(Column, u32)> {
    let mut lifting = Lifting::new(p, of_class, demand, zoned);
    let zones: Vec<String> = zoned
        .nodes
        .iter()
        .map(|node| zonal::zone_of(p, &node.bin))
        .collect();
    let mut filled: Vec<(usize, Fill)> = Vec::new();
    for (at, node) in zoned.nodes.iter().enumerate() {
        let col = chosen[node.pattern].0;
        for _ in 0..node.copies {
            let mut fill = lifting.empty(node.bin, &zones[at]);
            for &(rk, n) in &col.counts {
                for _ in 0..n {
                    if let Some(k) = lifting.best(&fill, rk) {
                        lifting.occupy(&mut fill, rk, k);
                        fill.taken.push((rk, k));
                    } else {
                        lifting.trade(&mut filled, &mut fill, rk);
                    }
                }
            }
            filled.push((at, fill));
        }
    }
    // what the pass above left: each pod by a path of displacements, while the budget lasts
    let mut budget = AUGMENT_TRIES;
    for k in 0..demand.len() {
        while lifting.left[k] > 0
            && lifting.augment(
                &mut filled,
                k,
                AUGMENT_DEPTH,
                &mut BTreeSet::new(),
                &mut budget,
            )
        {}
    }
    let mut out = Tally::default();
    for (at, fill) in filled {
        out.add(zoned.nodes[at].bin, fill.here, zoned.nodes[at].cost);
    }
    out.into_columns()
}

/// The lifting's state across nodes: the pods each class has left and the zone program's quotas
/// and plan still open.
struct Lifting<'a> {
    p: &'a Problem,
    /// Class -> its relaxed class.
    of_class: &'a [usize],
    rules: NodeRules,
    zoned: &'a Zoned,
    /// Relaxed class -> its member classes with pods.
    members: BTreeMap<usize, Vec<usize>>,
    left: Vec<u32>,
    quota: BTreeMap<(usize, String), u32>,
    planned: BTreeMap<String, BTreeMap<(usize, usize), f64>>,
}

/// One lifted node: its pods per class, its hostname spread groups' pods, and its slots'
/// (relaxed class, class).
struct Fill<'z> {
    bin: Bin,
    zone: &'z str,
    here: BTreeMap<usize, u32>,
    host: Vec<i64>,
    taken: Vec<(usize, usize)>,
    /// The room its pods leave, for a new node.
    free: Option<Vec<i64>>,
}

impl<'a> Lifting<'a> {
    fn new(p: &'a Problem, of_class: &'a [usize], demand: &[u32], zoned: &'a Zoned) -> Self {
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (k, &r) in of_class.iter().enumerate() {
            if demand[k] > 0 {
                members.entry(r).or_default().push(k);
            }
        }
        Lifting {
            p,
            of_class,
            rules: NodeRules::build(p),
            zoned,
            members,
            left: demand.to_vec(),
            quota: zoned.quota.clone(),
            planned: zoned.planned.clone(),
        }
    }

    /// A node on `bin` in `zone` with no pod yet.
    fn empty<'z>(&self, bin: Bin, zone: &'z str) -> Fill<'z> {
        let free = match bin {
            Bin::New { shape, offering } => Some(self.p.offering(shape, offering).alloc.clone()),
            Bin::Existing(_) => None,
        };
        Fill {
            bin,
            zone,
            here: BTreeMap::new(),
            host: vec![0; self.rules.host_caps.len()],
            taken: Vec::new(),
            free,
        }
    }

    /// Whether a pod of class `k` may take a slot on the node: it has pods left, the node is one it
    /// may use (a slot's own members always may: they share their offerings; a pod moved to another
    /// node's room must be checked, zones pinned by offerings included), its zone rules allow the
    /// zone, and the node's own rules (caps, hostname spreads, conflicts) hold.
    fn admits(&self, fill: &Fill, k: usize) -> bool {
        let rules = &self.rules;
        let class = &self.p.classes[k];
        self.left[k] > 0
            && match fill.bin {
                Bin::New { shape, offering } => class.on_menu((shape, offering)),
                Bin::Existing(e) => class.existing.contains(&e),
            }
            && self.zoned.admits(k, fill.zone, &self.quota)
            && fill.here.get(&k).copied().unwrap_or(0) < rules.per_node_cap[k]
            && rules.host_groups_of[k]
                .iter()
                .all(|&h| fill.host[h] < rules.host_caps[h].1)
            && rules.conflicts_of[k]
                .iter()
                .all(|j| !fill.here.contains_key(j))
    }

    /// The member of `rk` a slot goes to: the pods the program put in this zone first, then classes
    /// bound to zones (the free ones fit anywhere later), then the most pods left.
    fn best(&self, fill: &Fill, rk: usize) -> Option<usize> {
        let planned = self.planned.get(fill.zone);
        let wanted = |k: usize| {
            planned
                .and_then(|m| m.get(&(self.zoned.signature_of[k], rk)))
                .map_or(0, |&v| (v.max(0.0) * 1e3).round() as i64)
        };
        let rank = |&&k: &&usize| {
            (
                wanted(k),
                self.zoned.is_zonal(k),
                self.left[k],
                std::cmp::Reverse(k),
            )
        };
        self.members
            .get(&rk)
            .into_iter()
            .flatten()
            .filter(|&&k| self.admits(fill, k))
            .max_by_key(rank)
            .copied()
    }

    /// Puts a pod of class `k` in a slot of `rk` (`sign` 1), or takes it back out (`sign` -1).
    fn count(&mut self, fill: &mut Fill, rk: usize, k: usize, sign: i32) {
        let here = fill.here.entry(k).or_default();
        *here = here.wrapping_add_signed(sign);
        if *here == 0 {
            fill.here.remove(&k);
        }
        self.left[k] = self.left[k].wrapping_add_signed(-sign);
        if let Some(v) = self
            .planned
            .get_mut(fill.zone)
            .and_then(|m| m.get_mut(&(self.zoned.signature_of[k], rk)))
        {
            *v -= f64::from(sign);
        }
        if let Some(q) =
            self.zoned.group_of[k].and_then(|g| self.quota.get_mut(&(g, fill.zone.to_string())))
        {
            *q = q.wrapping_add_signed(-sign);
        }
        for &h in &self.rules.host_groups_of[k] {
            fill.host[h] += i64::from(sign);
        }
        for (f, r) in fill.free.iter_mut().flatten().zip(&self.p.classes[k].req) {
            *f -= i64::from(sign) * r;
        }
    }

    fn occupy(&mut self, fill: &mut Fill, rk: usize, k: usize) {
        self.count(fill, rk, k, 1);
    }

    fn release(&mut self, fill: &mut Fill, rk: usize, k: usize) {
        self.count(fill, rk, k, -1);
    }

    /// A slot of `rk` on `fill` that no member with pods left may take, each blocked by a pod of
    /// its own Deployment (or a conflicting one) in another slot of the node: that pod, of class
    /// `j`, gives way, and its slot goes to another member of its relaxed class, one with pods left
    /// or one an earlier node gives up for `j`; failing both, `j`'s pod moves to an earlier new
    /// node with room for it. One relaxed class mixes Deployments with one request, and a
    /// one-per-node hostname spread already used on the node by a pod of another request left the
    /// slot empty. At 1,000 pods of the diverse mix (zones pinned, 10 s) the last node's three such
    /// slots went to the replay's repair; the trade fills one of them, and the other two find
    /// neither a node to trade with nor room (the integer program's nodes are full), so the
    /// repair's node for them made the candidate 0.3% dearer (3.836 $/h replayed against 3.823
    /// planned; 3.843 without the trade) until [`Self::augment`] placed them. At 5,000 pods the
    /// move to a node with room took the candidate from 19.553 to 19.514.
    fn trade(&mut self, filled: &mut [(usize, Fill)], fill: &mut Fill, rk: usize) {
        let wanting: Vec<usize> = self
            .members
            .get(&rk)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&k| self.left[k] > 0)
            .collect();
        for k in wanting {
            for i in 0..fill.taken.len() {
                let (rj, j) = fill.taken[i];
                self.release(fill, rj, j);
                if self.admits(fill, k) {
                    self.occupy(fill, rk, k);
                    if let Some(other) = self.refill(filled, fill, rj, j) {
                        fill.taken[i] = (rj, other);
                        fill.taken.push((rk, k));
                        return;
                    }
                    if self.move_out(filled, rj, j) {
                        fill.taken[i] = (rk, k);
                        return;
                    }
                    self.release(fill, rk, k);
                }
                self.occupy(fill, rj, j);
            }
        }
    }

    /// Fills the slot of `rj` that `j`'s pod left on `fill` with another member: one with pods
    /// left, else one an earlier node gives up for `j` ([`Self::swap_in`]); None if neither can.
    fn refill(
        &mut self,
        filled: &mut [(usize, Fill)],
        fill: &mut Fill,
        rj: usize,
        j: usize,
    ) -> Option<usize> {
        match self.best(fill, rj) {
            Some(other) => {
                self.occupy(fill, rj, other);
                Some(other)
            }
            None => self.swap_in(filled, fill, rj, j),
        }
    }

    /// Places one of the pods of class `c` left over: on a node with room that admits it, else in
    /// the place of a pod of another class `j` on a node that admits `c` once `j`'s pod is out
    /// (its slot, when `j` shares `c`'s relaxed class, or room it frees on a new node), `j`'s pod
    /// then placed the same way with one step less: an augmenting path, as in bipartite matching.
    /// A class is displaced at most once per search (`seen`), and `budget` caps the work of the
    /// whole lifting ([`AUGMENT_TRIES`]). False, with the nodes as they were, if no path is found.
    ///
    /// The trade sees only the node being filled and earlier ones; here every node is filled, so a
    /// pod can move to a later node's room. At 1,000 pods of the diverse mix (zones pinned, 10 s)
    /// the two hostname-spread pods the trade could not place each took a path (budget mostly
    /// unused, under a millisecond), and the candidate replayed at the 3.823 $/h it planned instead
    /// of 3.836.
    fn augment(
        &mut self,
        filled: &mut [(usize, Fill)],
        c: usize,
        depth: usize,
        seen: &mut BTreeSet<usize>,
        budget: &mut usize,
    ) -> bool {
        let (p, rc) = (self.p, self.of_class[c]);
        let req = &p.classes[c].req;
        // after `freed`'s pod is out: room on a new node, its slot on an existing one
        let room = |fill: &Fill, freed: usize| {
            fill.free.as_ref().map_or(freed == rc, |free| {
                free.iter().zip(req).all(|(f, r)| f >= r)
            })
        };
        let scan = filled.len().div_ceil(AUGMENT_NODES_PER_TRY);
        if *budget < scan {
            return false;
        }
        *budget -= scan;
        if self.move_out(filled, rc, c) {
            return true;
        }
        if depth == 0 {
            return false;
        }
        seen.insert(c);
        for n in 0..filled.len() {
            for i in 0..filled[n].1.taken.len() {
                let (rj, j) = filled[n].1.taken[i];
                if seen.contains(&j) || *budget == 0 {
                    continue;
                }
                *budget -= 1;
                let fill = &mut filled[n].1;
                self.release(fill, rj, j);
                if room(fill, rj) && self.admits(fill, c) {
                    self.occupy(fill, rc, c);
                    fill.taken[i] = (rc, c);
                    if self.augment(filled, j, depth - 1, seen, budget) {
                        return true;
                    }
                    let fill = &mut filled[n].1;
                    self.release(fill, rc, c);
                    fill.taken[i] = (rj, j);
                }
                self.occupy(&mut filled[n].1, rj, j);
            }
        }
        false
    }

    /// Puts a pod of class `j` (a slot of `rj`) on a new node of `filled` with room for it that
    /// admits it: the trade's earlier nodes, or every node for [`Self::augment`].
    fn move_out(&mut self, filled: &mut [(usize, Fill)], rj: usize, j: usize) -> bool {
        let req = &self.p.classes[j].req;
        let Some((_, to)) = filled.iter_mut().find(|(_, f)| {
            f.free
                .as_ref()
                .is_some_and(|free| free.iter().zip(req).all(|(f, r)| f >= r))
                && self.admits(f, j)
        }) else {
            return false;
        };
        self.occupy(to, rj, j);
        to.taken.push((rj, j));
        true
    }

    /// A member of `rj` other than `j` (whose pod is back among those left) taken off an earlier
    /// node, which takes `j`'s pod in its place, and put on `fill`; None if no earlier node can.
    fn swap_in(
        &mut self,
        filled: &mut [(usize, Fill)],
        fill: &mut Fill,
        rj: usize,
        j: usize,
    ) -> Option<usize> {
        let others: Vec<usize> = self
            .members
            .get(&rj)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&o| o != j)
            .collect();
        for (_, earlier) in filled.iter_mut() {
            for &o in &others {
                if !earlier.here.contains_key(&o) {
                    continue;
                }
                self.release(earlier, rj, o);
                if self.admits(earlier, j) {
                    self.occupy(earlier, rj, j);
                    if self.admits(fill, o) {
                        self.occupy(fill, rj, o);
                        let slot = earlier
                            .taken
                            .iter()
                            .position(|&t| t == (rj, o))
                            .expect("a counted pod has a slot");
                        earlier.taken[slot] = (rj, j);
                        return Some(o);
                    }
                    self.release(earlier, rj, j);
                }
                self.occupy(earlier, rj, o);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_goes_to_the_spread_group_the_zone_program_put_there() {
        let p = Problem::build(
            &crate::workload::diverse(1000, 3),
            &crate::optimizer::fixtures::two_zone_catalog(),
        );
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let (relaxed, of_class) = relax::relax(&p, true);
        let (_, group_of) = zonal::spread_groups(&p);
        // two classes of different spread groups merged into one relaxed class; `planned` is the
        // one the old order (most pods left, then the lower index) would not have picked
        let spread: Vec<usize> = (0..p.classes.len())
            .filter(|&k| group_of[k].is_some())
            .collect();
        let (other, planned) = spread
            .iter()
            .flat_map(|&a| spread.iter().map(move |&b| (a, b)))
            .find(|&(a, b)| {
                of_class[a] == of_class[b]
                    && group_of[a] != group_of[b]
                    && (demand[a], std::cmp::Reverse(a)) > (demand[b], std::cmp::Reverse(b))
            })
            .expect("1,000 pods of the mix have two spread groups with a request in common");
        let r = of_class[planned];
        let &(shape, offering) = relaxed.classes[r]
            .offerings
            .iter()
            .find(|&&(s, o)| relaxed.offering(s, o).zone == "z2")
            .expect("an offering in z2");
        let bin = Bin::New { shape, offering };
        let col = Column {
            bin,
            counts: vec![(r, 1)],
            cost: relaxed.offering(shape, offering).cost,
        };
        let signature_of: Vec<usize> = (0..p.classes.len())
            .map(|k| group_of[k].map_or(0, |g| g + 1))
            .collect();
        let zoned = Zoned {
            nodes: vec![zonal::Node {
                bin,
                pattern: 0,
                copies: 1,
                cost: col.cost,
            }],
            allowed: vec![None; p.classes.len()],
            quota: [group_of[other], group_of[planned]]
                .into_iter()
                .flatten()
                .map(|g| ((g, "z2".to_string()), 1))
                .collect(),
            group_of,
            planned: [("z2".to_string(), [((signature_of[planned], r), 1.0)].into())].into(),
            signature_of,
            proven: true,
        };
        // (the lifting's later pass fills the node's room with pods left over: the slot is asked
        // here)
        let lifting = Lifting::new(&p, &of_class, &demand, &zoned);
        assert_eq!(
            lifting.best(&lifting.empty(bin, "z2"), r),
            Some(planned),
            "class {other} has more pods left but was not planned in z2"
        );
    }

    /// `fixtures::host_spread_deployments(pods)`, its demand, its relaxation's map of classes, and
    /// the class of each entry of `pods`.
    fn deployments(pods: &[(&str, i64, usize)]) -> (Problem, Vec<u32>, Vec<usize>, Vec<usize>) {
        let p = crate::optimizer::fixtures::host_spread_deployments(pods);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let (_, of_class) = relax::relax(&p, true);
        let class = |&(app, cpu, _): &(&str, i64, usize)| {
            (0..p.classes.len())
                .find(|&k| {
                    p.classes[k].constraints.labels["app"] == app
                        && p.classes[k].constraints.requests.get("cpu").milli() == cpu
                })
                .expect("a class per app and request")
        };
        let classes = pods.iter().map(class).collect();
        (p, demand, of_class, classes)
    }

    #[test]
    fn a_slot_blocked_by_its_deployments_other_request_is_traded_with_an_earlier_node() {
        // a: two pods of 1 cpu and one of 500m, b: one of 1 cpu; each Deployment one pod per node
        let (mut p, demand, of_class, classes) =
            deployments(&[("a", 1000, 2), ("a", 500, 1), ("b", 1000, 1)]);
        // no rule here reads the zone, so the menus keep one of the two alike offerings: both zones
        // are put back, as a zone rule would keep them
        let every: Vec<(usize, usize)> = (0..p.shapes.len())
            .flat_map(|s| (0..p.shapes[s].offerings.len()).map(move |o| (s, o)))
            .collect();
        for class in &mut p.classes {
            class.offerings = every.clone();
        }
        let [a1, a2, b1] = classes[..] else {
            unreachable!()
        };
        assert_eq!(of_class[a1], of_class[b1], "one request, one relaxed class");
        let (r1, r2) = (of_class[a1], of_class[a2]);
        let in_zone = |zone: &str| {
            let (shape, offering) = (0..p.shapes.len())
                .flat_map(|s| (0..p.shapes[s].offerings.len()).map(move |o| (s, o)))
                .find(|&(s, o)| p.offering(s, o).zone == zone)
                .expect("an offering in each zone");
            (
                Bin::New { shape, offering },
                p.offering(shape, offering).cost,
            )
        };
        let ((z1, cost), (z2, _)) = (in_zone("z1"), in_zone("z2"));
        let one = Column {
            bin: z1,
            counts: vec![(r1, 1)],
            cost,
        };
        let both = Column {
            bin: z2,
            counts: vec![(r1, 1), (r2, 1)],
            cost,
        };
        // the program's plan puts b's 1 cpu pod in z1 and a's in z2: the z1 node takes b's, then
        // the z2 node's 1 cpu slot takes a's, and a's 500m pod may not join it
        let signature_of: Vec<usize> = (0..p.classes.len()).map(|k| usize::from(k == b1)).collect();
        let node = |bin, pattern| zonal::Node {
            bin,
            pattern,
            copies: 1,
            cost,
        };
        let zoned = Zoned {
            nodes: vec![node(z1, 0), node(z2, 1), node(z1, 0)],
            allowed: vec![None; p.classes.len()],
            group_of: vec![None; p.classes.len()],
            quota: BTreeMap::new(),
            signature_of,
            planned: [
                ("z1".to_string(), [((1, r1), 1.0)].into()),
                ("z2".to_string(), [((0, r1), 1.0)].into()),
            ]
            .into(),
            proven: true,
        };
        let lifted = lift(&p, &of_class, &demand, &zoned, &[(&one, 1.0), (&both, 1.0)]);
        let (placed, doubled) = placed_and_doubled(&p, &lifted, &[a1, a2]);
        assert!(!doubled, "{lifted:?}: two pods of a on one node");
        // the first node gives b's pod to the second for one of a's 1 cpu pods, and the second
        // holds b's and a's 500m pods
        assert_eq!(placed, demand, "{lifted:?}");
        assert!(
            lifted.iter().any(|(c, _)| c.bin == z2
                && c.counts.len() == 2
                && c.counts.iter().any(|&(k, _)| k == b1)),
            "{lifted:?}"
        );
    }

    #[test]
    fn a_blocking_pod_no_slot_can_take_moves_to_an_earlier_node_with_room() {
        // a: one pod of 1 cpu and one of 500m, one per node; b: one pod of 250m
        let (p, demand, of_class, classes) =
            deployments(&[("a", 1000, 1), ("a", 500, 1), ("b", 250, 1)]);
        let [a1, a2, b] = classes[..] else {
            unreachable!()
        };
        let bin = Bin::New {
            shape: 0,
            offering: 0,
        };
        let cost = p.offering(0, 0).cost;
        // the first node holds b's pod and has room for more; the second's two slots are a's
        // requests
        let first = Column {
            bin,
            counts: vec![(of_class[b], 1)],
            cost,
        };
        let second = Column {
            bin,
            counts: [of_class[a1], of_class[a2]]
                .into_iter()
                .map(|r| (r, 1))
                .collect(),
            cost,
        };
        let chosen = [(&first, 1.0), (&second, 1.0)];
        let lifted = lift(&p, &of_class, &demand, &Zoned::bought(&p, &chosen), &chosen);
        // a's 1 cpu pod joins b's, and the second node keeps a's 500m pod
        let mut nodes: Vec<Vec<(usize, u32)>> = lifted
            .iter()
            .map(|(c, copies)| {
                assert_eq!(*copies, 1);
                c.counts.clone()
            })
            .collect();
        nodes.sort();
        let mut want = vec![vec![(a1.min(b), 1), (a1.max(b), 1)], vec![(a2, 1)]];
        want.sort();
        assert_eq!(nodes, want);
    }

    #[test]
    fn a_slot_given_up_in_a_trade_is_counted_for_the_member_that_takes_it() {
        // a: one pod of 1 cpu and two of 500m, b: one of 500m; each Deployment one pod per node
        let (p, demand, of_class, classes) =
            deployments(&[("a", 1000, 1), ("a", 500, 2), ("b", 500, 1)]);
        let [a1, a2, b2] = classes[..] else {
            unreachable!()
        };
        assert_eq!(of_class[a2], of_class[b2], "one request, one relaxed class");
        let (r1, r2) = (of_class[a1], of_class[a2]);
        let bin = Bin::New {
            shape: 0,
            offering: 0,
        };
        let cost = p.offering(0, 0).cost;
        // the first node's 500m slot goes to a (most pods left), which blocks a's 1 cpu pod from
        // its 1 cpu slot: a's 500m pod gives way and b's takes its slot; two more nodes of one 500m
        // slot
        let first = Column {
            bin,
            counts: vec![(r2, 1), (r1, 1)],
            cost,
        };
        let small = Column {
            bin,
            counts: vec![(r2, 1)],
            cost,
        };
        let chosen = [(&first, 1.0), (&small, 2.0)];
        let lifted = lift(&p, &of_class, &demand, &Zoned::bought(&p, &chosen), &chosen);
        let (placed, _) = placed_and_doubled(&p, &lifted, &[]);
        // b's pod is on the first node with a's 1 cpu pod, and a's 500m pods on the other two
        assert_eq!(placed, demand, "{lifted:?}");
        assert!(
            lifted.iter().any(|(c, _)| c.counts.len() == 2
                && c.counts.iter().any(|&(k, _)| k == b2)
                && c.counts.iter().any(|&(k, _)| k == a1)),
            "{lifted:?}"
        );
    }

    /// Pods placed per class by `lifted`, and whether any node holds two pods of `app`'s classes.
    fn placed_and_doubled(
        p: &Problem,
        lifted: &[(Column, u32)],
        app: &[usize],
    ) -> (Vec<u32>, bool) {
        let mut placed = vec![0u32; p.classes.len()];
        let mut doubled = false;
        for (c, copies) in lifted {
            doubled |= c
                .counts
                .iter()
                .filter(|(k, _)| app.contains(k))
                .map(|&(_, n)| n)
                .sum::<u32>()
                > 1;
            for &(k, n) in &c.counts {
                placed[k] += n * copies;
            }
        }
        (placed, doubled)
    }

    #[test]
    fn a_pod_left_over_is_placed_by_displacing_pods_along_a_path() {
        // a: 1 cpu, 500m and 250m, one per node; b: 200m; c: the rest of a node but 410m
        let alloc = crate::optimizer::fixtures::host_spread_deployments(&[("x", 100, 1)])
            .offering(0, 0)
            .alloc[0];
        let big = alloc - 610;
        let (p, demand, of_class, classes) = deployments(&[
            ("a", 1000, 1),
            ("a", 500, 1),
            ("a", 250, 1),
            ("b", 200, 1),
            ("c", big, 1),
        ]);
        let [a1, a2, a3, b, c] = classes[..] else {
            unreachable!()
        };
        let bin = Bin::New {
            shape: 0,
            offering: 0,
        };
        let cost = p.offering(0, 0).cost;
        let col = |ks: &[usize]| Column {
            bin,
            counts: ks.iter().map(|&k| (of_class[k], 1)).collect(),
            cost,
        };
        // the first node's 500m slot stays empty (a's 1 cpu pod is there, and no earlier node takes
        // it); the third has 410m free, too little for a's 500m pod, enough for its 250m one
        let (first, second, third) = (col(&[a1, a2]), col(&[a3]), col(&[c, b]));
        let chosen = [(&first, 1.0), (&second, 1.0), (&third, 1.0)];
        let lifted = lift(&p, &of_class, &demand, &Zoned::bought(&p, &chosen), &chosen);
        let (placed, doubled) = placed_and_doubled(&p, &lifted, &[a1, a2, a3]);
        // 500m takes 1 cpu's place, 1 cpu takes 250m's, and 250m goes to the third node's room
        assert_eq!(placed, demand, "{lifted:?}");
        assert!(!doubled, "{lifted:?}");
        assert!(
            lifted
                .iter()
                .any(|(col, _)| col.counts.len() == 3 && col.counts.iter().any(|&(k, _)| k == a3)),
            "{lifted:?}"
        );
    }

    #[test]
    fn a_pod_left_over_goes_only_to_a_node_its_offerings_allow() {
        // as above, but a's 500m pod may only run in z2 and every node is in z1
        let alloc = crate::optimizer::fixtures::host_spread_deployments(&[("x", 100, 1)])
            .offering(0, 0)
            .alloc[0];
        let (mut p, demand, of_class, classes) = deployments(&[
            ("a", 1000, 1),
            ("a", 500, 1),
            ("a", 250, 1),
            ("b", 200, 1),
            ("c", alloc - 610, 1),
        ]);
        let [a1, a2, a3, b, c] = classes[..] else {
            unreachable!()
        };
        let z1 = (0..p.shapes[0].offerings.len())
            .find(|&o| p.offering(0, o).zone == "z1")
            .expect("an offering in z1");
        // (its menu might have kept only z1's offering of the alike two: z2's are set outright)
        let in_z2: Vec<(usize, usize)> = (0..p.shapes.len())
            .flat_map(|s| (0..p.shapes[s].offerings.len()).map(move |o| (s, o)))
            .filter(|&(s, o)| p.offering(s, o).zone == "z2")
            .collect();
        assert!(!in_z2.is_empty());
        p.classes[a2].offerings = in_z2;
        let bin = Bin::New {
            shape: 0,
            offering: z1,
        };
        let cost = p.offering(0, z1).cost;
        let col = |ks: &[usize]| Column {
            bin,
            counts: ks.iter().map(|&k| (of_class[k], 1)).collect(),
            cost,
        };
        let (first, second, third) = (col(&[a1]), col(&[a3]), col(&[c, b]));
        let chosen = [(&first, 1.0), (&second, 1.0), (&third, 1.0)];
        let lifted = lift(&p, &of_class, &demand, &Zoned::bought(&p, &chosen), &chosen);
        let (placed, _) = placed_and_doubled(&p, &lifted, &[a1, a2, a3]);
        // the first node has room for it and no other pod of a: only its offerings keep it out
        assert_eq!(placed[a2], 0, "{lifted:?}");
        assert_eq!(
            placed.iter().sum::<u32>(),
            demand.iter().sum::<u32>() - 1,
            "{lifted:?}"
        );
    }

    #[test]
    fn lifted_patterns_hold_what_each_class_asks_at_most_and_keep_the_node_rules() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let p = Problem::build(&crate::workload::diverse(120, 4), &catalog);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let lifted = candidates(&p, &demand, &SolveSettings::default(), 2.0)
            .and_then(|c| c.zones)
            .expect("the relaxation merges the mix's classes");
        let rules = NodeRules::build(&p);
        let mut placed = vec![0u32; p.classes.len()];
        for (c, copies) in &lifted {
            let Bin::New { shape, offering } = c.bin else {
                panic!("no existing nodes here")
            };
            let room = &p.offering(shape, offering).alloc;
            for (d, &r) in room.iter().enumerate() {
                let used: i64 = c
                    .counts
                    .iter()
                    .map(|&(k, n)| p.classes[k].req[d] * i64::from(n))
                    .sum();
                assert!(used <= r, "{c:?} overfills dimension {d}");
            }
            for &(k, n) in &c.counts {
                assert!(
                    n <= rules.per_node_cap[k]
                        && p.classes[k].offerings.contains(&(shape, offering)),
                    "{c:?}: class {k}"
                );
                assert!(
                    rules.conflicts_of[k]
                        .iter()
                        .all(|j| c.counts.iter().all(|&(o, _)| o != *j)),
                    "{c:?}: class {k} with a conflicting one"
                );
                placed[k] += n * copies;
            }
            for (members, cap, _) in &rules.host_caps {
                let here: i64 = c
                    .counts
                    .iter()
                    .filter(|(k, _)| members.contains(k))
                    .map(|&(_, n)| i64::from(n))
                    .sum();
                assert!(here <= *cap, "{c:?}: hostname spread over its cap");
            }
        }
        assert!(placed.iter().zip(&demand).all(|(got, want)| got <= want));
        let total: u32 = demand.iter().sum();
        assert!(
            placed.iter().sum::<u32>() * 2 >= total,
            "only {} of {total} pods lifted",
            placed.iter().sum::<u32>()
        );
        // what the rounding left out, and what the replay refuses, the repair places
        let (state, rejected) = super::super::replay(&p, &lifted);
        let (state, left) = crate::optimizer::greedy::repair(&p, state, &rejected);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(
            (0..p.classes.len())
                .map(|k| state.placed_of(k) as u32)
                .sum::<u32>(),
            total
        );
    }

    #[test]
    fn with_no_zone_rule_the_cover_lifts_every_pod_into_nodes_that_hold_them() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let p = Problem::build(&crate::workload::generic(120, 4), &catalog);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        assert!(zonal::zoneless(&p));
        // (its classes differ only in their Deployment's label, so `Relaxed::of` would not bother)
        let relaxed = relax::Relaxed::new(relax::relax(&p, true), &demand);
        let settings = SolveSettings {
            time_limit: std::time::Duration::from_secs(2),
            lower_bound: false,
            ..Default::default()
        };
        let generated = super::super::columns_and_bound(
            &relaxed.problem,
            &settings,
            &relaxed.seed(),
            &relaxed.demand,
            super::super::Unproven::Large,
        )
        .expect("the lp solves");
        let cover = covered(&p, &relaxed, &demand, &generated);
        let mut placed = vec![0u32; p.classes.len()];
        for (c, copies) in &cover {
            let Bin::New { shape, offering } = c.bin else {
                panic!("no existing nodes here")
            };
            for (d, &r) in p.offering(shape, offering).alloc.iter().enumerate() {
                assert!(
                    c.counts
                        .iter()
                        .map(|&(k, n)| p.classes[k].req[d] * i64::from(n))
                        .sum::<i64>()
                        <= r,
                    "{c:?} overfills dimension {d}"
                );
            }
            for &(k, n) in &c.counts {
                placed[k] += n * copies;
            }
        }
        // the residual is covered whole, and without rules every slot finds a pod of its request
        assert_eq!(placed, demand);
        let (_, rejected) = super::super::replay(&p, &cover);
        assert!(rejected.is_empty(), "{rejected:?}");
    }
}
