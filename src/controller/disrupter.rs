//! Disruption: every interval, when the cluster is quiet (nothing in flight, no pending pod
//! waiting for capacity) and its inputs changed since the last pass found nothing, the disruption
//! decision runs. A plan with actions waits the validation delay and is dropped if its fingerprint
//! changed; otherwise its nodes are tainted, replacements launched, and once every replacement has
//! registered the nodes are drained through the Eviction API (PodDisruptionBudgets pace it) and,
//! once their evicted pods are gone (each within its grace period), terminated.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::{Cluster, Controller, ControllerError, Wake};
use crate::cloud::CloudProvider;
use crate::disruption::candidates::Candidates;
use crate::disruption::{self, fingerprint, DisruptionPlan, DisruptionSettings};
use crate::domain::DISRUPTED_TAINT;

/// Karpenter's orchestration timeout, the default of `Settings::command_timeout`: a command whose
/// replacements have not initialized, or whose nodes have not all drained, this long after it was
/// validated is rolled back, so that one stuck command (a replacement that never initializes, a
/// budget at zero) does not hold every later consolidation, drift and expiry decision.
pub const COMMAND_TIMEOUT_SECONDS: f64 = 600.0;
/// Retry interval of a drain blocked by a PodDisruptionBudget.
const DRAIN_RETRY_SECONDS: f64 = 5.0;
/// Budgets with cron schedules change what a pass may do as time passes; a quiet cluster with
/// them is looked at again after this long (Karpenter's consolidated-state lifetime).
const SCHEDULED_BUDGET_TTL_SECONDS: f64 = 300.0;

#[derive(Default)]
pub(super) struct State {
    command: Option<Command>,
    /// Signature of the cluster and time of the last pass that found nothing to do.
    quiet: Option<(u64, f64)>,
}

struct Command {
    plan: DisruptionPlan,
    /// Names of the launched replacements once validated.
    replacements: Vec<String>,
    validated: bool,
    /// When the command was validated (its nodes tainted, its replacements launched).
    validated_at: Option<f64>,
    draining: bool,
    /// Nodes of the plan already drained and terminated.
    terminated: BTreeSet<String>,
    /// Drained nodes whose termination the cloud refused: when to ask again, and the last wait.
    refused: BTreeMap<String, (f64, f64)>,
}

impl<P: CloudProvider> Controller<P> {
    pub fn disruption_tick(
        &mut self,
        cluster: &mut impl Cluster,
        now: f64,
    ) -> Result<(), ControllerError> {
        // a deposed leader neither rolls back nor clears taints: the new leader owns them
        self.leading()?;
        if let Some(cmd) = &self.disruption.command {
            if cmd
                .validated_at
                .is_some_and(|t| now - t >= self.settings.command_timeout)
            {
                self.roll_back(cluster);
            }
            return Ok(());
        }
        // before the busy check: a stale taint keeps pods off a node, and they would keep it busy
        self.clear_stale_taints(cluster);
        if self.busy(cluster, now) {
            return Ok(());
        }
        let sig = self.signature(cluster, now);
        let scheduled = cluster
            .snapshot()
            .nodepools
            .iter()
            .any(|p| p.disruption.budgets.iter().any(|b| b.schedule.is_some()));
        let ttl = match (self.settings.quiet_ttl, scheduled) {
            (Some(t), _) => Some(t),
            (None, true) => Some(SCHEDULED_BUDGET_TTL_SECONDS),
            (None, false) => None,
        };
        if self
            .disruption
            .quiet
            .is_some_and(|(s, t)| s == sig && ttl.is_none_or(|ttl| now - t < ttl))
        {
            return Ok(());
        }
        let plan = self.decide(cluster, now)?;
        // the solve may outlast the lease: a plan decided by a replica that lost it is dropped
        self.leading()?;
        tracing::debug!(hours = now / 3600.0, candidates = plan.solver.candidates, actions = plan.actions.len(), deleted = plan.deleted_nodes(), savings = plan.savings_per_hour, status = %plan.solver.status, "disruption pass");
        let at = self.timestamp(now);
        for notice in super::report::blocked(cluster.snapshot(), &self.catalog, &plan, at) {
            cluster.notify(notice);
        }
        if plan.actions.is_empty() {
            self.disruption.quiet = Some((sig, now));
            return Ok(());
        }
        self.disruption.command = Some(Command {
            plan,
            replacements: vec![],
            validated: false,
            validated_at: None,
            draining: false,
            terminated: BTreeSet::new(),
            refused: BTreeMap::new(),
        });
        self.wake(now + self.settings.validation_delay, Wake::Validate);
        Ok(())
    }

