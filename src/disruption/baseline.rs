//! Karpenter's own disruption pass (v1.0), the yardstick the MILP strategy is measured against.
//! Forced removals from the triage come first: expired nodes (one command each, pods rescheduled
//! wherever they fit), drifted nodes (one command each, any number of replacements, skipped when a
//! pod would find no place) and one command for all empty nodes. When no drift command was
//! produced, multi-node consolidation binary-searches the longest prefix of the candidates
//! (cheapest to disrupt first) that one delete or one cheaper replacement can remove; failing that,
//! single-node consolidation takes the first candidate, pools interleaved, that can go. Every "can
//! it go" is Karpenter's scheduling simulation: the provisioning core's first-fit-decreasing solve
//! (`Strategy::Greedy`) of the cluster without the nodes. Commands are simulated one after another
//! on a working copy of the cluster, as Karpenter would see them one pass after another: the nodes
//! this pass removes anyway, and the nodes one command launches, are cordoned there, so actions
//! stay independent and never overcommit the same free room. Emptiness and expiration do not end
//! the pass (Karpenter would run consolidation on its next pass anyway); drift does.
//! `run_to_fixpoint` repeats passes until one finds nothing, which is how the benchmark measures
//! the baseline's end state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use crate::catalog::{CapacityType, Catalog};
use crate::domain::labels::HOSTNAME;
use crate::domain::ClusterSnapshot;
use crate::optimizer::{solve, solve_sharing, Plan, ShapeCache, Strategy};

use super::actions::without_types;
use super::candidates::NodeInfo;
use super::edit::{with_disruption, with_plan, without_nodes};
use super::plan::{Action, Blocked, DisruptionPlan, DisruptionReport, DisruptionStatus, Move};
use super::{
    assemble, cheaper_spot_types, cluster_cost, consolidate, delete_only, round6, without_pending,
    DisruptionError, DisruptionSettings, DisruptionStrategy, Reason, Triage,
};

/// Why Karpenter's consolidation leaves the nodes it tried, in the words of its own messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Refusal {
    #[error("not all pods would schedule ({0})")]
    Unschedulable(String),
    #[error("can't remove without creating {0} nodes")]
    ManyNodes(usize),
    #[error("only the instance types being removed would hold the pods")]
    OnlyRemovedTypes,
    #[error("can't replace with a cheaper node ({instance_type} at ${price:.4}/h, removing ${removed:.4}/h)")]
    NotCheaper {
        instance_type: String,
        price: f64,
        removed: f64,
    },
    #[error("spot-to-spot needs {needed} cheaper spot types, found {found}")]
    SpotToSpot { needed: usize, found: usize },
    #[error("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")]
    SpotToSpotOff,
    #[error("{0}")]
    Balanced(String),
}

/// Karpenter caps multi-node consolidation at this many candidates.
const MAX_MULTI: usize = 100;

/// A scheduling simulation: the cluster without some nodes, its greedy plan, and where each
/// displaced pod came from.
struct Sim {
    after: ClusterSnapshot,
    plan: Plan,
    home: BTreeMap<String, String>,
}

/// One decision pass over a working copy of the cluster.
struct Pass<'s, 'a> {
    catalog: &'s Catalog,
    settings: &'s DisruptionSettings,
    t: &'s Triage<'a>,
    start: Instant,
    now: String,
    /// The cluster once the commands taken so far are carried out, without pending pods.
    work: ClusterSnapshot,
    /// Nodes this pass cordoned in `work`.
    cordoned: BTreeSet<String>,
    actions: Vec<Action>,
    blocked: Vec<Blocked>,
    notes: Vec<String>,
    /// Shapes of `catalog` under `work`'s NodePools: every simulation shares them (commands change
    /// only pods and nodes).
    shapes: ShapeCache,
}

