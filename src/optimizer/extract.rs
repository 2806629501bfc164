//! Turns a placement state into a [`Plan`]: names the pods on each node, lists each new node's
//! fallback offerings (cheapest first, same pods, same topology domains, minValues kept), and adds
//! up cost and objective.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::labels::HOSTNAME;

use super::plan::{
    ExistingPlacement, NewNode, OfferingRef, Plan, SolverReport, Strategy, Unschedulable,
    UnschedulableReason, VolumeZone,
};
use super::problem::{fits, PoolInfo, Problem};
use super::state::{NodeKind, NodeState, State};

/// Whether a node launched from any of `candidates` keeps the pool's minValues.
pub fn min_values_met(p: &Problem, pool: &PoolInfo, candidates: &[(usize, usize)]) -> bool {
    pool.min_values.iter().all(|r| {
        let distinct: BTreeSet<&String> = candidates
            .iter()
            .filter_map(|&(s, o)| p.offering(s, o).labels.get(&r.key))
            .collect();
        distinct.len() >= r.min_values.unwrap_or(0) as usize
    })
}

/// What an alternative offering must keep of the node's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The rules: same pool, every placed class compatible, the pods fit, the same value for every
    /// topology key a spread or required affinity of its pods reads. A caller that moves the node
    /// weighs the preferences itself (`improve::downsize`).
    Rules,
    /// The rules and the preferences met: also the same value for the keys of preferred pod terms
    /// (its pods' own and running pods' toward them), and no placed class missing a preferred node
    /// term the node's own offering meets. Karpenter launches the preferences it could meet as
    /// requirements, so its fallbacks keep them (unless that would break the pool's minValues).
    Preferences,
}

/// Offerings that could replace `node`'s own under `keep`, walked in `order` (a global ranking of
/// offerings) and collected until `enough` says so.
pub fn alternatives(
    p: &Problem,
    node: &NodeState,
    keep: Keep,
    order: &[(usize, usize)],
    enough: impl Fn(&[(usize, usize)], (usize, usize)) -> bool,
) -> Vec<(usize, usize)> {
    let NodeKind::New { shape, offering } = node.kind else {
        return vec![];
    };
    let pool = p.shapes[shape].pool;
    let own = p.offering(shape, offering);
    let used: Vec<i64> = own
        .alloc
        .iter()
        .zip(&node.free)
        .map(|(a, f)| a - f)
        .collect();
    let preferences = keep == Keep::Preferences;
    let keys: BTreeSet<&String> = node
        .placed
        .keys()
        .flat_map(|&k| {
            let preferred = p
                .topology
                .preferred_touching(k)
                .map(|r| &r.key)
                .chain(p.topology.shunned_zone_keys(k))
                .filter(move |_| preferences);
            p.topology
                .spreads
                .iter()
                .filter(move |g| g.owner == k || g.members.contains(&k))
                .map(|g| &g.key)
                .chain(
                    p.topology
                        .affinities
                        .iter()
                        .filter(move |r| r.owner == k || r.members.contains(&k))
                        .map(|r| &r.key),
                )
                .chain(preferred)
        })
        .filter(|k| k.as_str() != HOSTNAME)
        .collect();
    let wanted: Vec<(&String, Option<&String>)> =
        keys.iter().map(|k| (*k, own.labels.get(*k))).collect();
    // per placed class with preferred node terms, its penalty on the node's own offering (the
    // pool, and so the taints, are the same for every alternative)
    let taints = &p.shapes[shape].taints;
    let preferring: Vec<(usize, f64)> = node
        .placed
        .keys()
        .filter(|&&k| preferences && !p.classes[k].constraints.preferred_node_affinity.is_empty())
        .map(|&k| (k, p.preference_penalty(k, &own.labels, taints)))
        .collect();
    let mut out = Vec::new();
    for &(s, o) in order {
        if enough(&out, (s, o)) {
            break;
        }
        let off = p.offering(s, o);
        if p.shapes[s].pool == pool
            && fits(&used, &off.alloc)
            && node.placed.keys().all(|&k| p.compatible(k, (s, o)))
            && wanted.iter().all(|(k, v)| off.labels.get(*k) == *v)
            && preferring
                .iter()
                .all(|&(k, own)| p.preference_penalty(k, &off.labels, taints) <= own + 1e-12)
        {
            out.push((s, o));
        }
    }
    out
}

