//! Upper bounds on what one node's pattern can collect, by weak Lagrangian duality. For resource
//! prices λ ≥ 0, λ·room plus every item's count times max(0, value − λ·req) bounds any pattern that
//! fits the room; items that share a per-node cap (an anti-affinity clique, a hostname spread
//! group) add only their best cap's worth. Any λ gives a safe bound; a good λ gives a tight one,
//! found by coordinate ternary search (the function is convex in λ) from the best point of a coarse
//! grid.

/// One class as the bound sees it.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    pub req: &'a [i64],
    pub value: f64,
    /// How many the node may hold at most on its own rules.
    pub count: f64,
    /// The shared-cap set the item belongs to, if any (index into the caps).
    pub set: Option<usize>,
}

/// What `amounts` of the resources cost at prices `lambda` (negative amounts count as none).
pub fn price(lambda: &[f64], amounts: &[i64]) -> f64 {
    lambda
        .iter()
        .zip(amounts)
        .map(|(l, &a)| l * a.max(0) as f64)
        .sum()
}

/// The best `cap` units of (gain, count) pairs sorted by gain, descending.
pub fn top_sum(sorted: impl IntoIterator<Item = (f64, f64)>, cap: f64) -> f64 {
    let mut left = cap;
    let mut sum = 0.0;
    for (gain, n) in sorted {
        if left <= 0.0 {
            break;
        }
        let take = n.min(left);
        sum += take * gain;
        left -= take;
    }
    sum
}

/// The dual function at `lambda`.
pub fn dual(room: &[i64], items: &[Item<'_>], caps: &[f64], lambda: &[f64]) -> f64 {
    let mut total = price(lambda, room);
    let mut sets: Vec<(usize, f64, f64)> = Vec::new();
    for it in items {
        let gain = it.value - price(lambda, it.req);
        if gain <= 0.0 {
            continue;
        }
        match it.set {
            None => total += it.count * gain,
            Some(g) => sets.push((g, gain, it.count)),
        }
    }
    // within a set the best gains take the cap first
    sets.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
    for chunk in sets.chunk_by(|a, b| a.0 == b.0) {
        total += top_sum(
            chunk.iter().map(|&(_, gain, n)| (gain, n)),
            caps[chunk[0].0],
        );
    }
    total
}

/// The smallest dual value found and the prices giving it.
pub fn minimise(room: &[i64], items: &[Item<'_>], caps: &[f64]) -> (f64, Vec<f64>) {
    let dims = room.len();
    let mut lambda = vec![0.0; dims];
    let mut best = dual(room, items, caps, &lambda);
    if items.is_empty() {
        return (best, lambda);
    }
    // beyond the highest value per unit of a resource, raising its price only adds to the bound
    let top: Vec<f64> = (0..dims)
        .map(|d| {
            if room[d] <= 0 {
                0.0
            } else {
                items
                    .iter()
                    .filter(|it| it.req[d] > 0)
                    .map(|it| it.value / it.req[d] as f64)
                    .fold(0.0, f64::max)
            }
        })
        .collect();
    // a coarse grid over the first three resources (cpu, memory, pods) picks the starting point
    const STEPS: usize = 6;
    let lead = dims.min(3);
    for a in 0..=STEPS {
        for m in 0..=(STEPS - a) {
            let share = [a, m, STEPS - a - m].map(|x| x as f64 / STEPS as f64);
            let mut trial = vec![0.0; dims];
            for d in 0..lead {
                trial[d] = share[d] * top[d];
            }
            let v = dual(room, items, caps, &trial);
            if v < best {
                best = v;
                lambda = trial;
            }
        }
    }
    for _ in 0..3 {
        for d in (0..dims).filter(|&d| top[d] > 0.0) {
            let (mut lo, mut hi) = (0.0, top[d]);
            for _ in 0..30 {
                let (a, c) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
                let mut t = lambda.clone();
                t[d] = a;
                let fa = dual(room, items, caps, &t);
                t[d] = c;
                let fc = dual(room, items, caps, &t);
                if fa <= fc {
                    hi = c;
                } else {
                    lo = a;
                }
            }
            let mut t = lambda.clone();
            t[d] = (lo + hi) / 2.0;
            let v = dual(room, items, caps, &t);
            if v < best {
                best = v;
                lambda = t;
            }
        }
    }
    (best, lambda)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All patterns of a small knapsack by enumeration: the best total value.
    fn brute(room: &[i64], items: &[Item<'_>], caps: &[f64]) -> f64 {
        let mut best = 0.0f64;
        let mut counts = vec![0u32; items.len()];
        loop {
            let fits = (0..room.len()).all(|d| {
                items
                    .iter()
                    .zip(&counts)
                    .map(|(it, &c)| it.req[d] * i64::from(c))
                    .sum::<i64>()
                    <= room[d]
            });
            let capped = (0..caps.len()).all(|g| {
                items
                    .iter()
                    .zip(&counts)
                    .filter(|(it, _)| it.set == Some(g))
                    .map(|(_, &c)| f64::from(c))
                    .sum::<f64>()
                    <= caps[g]
            });
            if fits && capped {
                best = best.max(
                    items
                        .iter()
                        .zip(&counts)
                        .map(|(it, &c)| it.value * f64::from(c))
                        .sum(),
                );
            }
            let mut i = 0;
            loop {
                if i == items.len() {
                    return best;
                }
                if f64::from(counts[i]) < items[i].count {
                    counts[i] += 1;
                    break;
                }
                counts[i] = 0;
                i += 1;
            }
        }
    }

    #[test]
    fn the_bound_is_never_below_the_best_pattern_and_caps_tighten_it() {
        let reqs: Vec<Vec<i64>> = vec![
            vec![1000, 100, 1],
            vec![100, 512, 1],
            vec![250, 1024, 1],
            vec![100, 1024, 1],
            vec![1500, 100, 1],
        ];
        let values = [3.7, 1.2, 2.5, 1.3, 3.8];
        let room = [1930, 1450, 8];
        for seed in 0..40u64 {
            let mut rng = crate::workload::Rng(seed);
            let items: Vec<Item<'_>> = reqs
                .iter()
                .zip(values)
                .map(|(req, v)| Item {
                    req,
                    value: v * (0.5 + rng.unit()),
                    count: 1.0 + rng.below(4) as f64,
                    set: (rng.below(2) == 0).then_some(0),
                })
                .collect();
            let caps = [1.0];
            let exact = brute(&room, &items, &caps);
            let (ub, lambda) = minimise(&room, &items, &caps);
            assert!(
                ub >= exact - 1e-9,
                "seed {seed}: bound {ub} below the best pattern {exact}"
            );
            assert!((dual(&room, &items, &caps, &lambda) - ub).abs() < 1e-9);
            let uncapped: Vec<Item<'_>> = items
                .iter()
                .map(|it| Item {
                    set: None,
                    ..it.clone()
                })
                .collect();
            let (loose, at) = minimise(&room, &uncapped, &caps);
            assert!(
                dual(&room, &items, &caps, &at) <= loose + 1e-9,
                "seed {seed}: a cap loosened the bound"
            );
        }
    }
}