pub(crate) fn decide(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    start: Instant,
) -> Result<DisruptionPlan, DisruptionError> {
    let work = without_pending(snapshot);
    let mut notes = Vec::new();
    let pending = snapshot.pods.len() - work.pods.len();
    if pending > 0 {
        notes.push(format!("{pending} pending pods left to the provisioner"));
    }
    let mut pass = Pass {
        catalog,
        settings,
        t,
        start,
        now: settings.now.to_rfc3339(),
        work,
        cordoned: BTreeSet::new(),
        actions: Vec::new(),
        blocked: t.blocked.clone(),
        notes,
        shapes: ShapeCache::default(),
    };
    pass.forced()?;
    if pass.actions.iter().any(|a| a.reason == Reason::Drifted) {
        // v1.0 stops at the first method that produces a command; drift comes before consolidation
        pass.notes
            .push("drift produced commands: consolidation not tried this pass".into());
    } else if !pass.multi_node()? {
        pass.single_node()?;
    }
    Ok(pass.finish(snapshot))
}

impl<'s, 'a> Pass<'s, 'a> {
    fn forced(&mut self) -> Result<(), DisruptionError> {
        let t = self.t;
        // every node this pass removes anyway is no target for another's pods (Karpenter taints a
        // command's nodes as it starts it); a drifted node that stays is opened again
        let going: BTreeSet<&str> = t.forced.iter().map(|(n, _)| n.name.as_str()).collect();
        self.cordon(&going, true);
        // expiration is its own forceful controller in v1: the node goes even if a pod finds no
        // place
        for (n, _) in t.forced.iter().filter(|(_, r)| *r == Reason::Expired) {
            let sim = self.simulate(&[n], self.catalog)?;
            let lost = self.unplaced(&sim);
            if !lost.is_empty() {
                self.notes.push(format!(
                    "expired node {}: {} pods find no place and are left pending",
                    n.name,
                    lost.len()
                ));
            }
            self.take(&[n], sim, Reason::Expired, "expiration");
        }
        for (n, _) in t.forced.iter().filter(|(_, r)| *r == Reason::Drifted) {
            let sim = self.simulate(&[n], self.catalog)?;
            match self.unplaced(&sim).first() {
                Some(why) => {
                    self.blocked.push(Blocked {
                        node: n.name.clone(),
                        reason: why.clone(),
                    });
                    self.cordon(&BTreeSet::from([n.name.as_str()]), false);
                }
                None => self.take(&[n], sim, Reason::Drifted, "drift"),
            }
        }
        let empty: Vec<&NodeInfo> = t
            .forced
            .iter()
            .filter(|(_, r)| *r == Reason::Empty)
            .map(|(n, _)| *n)
            .collect();
        if !empty.is_empty() {
            let names: BTreeSet<String> = empty.iter().map(|n| n.name.clone()).collect();
            self.work = without_nodes(&self.work, &names);
            self.actions.push(delete_only(Reason::Empty, &empty));
            self.notes.push(format!(
                "emptiness: {} empty nodes deleted in one command",
                empty.len()
            ));
        }
        Ok(())
    }

    /// Cordons `names` in the working copy, or lifts a cordon this pass set (never the cluster's
    /// own).
    fn cordon(&mut self, names: &BTreeSet<&str>, on: bool) {
        for n in self
            .work
            .nodes
            .iter_mut()
            .filter(|n| names.contains(n.name.as_str()))
        {
            if on && !n.unschedulable {
                self.cordoned.insert(n.name.clone());
                Arc::make_mut(n).unschedulable = true;
            } else if !on && self.cordoned.remove(&n.name) {
                Arc::make_mut(n).unschedulable = false;
            }
        }
    }