    fn decide(
        &mut self,
        cluster: &mut impl Cluster,
        now: f64,
    ) -> Result<DisruptionPlan, ControllerError> {
        let catalog = self.unavailable.mask(&self.catalog, now);
        let mut settings = DisruptionSettings::new(self.timestamp(now));
        settings.strategy = self.settings.disruption;
        settings.time_limit = Duration::from_secs_f64(self.settings.disruption_time_limit);
        settings.gap = self.settings.gap;
        settings.lower_bound = self.settings.disruption_bound;
        settings.fault = self.settings.solver_fault;
        settings.spot_to_spot = self.settings.spot_to_spot_consolidation;
        // joiner's own decisions keep room for workloads that come back; Karpenter's do not
        if settings.strategy == disruption::DisruptionStrategy::Milp {
            settings.held =
                crate::optimizer::headroom::held_room(cluster.snapshot(), &self.trend.recurring());
        }
        let plan = disruption::consolidate(cluster.snapshot(), &catalog, &settings)
            .map_err(|e| ControllerError::Disruption(e.to_string()))?;
        self.record_solve(
            super::Phase::Disruption,
            plan.solver.seconds,
            plan.solver.status.into(),
            plan.solver.mip_gap.unwrap_or(0.0),
        );
        if plan.solver.status == disruption::DisruptionStatus::FallbackBaseline {
            cluster.solver_fell_back(
                super::Phase::Disruption.as_str(),
                plan.solver.notes.first().map_or("", String::as_str),
            );
        }
        Ok(plan)
    }

    /// Capacity is on its way or being asked for: nodes in flight, or pending pods that the last
    /// solve did not give up on. Disruption waits, as a command decided now would race them.
    fn busy(&self, cluster: &impl Cluster, now: f64) -> bool {
        !cluster.in_flight().is_empty()
            || cluster
                .snapshot()
                .pending_pods()
                .any(|p| self.parked.get(&p.key()).is_none_or(|t| *t <= now))
    }

    /// What a pass depends on: nodes (and whether they are schedulable), where every pod is,
    /// which nodes are eligible (consolidateAfter, expiry, drift, do-not-disrupt all move with the
    /// clock) and which offerings are out of capacity.
    fn signature(&self, cluster: &impl Cluster, now: f64) -> u64 {
        let snap = cluster.snapshot();
        let mut h = DefaultHasher::new();
        for n in &snap.nodes {
            (&n.name, n.unschedulable).hash(&mut h);
        }
        for p in &snap.pods {
            (p.key(), &p.node_name).hash(&mut h);
        }
        // availability is hashed on its own: masking would copy the whole catalog every tick
        for c in Candidates::build(snap, &self.catalog, self.timestamp(now)).nodes {
            (
                c.name,
                c.consolidatable,
                c.expired,
                c.drift.is_some(),
                c.block.is_some(),
            )
                .hash(&mut h);
        }
        self.unavailable.keys(now).hash(&mut h);
        // a cost-weight change (the ConfigMap) can make a quiet cluster worth consolidating
        format!("{:?}", snap.weights).hash(&mut h);
        h.finish()
    }

