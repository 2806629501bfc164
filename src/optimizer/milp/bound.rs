//! A certified lower bound: the LP relaxation of the aggregated model. Nodes of each bin are a
//! continuous count, pods of each class are spread over bins, and a bin's pods must fit in its node
//! count times its room in every resource. Every plan that places the same pods is feasible for this
//! LP, so its optimum bounds every such plan's objective from below.

use good_lp::solvers::SolutionStatus;
use good_lp::{constraint, variable, variables, Expression, ResolutionError, Solution, SolverModel, Variable};

use super::super::problem::Problem;
use super::columns::{Bin, BinInfo, NodeRules};

/// The bound for placing `demand[k]` pods of each class; `None` when the LP could not be solved.
pub fn lower_bound(p: &Problem, bins: &[BinInfo], demand: &[u32], seconds: f64) -> Result<f64, ResolutionError> {
    if demand.iter().all(|&d| d == 0) {
        return Ok(0.0);
    }
    let rules = NodeRules::build(p);
    // HiGHS rejects matrix values above 1e15 (memory is in milli-bytes): scale each resource by the
    // largest room any bin offers so every coefficient is at most 1
    let scale: Vec<f64> = (0..p.dims.len())
        .map(|d| bins.iter().map(|b| b.room[d] as f64).fold(1.0, f64::max))
        .collect();
    let mut vars = variables!();
    let nodes: Vec<Variable> = bins
        .iter()
        .map(|b| match b.bin {
            Bin::Existing(_) => vars.add(variable().min(0.0).max(1.0)),
            Bin::New { .. } => vars.add(variable().min(0.0)),
        })
        .collect();
    let mut pods: Vec<Vec<(usize, Variable)>> = vec![Vec::new(); bins.len()];
    let mut objective: Expression = bins.iter().zip(&nodes).map(|(b, n)| b.cost * *n).sum();
    for (bi, b) in bins.iter().enumerate() {
        for &(k, pen) in &b.classes {
            if demand[k] == 0 {
                continue;
            }
            let x = vars.add(variable().min(0.0));
            objective += pen * x;
            pods[bi].push((k, x));
        }
    }
    let mut model = vars.minimise(objective).using(good_lp::highs);
    model.set_verbose(false);
    model = model.set_time_limit(seconds.max(0.1)).set_threads(1);
    for (bi, b) in bins.iter().enumerate() {
        for (dim, room) in b.room.iter().enumerate() {
            let used: Expression = pods[bi].iter().map(|(k, x)| p.classes[*k].req[dim] as f64 / scale[dim] * *x).sum();
            model = model.with(constraint!(used <= (*room as f64 / scale[dim]) * nodes[bi]));
        }
        for (k, x) in &pods[bi] {
            let cap = rules.per_node_cap[*k];
            if cap != u32::MAX {
                model = model.with(constraint!(*x <= f64::from(cap) * nodes[bi]));
            }
        }
    }
    for (k, &d) in demand.iter().enumerate() {
        if d == 0 {
            continue;
        }
        let placed: Expression = pods.iter().flatten().filter(|(j, _)| *j == k).map(|(_, x)| *x).sum();
        model = model.with(constraint!(placed >= f64::from(d)));
    }
    for (pi, pool) in p.pools.iter().enumerate() {
        for (name, left) in pool.remaining.iter().flat_map(|r| r.iter()) {
            let used: Expression = bins
                .iter()
                .zip(&nodes)
                .filter_map(|(b, n)| match b.bin {
                    Bin::New { shape, .. } if p.shapes[shape].pool == pi => {
                        Some((if name == "nodes" { 1.0 } else { p.shapes[shape].capacity.get(name).as_f64() }) * *n)
                    }
                    _ => None,
                })
                .sum();
            model = model.with(constraint!(used <= left.as_f64()));
        }
    }
    let solution = model.solve()?;
    if !matches!(solution.status(), SolutionStatus::Optimal) {
        // only an optimal LP value is a bound; a time-limited primal point is not
        return Err(ResolutionError::Other("lower-bound lp stopped before optimality"));
    }
    let value: f64 = bins.iter().zip(&nodes).map(|(b, n)| b.cost * solution.value(*n)).sum::<f64>()
        + pods.iter().zip(bins).flat_map(|(xs, b)| xs.iter().map(move |(k, x)| (b, *k, *x))).map(|(b, k, x)| {
            b.classes.iter().find(|(j, _)| *j == k).map_or(0.0, |(_, pen)| pen * solution.value(x))
        }).sum::<f64>();
    // an LP solved to tolerance may sit a hair above its true optimum; step down so the bound stays safe
    Ok((value * (1.0 - 1e-7) - 1e-7).max(0.0))
}