    /// Multi-node consolidation; true when it produced a command.
    fn multi_node(&mut self) -> Result<bool, DisruptionError> {
        let mut budget = self.t.underutilized.clone();
        let mut cands: Vec<&NodeInfo> = Vec::new();
        for n in self.sorted() {
            if let Some(left) = budget.get_mut(&n.pool).filter(|l| **l > 0) {
                *left -= 1;
                cands.push(n);
            }
        }
        cands.truncate(MAX_MULTI);
        if cands.len() < 2 {
            return Ok(false);
        }
        // firstNConsolidationOption: the largest valid prefix, assuming validity is monotone in n
        let (mut lo, mut hi) = (2, cands.len());
        let mut best: Option<(usize, Sim)> = None;
        while lo <= hi {
            if self.out_of_time() {
                self.notes.push(
                    "multi-node consolidation hit the time limit; kept the last valid command"
                        .into(),
                );
                break;
            }
            let mid = (lo + hi) / 2;
            match self.compute(&cands[..mid])? {
                Ok(sim) => {
                    best = Some((mid, sim));
                    lo = mid + 1;
                }
                Err(_) => hi = mid - 1,
            }
        }
        let Some((n, sim)) = best else {
            return Ok(false);
        };
        self.take(
            &cands[..n],
            sim,
            Reason::Underutilized,
            "multi-node consolidation",
        );
        Ok(true)
    }

    /// Single-node consolidation: candidates round-robin across pools, the first valid one is
    /// taken.
    fn single_node(&mut self) -> Result<(), DisruptionError> {
        let mut pools: Vec<(String, Vec<&NodeInfo>)> = Vec::new();
        for n in self.sorted() {
            match pools.iter_mut().find(|(p, _)| *p == n.pool) {
                Some((_, list)) => list.push(n),
                None => pools.push((n.pool.clone(), vec![n])),
            }
        }
        let longest = pools.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        let order: Vec<&NodeInfo> = (0..longest)
            .flat_map(|i| pools.iter().filter_map(move |(_, l)| l.get(i).copied()))
            .collect();
        let mut tried = 0;
        for n in order {
            if self.t.underutilized.get(&n.pool).copied().unwrap_or(0) == 0 {
                continue;
            }
            if self.out_of_time() {
                self.notes.push(format!(
                    "single-node consolidation hit the time limit after {tried} candidates"
                ));
                return Ok(());
            }
            tried += 1;
            match self.compute(&[n])? {
                Ok(sim) => {
                    self.take(
                        &[n],
                        sim,
                        Reason::Underutilized,
                        "single-node consolidation",
                    );
                    return Ok(());
                }
                // a few reasons explain a no-op; hundreds would drown the plan
                Err(why) if tried <= 10 => self.notes.push(format!("{}: {why}", n.name)),
                Err(_) => {}
            }
        }
        if tried > 0 {
            self.notes.push(format!(
                "consolidation: no command among {tried} candidates"
            ));
        }
        Ok(())
    }