    /// After the validation delay: the plan stands only if its inputs are unchanged.
    pub fn validate(&mut self, cluster: &mut impl Cluster, now: f64) {
        let Some(cmd) = self.disruption.command.as_ref() else {
            return;
        };
        if self.leading().is_err() {
            return;
        }
        let catalog = self.unavailable.mask(&self.catalog, now);
        if self.busy(cluster, now)
            || fingerprint::of(cluster.snapshot(), &catalog, &cmd.plan) != cmd.plan.fingerprint
        {
            self.abandon(cluster);
            return;
        }
        let plan = cmd.plan.clone();
        for name in plan.actions.iter().flat_map(|a| &a.delete) {
            cluster.set_disrupted(name, true);
        }
        let mut launched = Vec::new();
        for node in plan.actions.iter().flat_map(|a| &a.launch) {
            match self.launch(cluster, node, now) {
                Some(name) => launched.push(name),
                None => {
                    // Karpenter drops a command whose replacement cannot launch; what did launch
                    // stays and is consolidated later if it is not needed
                    self.abandon(cluster);
                    return;
                }
            }
        }
        // the replacements' pods still run on the old nodes: nothing is nominated yet
        for name in &launched {
            self.nominated.retain(|_, n| n != name);
        }
        let bound = self.settings.disruption_bound;
        super::report::command_executed(cluster, &plan, &launched, bound);
        if let Some(cmd) = self.disruption.command.as_mut() {
            cmd.replacements = launched;
            cmd.validated = true;
            cmd.validated_at = Some(now);
        }
        self.stats.disruptions_executed += 1;
        self.replacement_ready(cluster, now);
    }

    /// With no command under way, a `karpenter.sh/disrupted` taint on a node not being reclaimed
    /// was left by a process that died mid-command (a leader killed, a crash): the node goes back
    /// into service, as Karpenter's disruption loop does before each pass. The new leader decides
    /// again from scratch; the dead one's replacements that never registered are given up
    /// elsewhere. A node whose Node or NodeClaim is being deleted keeps its taint, as Karpenter's
    /// does: its termination (a user's delete, an interruption a dead leader recorded) owns it.
    fn clear_stale_taints(&mut self, cluster: &mut impl Cluster) {
        let snap = cluster.snapshot();
        let claim_deleting: BTreeSet<&str> = snap
            .node_claims
            .iter()
            .filter(|c| c.deleting)
            .flat_map(|c| c.node_name.iter().chain(c.provider_id.iter()))
            .map(String::as_str)
            .collect();
        let stale: Vec<String> = snap
            .nodes
            .iter()
            .filter(|n| {
                !n.deleting
                    && !claim_deleting.contains(n.name.as_str())
                    && !n
                        .provider_id
                        .as_deref()
                        .is_some_and(|p| claim_deleting.contains(p))
                    && !self.reclaiming.contains(&n.name)
                    && n.taints.iter().any(|t| t.key == DISRUPTED_TAINT)
            })
            .map(|n| n.name.clone())
            .collect();
        for name in stale {
            tracing::info!(node = %name, "removing a disrupted taint no command holds");
            cluster.set_disrupted(&name, false);
        }
    }

    fn abandon(&mut self, cluster: &mut impl Cluster) {
        if let Some(cmd) = self.disruption.command.take() {
            for name in cmd
                .plan
                .actions
                .iter()
                .flat_map(|a| &a.delete)
                .filter(|n| !self.reclaiming.contains(*n))
            {
                cluster.set_disrupted(name, false);
            }
            self.stats.disruptions_abandoned += 1;
        }
        self.disruption.quiet = None;
    }