fn fallbacks(p: &Problem, node: &NodeState, max: usize) -> Vec<OfferingRef> {
    let NodeKind::New { shape, offering } = node.kind else {
        return vec![];
    };
    // minValues needs every distinct value; otherwise the first `max` by price are enough
    let all = !p.pools[p.shapes[shape].pool].min_values.is_empty();
    // a launch must keep minValues; Karpenter gives up a preference before that
    let keep = if all { Keep::Rules } else { Keep::Preferences };
    let alts: Vec<(usize, usize)> = alternatives(p, node, keep, &p.by_price, |found, _| {
        !all && found.len() > max
    })
    .into_iter()
    .filter(|&a| a != (shape, offering))
    .collect();
    let pool = &p.pools[p.shapes[shape].pool];
    // the cheapest offering of each distinct minValues value first, so the list keeps minValues
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    for r in &pool.min_values {
        let mut seen: BTreeSet<String> = p
            .offering(shape, offering)
            .labels
            .get(&r.key)
            .cloned()
            .into_iter()
            .collect();
        for &a in &alts {
            if let Some(v) = p.offering(a.0, a.1).labels.get(&r.key) {
                if seen.insert(v.clone()) && !chosen.contains(&a) {
                    chosen.push(a);
                }
            }
        }
    }
    for a in alts {
        if chosen.len() >= max.max(chosen.len()) {
            break;
        }
        if !chosen.contains(&a) {
            chosen.push(a);
        }
    }
    chosen.sort_by(|a, b| {
        p.offering(a.0, a.1)
            .price
            .total_cmp(&p.offering(b.0, b.1).price)
            .then(a.cmp(b))
    });
    chosen
        .into_iter()
        .map(|(s, o)| {
            let off = p.offering(s, o);
            OfferingRef {
                instance_type: p.shapes[s].instance_type.clone(),
                zone: off.zone.clone(),
                capacity_type: off.capacity_type,
                price: off.price,
            }
        })
        .collect()
}