    /// The consolidation candidates in v1.0 order: disruption cost ascending, then name.
    fn sorted(&self) -> Vec<&'a NodeInfo> {
        let mut c: Vec<&NodeInfo> = self.t.open.clone();
        c.sort_by(|a, b| {
            a.eviction_cost
                .total_cmp(&b.eviction_cost)
                .then(a.name.cmp(&b.name))
        });
        c
    }

    fn out_of_time(&self) -> bool {
        self.start.elapsed() >= self.settings.time_limit
    }

    /// Karpenter's computeConsolidation: a delete, one strictly cheaper replacement, or why
    /// neither.
    fn compute(&self, nodes: &[&NodeInfo]) -> Result<Result<Sim, Refusal>, DisruptionError> {
        let sim = self.simulate(nodes, self.catalog)?;
        if let Some(why) = self.unplaced(&sim).into_iter().next() {
            return Ok(Err(Refusal::Unschedulable(why)));
        }
        let sim = match sim.plan.nodes.len() {
            0 => sim,
            1 => match self.replace(nodes, sim)? {
                Ok(sim) => sim,
                Err(why) => return Ok(Err(why)),
            },
            k => return Ok(Err(Refusal::ManyNodes(k))),
        };
        // Balanced scores the command that would be taken, after the replacement is chosen
        let launched: f64 = sim.plan.nodes.iter().map(|n| n.price).sum();
        match self.t.balanced.refusal(nodes, launched) {
            Some(why) => Ok(Err(Refusal::Balanced(why))),
            None => Ok(Ok(sim)),
        }
    }

    fn replace(
        &self,
        nodes: &[&NodeInfo],
        sim: Sim,
    ) -> Result<Result<Sim, Refusal>, DisruptionError> {
        let removed: f64 = nodes.iter().map(|n| n.price).sum();
        let types: BTreeSet<&str> = nodes.iter().map(|n| n.instance_type.as_str()).collect();
        let l = &sim.plan.nodes[0];
        let options: BTreeSet<&str> = std::iter::once(l.instance_type.as_str())
            .chain(l.fallbacks.iter().map(|f| f.instance_type.as_str()))
            .collect();
        // filterOutSameInstanceType: when a removed node's type is an option, only options cheaper
        // than that node remain (so [A, A] is never replaced by one A: deleting one is better)
        let cap = nodes
            .iter()
            .filter(|n| options.contains(n.instance_type.as_str()))
            .map(|n| n.price)
            .fold(f64::INFINITY, f64::min);
        let limit = removed.min(cap);
        let mut sim = if types.contains(l.instance_type.as_str()) {
            let again = self.simulate(nodes, &without_types(self.catalog, &types))?;
            if !self.unplaced(&again).is_empty() || again.plan.nodes.len() != 1 {
                return Ok(Err(Refusal::OnlyRemovedTypes));
            }
            again
        } else {
            sim
        };
        let l = &mut sim.plan.nodes[0];
        if l.price >= limit {
            return Ok(Err(Refusal::NotCheaper {
                instance_type: l.instance_type.clone(),
                price: l.price,
                removed,
            }));
        }
        l.fallbacks
            .retain(|f| f.price < limit && !types.contains(f.instance_type.as_str()));
        let spot = l.capacity_type == CapacityType::Spot;
        if spot && !self.settings.spot_to_spot && nodes.iter().all(|n| n.spot) {
            return Ok(Err(Refusal::SpotToSpotOff));
        }
        // single-node consolidation only: Karpenter's multi-node pass takes spot-to-spot on price
        if nodes.len() == 1 && nodes[0].spot && l.capacity_type == CapacityType::Spot {
            // the launch and the fallbacks kept above are all below `limit`
            let found = cheaper_spot_types(l, limit);
            if found < self.settings.spot_to_spot_min_types {
                return Ok(Err(Refusal::SpotToSpot {
                    needed: self.settings.spot_to_spot_min_types,
                    found,
                }));
            }
        }
        Ok(Ok(sim))
    }

    /// Schedules the working cluster without `nodes`: their reschedulable pods are the only pending
    /// ones.
    fn simulate(&self, nodes: &[&NodeInfo], catalog: &Catalog) -> Result<Sim, DisruptionError> {
        let names: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
        // from the working copy, not the triage: earlier commands may have moved pods onto these
        // nodes
        let home = self
            .work
            .pods
            .iter()
            .filter(|p| {
                p.is_reschedulable() && p.node_name.as_ref().is_some_and(|n| names.contains(n))
            })
            .map(|p| (p.key(), p.node_name.clone().unwrap_or_default()))
            .collect();
        let after = without_nodes(&self.work, &names);
        let left = self
            .settings
            .time_limit
            .saturating_sub(self.start.elapsed())
            .as_secs_f64();
        let settings = self.settings.solve(left, Strategy::Greedy);
        // the spot-to-spot retry narrows the catalog: its shapes are its own
        let plan = if std::ptr::eq(catalog, self.catalog) {
            solve_sharing(&after, catalog, &settings, &self.shapes)?
        } else {
            solve(&after, catalog, &settings)?
        };
        Ok(Sim { after, plan, home })
    }

    /// Why each displaced pod the simulation could not place stays put.
    fn unplaced(&self, sim: &Sim) -> Vec<String> {
        sim.plan
            .unschedulable
            .iter()
            .filter(|u| sim.home.contains_key(&u.pod))
            .map(|u| format!("pod {} cannot be rescheduled: {}", u.pod, u.message))
            .collect()
    }

    /// Records a command and carries it out on the working copy.
    fn take(&mut self, nodes: &[&NodeInfo], mut sim: Sim, reason: Reason, method: &str) {
        // launched ids are unique per solve only; prefix them with the action's index
        let tag = format!("a{}-", self.actions.len());
        for n in &mut sim.plan.nodes {
            n.id = format!("{tag}{}", n.id);
            n.labels.insert(HOSTNAME.to_string(), n.id.clone());
        }
        let dest = sim.plan.destinations();
        // a pod that found no place gets no move: it is left pending for the provisioner
        let moves: Vec<Move> = sim
            .home
            .iter()
            .filter_map(|(pod, from)| {
                dest.get(pod.as_str()).map(|to| Move {
                    pod: pod.clone(),
                    from: from.clone(),
                    to: to.to_string(),
                })
            })
            .collect();
        let mut delete: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        delete.sort();
        let launched: f64 = sim.plan.nodes.iter().map(|n| n.price).sum();
        self.notes.push(format!(
            "{method}: deletes {} and launches {} nodes",
            delete.join(", "),
            sim.plan.nodes.len()
        ));
        let mut work = without_pending(&with_plan(
            &sim.after,
            self.catalog,
            &sim.plan,
            "",
            &self.now,
        ));
        // another command's new nodes are not room for later commands: actions must stay
        // independent
        let ids: BTreeSet<&str> = sim.plan.nodes.iter().map(|n| n.id.as_str()).collect();
        work.nodes
            .iter_mut()
            .filter(|n| ids.contains(n.name.as_str()))
            .for_each(|n| Arc::make_mut(n).unschedulable = true);
        self.work = work;
        self.actions.push(Action {
            reason,
            savings_per_hour: round6(nodes.iter().map(|n| n.price).sum::<f64>() - launched),
            disruption_cost: round6(nodes.iter().map(|n| n.disruption_cost).sum()),
            delete,
            launch: sim.plan.nodes,
            moves,
        });
    }

    fn finish(self, snapshot: &ClusterSnapshot) -> DisruptionPlan {
        let solver = DisruptionReport {
            status: DisruptionStatus::Baseline,
            strategy: DisruptionStrategy::Baseline,
            seconds: self.start.elapsed().as_secs_f64(),
            candidates: self.t.open.len(),
            pod_classes: 0,
            variables: 0,
            constraints: 0,
            mip_gap: None,
            notes: self.notes,
        };
        // the baseline proves nothing about how far it is from the best plan
        assemble(
            cluster_cost(snapshot, self.catalog),
            self.t,
            self.actions,
            self.blocked,
            0.0,
            solver,
        )
    }
}