    /// A command past its deadline: its nodes not yet terminated go back into service, its
    /// replacements that are unused are terminated, and the host says so (a Warning Event and a
    /// metric in the cluster). Unused: never initialized, or initialized with no pod of a workload
    /// on it while no pod waits for capacity. A replacement pods moved to stays, and a later pass
    /// consolidates it if it is not needed.
    fn roll_back(&mut self, cluster: &mut impl Cluster) {
        let Some(cmd) = self.disruption.command.take() else {
            return;
        };
        let left: Vec<String> = cmd
            .plan
            .actions
            .iter()
            .flat_map(|a| &a.delete)
            .filter(|n| !cmd.terminated.contains(*n) && !self.reclaiming.contains(*n))
            .cloned()
            .collect();
        for name in &left {
            cluster.set_disrupted(name, false);
        }
        let in_flight: BTreeSet<String> = cluster
            .in_flight()
            .into_iter()
            .map(|(n, _)| n.to_string())
            .collect();
        let snap = cluster.snapshot();
        let waiting = snap.pending_pods().next().is_some();
        let empty = |node: &str| {
            !snap
                .pods
                .iter()
                .any(|p| p.node_name.as_deref() == Some(node) && p.is_reschedulable())
        };
        let unused: Vec<&String> = cmd
            .replacements
            .iter()
            .filter(|r| in_flight.contains(*r) || !cluster.initialized(r) || (!waiting && empty(r)))
            .collect();
        for name in &unused {
            // one the cloud refuses stays a node in service, its instance on record, and a later
            // pass consolidates it
            self.terminate(cluster, name);
        }
        let why =
            format!(
            "disruption command not finished after {} s ({}); {} unused replacement(s) terminated",
            self.settings.command_timeout,
            if cmd.draining { "draining" } else { "replacements not initialized" },
            unused.len()
        );
        tracing::warn!(nodes = ?left, "{why}");
        cluster.disruption_timed_out(&left, &why);
        self.disruption.quiet = None;
    }

    /// Starts draining once the command is validated and every replacement has registered and
    /// initialized.
    pub(super) fn replacement_ready(&mut self, cluster: &mut impl Cluster, now: f64) {
        let in_flight: Vec<String> = cluster
            .in_flight()
            .into_iter()
            .map(|(n, _)| n.to_string())
            .collect();
        let Some(cmd) = self.disruption.command.as_mut() else {
            return;
        };
        if !cmd.validated || cmd.draining {
            return;
        }
        let waiting: Vec<String> = (cmd.replacements.iter())
            .filter(|r| in_flight.contains(r) || !cluster.initialized(r))
            .cloned()
            .collect();
        if !waiting.is_empty() {
            for claim in waiting {
                cluster.notify(super::report::Notice::DisruptionWaitingReadiness { claim });
            }
            return;
        }
        cmd.draining = true;
        super::report::terminating(cluster, &cmd.plan);
        self.drain_step(cluster, now);
    }

    /// A replacement vanished (interrupted while booting): the command cannot finish.
    pub(super) fn replacement_lost(&mut self, cluster: &mut impl Cluster, name: &str) {
        let lost = self
            .disruption
            .command
            .as_ref()
            .is_some_and(|c| !c.draining && c.replacements.iter().any(|r| r == name));
        if lost {
            self.abandon(cluster);
        }
    }