/// Builds the plan value from a finished state and the pods left over.
pub fn to_plan(
    p: &Problem,
    state: &State<'_>,
    leftover: &BTreeMap<usize, (usize, UnschedulableReason)>,
    strategy: Strategy,
    solver: SolverReport,
    lower_bound: f64,
    max_fallbacks: usize,
) -> Plan {
    let mut queues: Vec<std::collections::VecDeque<&String>> =
        p.classes.iter().map(|c| c.pods.iter().collect()).collect();
    let mut take = |k: usize, n: usize| -> Vec<String> {
        (0..n)
            .filter_map(|_| queues[k].pop_front().cloned())
            .collect()
    };
    let mut nodes = Vec::new();
    let mut existing = Vec::new();
    let mut cost = 0.0;
    let mut objective = super::preferred::penalty(p, state);
    let mut counter = 0;
    let ebs_attach = crate::domain::volume::ebs_attach_resource();
    for n in state.nodes.iter().filter(|n| !n.placed.is_empty()) {
        let mut pods: Vec<String> = n.placed.iter().flat_map(|(&k, &c)| take(k, c)).collect();
        pods.sort();
        objective += n.preference_penalty(p);
        match n.kind {
            NodeKind::Existing(e) => existing.push(ExistingPlacement {
                node: p.existing[e].name.clone(),
                pods,
            }),
            NodeKind::New { shape, offering } => {
                let s = &p.shapes[shape];
                let off = &s.offerings[offering];
                let id = format!("joiner-{counter:04}");
                counter += 1;
                let mut labels = off.labels.clone();
                labels.insert(HOSTNAME.to_string(), id.clone());
                cost += off.price;
                objective += off.cost;
                nodes.push(NewNode {
                    id,
                    nodepool: p.pools[s.pool].name.clone(),
                    instance_type: s.instance_type.clone(),
                    zone: off.zone.clone(),
                    capacity_type: off.capacity_type,
                    price: off.price,
                    labels,
                    // the EBS attach limit is left out: a node reports it on its CSINode, not
                    // in its allocatable
                    allocatable: s
                        .allocatable
                        .iter()
                        .filter(|(k, q)| q.milli() > 0 && *k != ebs_attach)
                        .map(|(k, q)| {
                            (
                                k.to_string(),
                                if k == "memory" || k == "ephemeral-storage" {
                                    q.to_binary()
                                } else {
                                    q.to_canonical()
                                },
                            )
                        })
                        .collect(),
                    pods,
                    fallbacks: fallbacks(p, n, max_fallbacks),
                })
            }
        }
    }
    let mut unschedulable = p.rejected.clone();
    for (&k, &(count, reason)) in leftover {
        for pod in take(k, count) {
            unschedulable.push(Unschedulable {
                pod,
                reason,
                message: reason_message(reason),
            });
        }
    }
    unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
    existing.sort_by(|a, b| a.node.cmp(&b.node));
    let objective = round6(objective);
    Plan {
        strategy,
        nodes,
        existing,
        unschedulable,
        cost_per_hour: round6(cost),
        objective,
        lower_bound: (lower_bound * 1e6).floor() / 1e6,
        solver,
        volumes: vec![],
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

pub fn reason_message(reason: UnschedulableReason) -> String {
    match reason {
        UnschedulableReason::NoCompatibleOffering => "no compatible offering or node".into(),
        UnschedulableReason::LargerThanAnyType => {
            "does not fit the room left on any compatible node".into()
        }
        UnschedulableReason::NodepoolLimit => {
            "nodepool limits leave no room for another node".into()
        }
        UnschedulableReason::Topology => {
            "topology spread or pod (anti-)affinity cannot be satisfied".into()
        }
        UnschedulableReason::HostPort => "its host port is taken on every candidate node".into(),
        UnschedulableReason::MinValues => "nodepool minValues cannot be met".into(),
        UnschedulableReason::SolverLimit => "left unplaced within the solver's limits".into(),
        UnschedulableReason::Volume => "its volumes allow no node that can take it".into(),
    }
}

/// The zones a plan fixes for unbound claims: for each pending pod with a WaitForFirstConsumer
/// claim, the zone of the node the plan puts it on.
pub fn volume_zones(snapshot: &crate::domain::ClusterSnapshot, plan: &Plan) -> Vec<VolumeZone> {
    let zone_of_node: BTreeMap<&str, Option<&str>> = plan
        .nodes
        .iter()
        .map(|n| (n.id.as_str(), Some(n.zone.as_str())))
        .chain(snapshot.nodes.iter().map(|n| {
            let zone = n
                .labels
                .get(crate::domain::labels::ZONE)
                .map(String::as_str);
            (n.name.as_str(), zone)
        }))
        .collect();
    let destinations = plan.destinations();
    let mut out = Vec::new();
    for pod in snapshot.pending_pods().filter(|p| !p.volumes.is_empty()) {
        let key = pod.key();
        let Some(zone) = destinations
            .get(key.as_str())
            .and_then(|d| zone_of_node.get(d).copied().flatten())
        else {
            continue;
        };
        let Ok(needs) = snapshot
            .storage
            .needs(&pod.namespace, &pod.name, &pod.volumes)
        else {
            continue;
        };
        out.extend(needs.unbound.into_iter().map(|claim| VolumeZone {
            claim,
            pod: key.clone(),
            zone: zone.to_string(),
        }));
    }
    out.sort();
    out
}