/// Runs baseline passes at the same `now`, carrying out each plan, until a pass finds no action or
/// `max_rounds` passes ran. Returns the final cluster and the plans that had actions, in order.
pub fn run_to_fixpoint(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    max_rounds: usize,
) -> Result<(ClusterSnapshot, Vec<DisruptionPlan>), DisruptionError> {
    let settings = DisruptionSettings {
        strategy: DisruptionStrategy::Baseline,
        ..settings.clone()
    };
    let now = settings.now.to_rfc3339();
    let mut current = snapshot.clone();
    let mut plans = Vec::new();
    for round in 0..max_rounds {
        let plan = consolidate(&current, catalog, &settings)?;
        if plan.actions.is_empty() {
            break;
        }
        current = with_disruption(&current, catalog, &plan, &format!("r{round}-"), &now);
        plans.push(plan);
    }
    Ok((current, plans))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::timing::parse_timestamp;
    use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
    use crate::domain::{Labels, Node, NodePool, Pod, PodConstraints, Quantity, Resources};

    fn settings() -> DisruptionSettings {
        let now = parse_timestamp("2026-01-01T00:00:00Z").expect("timestamp");
        DisruptionSettings {
            strategy: DisruptionStrategy::Baseline,
            ..DisruptionSettings::new(now)
        }
    }

    /// On-demand only, so the cheapest replacement is always a smaller type.
    fn tiny_catalog() -> Catalog {
        let it = |name: &str, vcpu: u32, price: f64| {
            format!(
                r#"{{"name":"{name}","vcpu":{vcpu},"memory_mib":{},"arch":"amd64","max_pods":110,"overhead":{{}},"offerings":[{{"zone":"z1","capacity_type":"on-demand","price":{price}}}]}}"#,
                vcpu * 4096
            )
        };
        let json = format!(
            r#"{{"region":"test","instance_types":[{},{}]}}"#,
            it("small", 2, 0.10),
            it("big", 8, 0.40)
        );
        Catalog::from_json(&json, "test").expect("tiny catalog")
    }

    fn node(catalog: &Catalog, name: &str, it: &str, zone: &str) -> Node {
        let t = catalog
            .instance_types
            .iter()
            .find(|t| t.name == it)
            .expect("type in catalog");
        let labels: Labels = [
            (NODEPOOL, "default"),
            (INSTANCE_TYPE, it),
            (ZONE, zone),
            (CAPACITY_TYPE, "on-demand"),
            (HOSTNAME, name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Node::new(name, labels, t.capacity(None), t.allocatable(None))
    }

    fn pod(name: &str, cpu_m: i64, node: &str) -> Pod {
        let requests = Resources::new()
            .with("cpu", Quantity::from_milli(cpu_m))
            .with("memory", Quantity::from_mib(512))
            .with("pods", Quantity::from_units(1));
        let labels: Labels = [("app".to_string(), name.to_string())].into();
        let constraints = PodConstraints {
            namespace: "default".into(),
            labels,
            requests,
            ..Default::default()
        };
        Pod {
            uid: format!("uid-{name}"),
            node_name: Some(node.into()),
            ..Pod::new(name, constraints).owned_by("ReplicaSet", name)
        }
    }

    fn snapshot(nodes: Vec<Node>, pods: Vec<Pod>) -> ClusterSnapshot {
        ClusterSnapshot {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            pods: pods.into_iter().map(Arc::new).collect(),
            nodepools: vec![NodePool::unconstrained("default")],
            ..ClusterSnapshot::default()
        }
    }

    fn run(snap: &ClusterSnapshot, catalog: &Catalog) -> DisruptionPlan {
        consolidate(snap, catalog, &settings()).expect("baseline plan")
    }

    #[test]
    fn multi_node_replaces_three_underused_nodes_with_one() {
        let cat = Catalog::bundled("us-east-1").expect("bundled catalog");
        let nodes = (0..3)
            .map(|i| node(&cat, &format!("n{i}"), "m5.2xlarge", "us-east-1a"))
            .collect();
        let pods = (0..3)
            .map(|i| pod(&format!("p{i}"), 1000, &format!("n{i}")))
            .collect();
        let plan = run(&snapshot(nodes, pods), &cat);
        assert_eq!(plan.actions.len(), 1, "{plan:#?}");
        let a = &plan.actions[0];
        assert_eq!(a.reason, Reason::Underutilized);
        assert_eq!(a.delete, vec!["n0", "n1", "n2"]);
        assert_eq!(a.launch.len(), 1);
        assert!(a.launch[0].price < 3.0 * 0.384 && a.launch[0].instance_type != "m5.2xlarge");
        assert_eq!(a.moves.len(), 3);
        assert!(a.moves.iter().all(|m| m.to == a.launch[0].id));
        assert!(plan
            .solver
            .notes
            .iter()
            .any(|n| n.starts_with("multi-node")));
        assert!(
            (plan.cost_after_per_hour - (plan.cost_before_per_hour - a.savings_per_hour)).abs()
                < 1e-6
        );
        assert_eq!(plan.solver.status, DisruptionStatus::Baseline);
        assert_eq!(plan.lower_bound, 0.0);
    }

    #[test]
    fn empty_node_gets_an_empty_action() {
        let cat = tiny_catalog();
        let snap = snapshot(
            vec![
                node(&cat, "idle", "big", "z1"),
                node(&cat, "busy", "small", "z1"),
            ],
            vec![pod("p", 1500, "busy")],
        );
        let plan = run(&snap, &cat);
        assert_eq!(plan.actions.len(), 1, "{plan:#?}");
        assert_eq!(plan.actions[0].reason, Reason::Empty);
        assert_eq!(plan.actions[0].delete, vec!["idle"]);
        assert!(plan.actions[0].launch.is_empty() && plan.actions[0].moves.is_empty());
        assert!((plan.savings_per_hour - 0.40).abs() < 1e-9);
        let (after, plans) = run_to_fixpoint(&snap, &cat, &settings(), 5).expect("fixpoint");
        assert_eq!(plans.len(), 1);
        assert_eq!(
            after
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>(),
            vec!["busy"]
        );
    }

    #[test]
    fn node_whose_pod_fits_elsewhere_is_deleted() {
        // both together only fit one "big" (a removed type); alone, b2's pod fits on b1's free room
        let cat = tiny_catalog();
        let snap = snapshot(
            vec![node(&cat, "b1", "big", "z1"), node(&cat, "b2", "big", "z1")],
            vec![pod("large", 5000, "b1"), pod("little", 1000, "b2")],
        );
        let plan = run(&snap, &cat);
        assert_eq!(plan.actions.len(), 1, "{plan:#?}");
        let a = &plan.actions[0];
        assert_eq!(a.reason, Reason::Underutilized);
        assert_eq!(a.delete, vec!["b1"], "equal disruption costs: name order");
        assert!(a.launch.is_empty());
        assert_eq!(
            a.moves,
            vec![Move {
                pod: "default/large".into(),
                from: "b1".into(),
                to: "b2".into()
            }]
        );
        assert!(
            plan.solver
                .notes
                .iter()
                .any(|n| n.starts_with("single-node")),
            "{:?}",
            plan.solver.notes
        );
        assert!((a.savings_per_hour - 0.40).abs() < 1e-9);
        let (after, plans) = run_to_fixpoint(&snap, &cat, &settings(), 5).expect("fixpoint");
        assert_eq!(after.nodes.len(), 1, "{plans:#?}");
        assert!(after
            .pods
            .iter()
            .all(|p| p.node_name.as_deref() == Some(after.nodes[0].name.as_str())));
    }

    #[test]
    fn no_action_when_only_pricier_alternatives_exist() {
        let cat = tiny_catalog();
        let snap = snapshot(
            vec![node(&cat, "s", "small", "z1")],
            vec![pod("p", 1500, "s")],
        );
        let plan = run(&snap, &cat);
        assert!(plan.actions.is_empty(), "{plan:#?}");
        assert_eq!(plan.savings_per_hour, 0.0);
        assert_eq!(plan.cost_after_per_hour, plan.cost_before_per_hour);
        let (_, plans) = run_to_fixpoint(&snap, &cat, &settings(), 5).expect("fixpoint");
        assert!(plans.is_empty());
    }

    #[test]
    fn drift_replaces_what_it_can_and_stops_consolidation() {
        let cat = tiny_catalog();
        let mut snap = snapshot(
            vec![
                node(&cat, "d1", "big", "z1"),
                node(&cat, "d2", "big", "z1"),
                node(&cat, "s", "small", "z1"),
            ],
            vec![
                pod("p1", 1000, "d1"),
                pod("p2", 5000, "d2"),
                pod("p3", 100, "s"),
            ],
        );
        snap.nodepools[0].requirements = vec![crate::domain::labels::Requirement::in_values(
            INSTANCE_TYPE,
            &["small"],
        )];
        let plan = run(&snap, &cat);
        assert_eq!(plan.actions.len(), 1, "{plan:#?}");
        let a = &plan.actions[0];
        assert_eq!(
            (a.reason, a.delete.clone()),
            (Reason::Drifted, vec!["d1".to_string()])
        );
        // p1 fits on s's free room: no launch needed
        assert!(a.launch.is_empty() && a.moves[0].to == "s", "{a:#?}");
        assert!(
            plan.blocked
                .iter()
                .any(|b| b.node == "d2" && b.reason.contains("cannot be rescheduled")),
            "{:?}",
            plan.blocked
        );
        assert!(plan
            .solver
            .notes
            .iter()
            .any(|n| n.contains("consolidation not tried")));
        let drifted = plan
            .budgets
            .iter()
            .find(|b| b.reason == Reason::Drifted)
            .expect("drift budget");
        assert_eq!(drifted.planned, 1);
    }
}