    /// Evicts what the budgets allow from the command's nodes, in Karpenter's order (critical pods
    /// only once the others are gone); terminates each node once its pods are gone.
    pub fn drain_step(&mut self, cluster: &mut impl Cluster, now: f64) {
        let Some(cmd) = self.disruption.command.as_ref().filter(|c| c.draining) else {
            return;
        };
        if self.leading().is_err() {
            return;
        }
        let nodes: Vec<String> = cmd
            .plan
            .actions
            .iter()
            .flat_map(|a| a.delete.iter().cloned())
            .filter(|n| !cmd.terminated.contains(n))
            .collect();
        let mut waiting = false;
        // the earliest a refused termination is asked for again
        let mut retry: Option<f64> = None;
        for node in &nodes {
            for critical in [false, true] {
                let group: Vec<String> = cluster
                    .snapshot()
                    .pods
                    .iter()
                    .filter(|p| {
                        p.node_name.as_deref() == Some(node)
                            && p.is_reschedulable()
                            && p.is_critical() == critical
                    })
                    .map(|p| p.key())
                    .collect();
                let mut refused = None;
                for pod in &group {
                    match cluster.evict(pod) {
                        Ok(()) => self.stats.evicted += 1,
                        Err(e) => refused = Some(e),
                    }
                }
                if let Some(e) = refused {
                    let (node, error) = (node.clone(), e.to_string());
                    cluster.notify(super::report::Notice::FailedDraining { node, error });
                    waiting = true;
                    break;
                }
            }
            // evictions accepted are not pods gone: their grace periods run before the instance
            // may go
            if !cluster.drained(node) {
                waiting = true;
            } else if let Some(at) = self.terminate_drained(cluster, node, now) {
                retry = Some(retry.map_or(at, |r: f64| r.min(at)));
            }
        }
        let next = match (waiting, retry) {
            (false, None) => {
                self.disruption.command = None;
                self.disruption.quiet = None;
                return;
            }
            (true, None) => now + DRAIN_RETRY_SECONDS,
            (false, Some(at)) => at,
            (true, Some(at)) => at.min(now + DRAIN_RETRY_SECONDS),
        };
        self.wake(next, Wake::DrainStep);
    }

    /// Terminates a drained node of the command, unless the wait after the cloud's last refusal
    /// is still running. None once it is terminated; otherwise when to ask again.
    fn terminate_drained(
        &mut self,
        cluster: &mut impl Cluster,
        node: &str,
        now: f64,
    ) -> Option<f64> {
        let last = (self.disruption.command.as_ref()).and_then(|c| c.refused.get(node).copied());
        if let Some((at, _)) = last.filter(|(at, _)| now < *at) {
            return Some(at);
        }
        let terminated = self.terminate(cluster, node);
        let cmd = self.disruption.command.as_mut()?;
        if terminated {
            cmd.refused.remove(node);
            cmd.terminated.insert(node.to_string());
            return None;
        }
        // a refused node keeps its Node, NodeClaim and finalizer: the instance may still run
        let wait = crate::cloud::terminate_retry_wait(last.map(|(_, w)| w));
        cmd.refused.insert(node.to_string(), (now + wait, wait));
        Some(now + wait)
    }
}

#[cfg(test)]
mod refusals;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::tests::{controller, Fake};
    use crate::disruption::plan::{Action, DisruptionReport};
    use crate::disruption::Reason;
    use crate::domain::{ClusterSnapshot, Labels, Node, Resources, Taint, TaintEffect};

    /// A node carrying the disrupted taint, as a command or a reclaim leaves it.
    pub(super) fn disrupted_node(name: &str) -> Node {
        let mut node = Node::new(
            name,
            Labels::default(),
            Resources::default(),
            Resources::default(),
        );
        node.taints.push(Taint {
            key: DISRUPTED_TAINT.into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
        node
    }

    pub(super) fn deleting(nodes: &[&str]) -> Command {
        let action = Action {
            reason: Reason::Empty,
            delete: nodes.iter().map(|n| n.to_string()).collect(),
            launch: vec![],
            moves: vec![],
            savings_per_hour: 0.1,
            disruption_cost: 0.0,
        };
        let solver = DisruptionReport {
            status: disruption::DisruptionStatus::Optimal,
            strategy: disruption::DisruptionStrategy::Baseline,
            seconds: 0.0,
            candidates: nodes.len(),
            pod_classes: 0,
            variables: 0,
            constraints: 0,
            mip_gap: None,
            notes: vec![],
        };
        let plan = DisruptionPlan {
            actions: vec![action],
            cost_before_per_hour: 0.2,
            cost_after_per_hour: 0.0,
            savings_per_hour: 0.2,
            disruption_cost: 0.0,
            lower_bound: 0.0,
            blocked: vec![],
            budgets: vec![],
            fingerprint: String::new(),
            solver,
        };
        Command {
            plan,
            replacements: vec![],
            validated: false,
            validated_at: None,
            draining: false,
            terminated: BTreeSet::new(),
            refused: BTreeMap::new(),
        }
    }

    #[test]
    fn a_taint_left_by_a_dead_leader_is_removed_but_not_one_a_command_or_a_reclaim_holds() {
        let mut ctl = controller();
        let mut snap = ClusterSnapshot::default();
        for name in ["left-behind", "interrupted", "chosen", "plain"] {
            let mut node = Node::new(
                name,
                Labels::default(),
                Resources::default(),
                Resources::default(),
            );
            if name != "plain" {
                node.taints.push(Taint {
                    key: DISRUPTED_TAINT.into(),
                    value: String::new(),
                    effect: TaintEffect::NoSchedule,
                });
            }
            snap.nodes.push(node.into());
        }
        let mut cluster = Fake::new(snap);
        ctl.adopt("interrupted", "i-1");
        ctl.interruption_warning(&mut cluster, "i-1", 0.0);
        // while a command is under way its own taints are not stale: nothing is touched
        ctl.disruption.command = Some(deleting(&["chosen"]));
        ctl.disruption_tick(&mut cluster, 1.0).unwrap();
        assert_eq!(cluster.1.get("left-behind"), None);
        ctl.disruption.command = None;
        let _ = ctl.disruption_tick(&mut cluster, 2.0);
        assert_eq!(cluster.1.get("left-behind"), Some(&false));
        assert_eq!(
            cluster.1.get("chosen"),
            Some(&false),
            "no command holds it any more"
        );
        assert_eq!(
            cluster.1.get("interrupted"),
            Some(&true),
            "a node being reclaimed keeps its taint"
        );
        assert_eq!(cluster.1.get("plain"), None);
    }

    #[test]
    fn a_node_whose_claim_is_being_deleted_keeps_its_taint_on_a_new_leader() {
        let mut ctl = controller();
        let mut snap = ClusterSnapshot::default();
        for name in ["reclaimed", "left-behind"] {
            let mut node = Node::new(
                name,
                Labels::default(),
                Resources::default(),
                Resources::default(),
            );
            node.provider_id = Some(format!("aws:///us-east-1a/i-{name}"));
            node.taints.push(Taint {
                key: DISRUPTED_TAINT.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
            snap.nodes.push(node.into());
        }
        // the claim an interruption deleted, known only by its instance (not yet registered back)
        let claim = crate::domain::NodeClaim {
            name: "claim-1".into(),
            nodepool: None,
            labels: Labels::default(),
            requirements: vec![],
            node_name: None,
            provider_id: Some("aws:///us-east-1a/i-reclaimed".into()),
            capacity: Resources::default(),
            allocatable: Resources::default(),
            deleting: true,
            created: None,
            initialized: true,
            drifted: false,
            last_pod_event: None,
            expire_after: None,
            nodepool_hash: None,
        };
        snap.node_claims.push(claim);
        let mut cluster = Fake::new(snap);
        let _ = ctl.disruption_tick(&mut cluster, 1.0);
        assert_eq!(cluster.1.get("reclaimed"), None, "its termination owns it");
        assert_eq!(cluster.1.get("left-behind"), Some(&false));
    }

    #[test]
    fn a_command_past_its_deadline_is_rolled_back_and_its_nodes_go_back_into_service() {
        let mut ctl = controller();
        let mut snap = ClusterSnapshot::default();
        for name in ["chosen", "done"] {
            let node = Node::new(
                name,
                Labels::default(),
                Resources::default(),
                Resources::default(),
            );
            snap.nodes.push(node.into());
        }
        let mut cluster = Fake::new(snap);
        let mut cmd = deleting(&["chosen", "done"]);
        cmd.validated = true;
        cmd.validated_at = Some(100.0);
        cmd.draining = true;
        cmd.terminated.insert("done".into());
        ctl.disruption.command = Some(cmd);
        ctl.disruption_tick(&mut cluster, 100.0 + COMMAND_TIMEOUT_SECONDS - 1.0)
            .unwrap();
        assert!(ctl.disruption.command.is_some(), "not yet due");
        assert_eq!(cluster.1.get("chosen"), None);
        ctl.disruption_tick(&mut cluster, 100.0 + COMMAND_TIMEOUT_SECONDS)
            .unwrap();
        assert!(ctl.disruption.command.is_none());
        assert_eq!(cluster.1.get("chosen"), Some(&false), "untainted");
        assert_eq!(cluster.1.get("done"), None, "already terminated");
    }

    #[test]
    fn an_abandoned_command_uncordons_its_nodes_but_not_one_being_reclaimed() {
        let mut ctl = controller();
        let mut snap = ClusterSnapshot::default();
        for name in ["interrupted", "idle"] {
            snap.nodes.push(
                Node::new(
                    name,
                    Labels::default(),
                    Resources::default(),
                    Resources::default(),
                )
                .into(),
            );
        }
        let mut cluster = Fake::new(snap);
        ctl.adopt("interrupted", "i-1");
        ctl.interruption_warning(&mut cluster, "i-1", 0.0);
        assert_eq!(cluster.1.get("interrupted"), Some(&true));
        // an emptiness command chose both nodes, then the cluster got busy and it was dropped
        ctl.disruption.command = Some(deleting(&["interrupted", "idle"]));
        cluster.1.insert("idle".into(), true);
        ctl.abandon(&mut cluster);
        assert_eq!(
            cluster.1.get("idle"),
            Some(&false),
            "a node the command cordoned is given back"
        );
        assert_eq!(
            cluster.1.get("interrupted"),
            Some(&true),
            "the interrupted node stays cordoned until it is reclaimed"
        );
        ctl.terminate(&mut cluster, "interrupted");
        assert!(ctl.reclaiming.is_empty());
    }

    #[test]
    fn a_lapsed_leader_neither_taints_nor_rolls_back_nor_drains() {
        let token = crate::controller::LeaderToken::always();
        let mut ctl = controller().with_leader_token(token.clone());
        let mut snap = ClusterSnapshot::default();
        for name in ["left-behind", "chosen"] {
            snap.nodes.push(disrupted_node(name).into());
        }
        let mut cluster = Fake::new(snap);
        token.revoke();
        // a stale taint stays: clearing it is a write
        assert!(matches!(
            ctl.disruption_tick(&mut cluster, 1.0),
            Err(ControllerError::NotLeader(_))
        ));
        assert_eq!(cluster.1.get("left-behind"), None);
        // a command due for validation taints nothing
        ctl.disruption.command = Some(deleting(&["chosen"]));
        ctl.validate(&mut cluster, 2.0);
        assert_eq!(cluster.1.get("chosen"), None);
        // a draining command evicts and terminates nothing
        let mut cmd = deleting(&["chosen"]);
        cmd.validated = true;
        cmd.validated_at = Some(3.0);
        cmd.draining = true;
        ctl.disruption.command = Some(cmd);
        ctl.drain_step(&mut cluster, 4.0);
        let cmd = ctl.disruption.command.as_ref().expect("kept for the log");
        assert!(cmd.terminated.is_empty());
        // past its deadline it is not rolled back by the deposed replica either
        assert!(ctl
            .disruption_tick(&mut cluster, 3.0 + COMMAND_TIMEOUT_SECONDS)
            .is_err());
        assert!(ctl.disruption.command.is_some());
        assert!(cluster.1.is_empty(), "no write at all: {:?}", cluster.1);
    }
}
