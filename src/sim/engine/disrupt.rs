//! The controller's disruption side in the simulation. Every interval, when the cluster is quiet
//! (nothing booting, no pending pod waiting for capacity) and its inputs changed since the last
//! pass found nothing, the real disruption decision runs. Karpenter also re-runs every five minutes
//! for changes it cannot see; the simulator sees every input, so it does that only when a budget
//! has a schedule.
//! A plan with actions waits the validation delay and is dropped if its fingerprint changed;
//! otherwise its nodes are tainted, replacements launched, and once every replacement has
//! registered the nodes are drained through their PodDisruptionBudgets and terminated.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::{Ev, World};
use crate::disruption::candidates::Candidates;
use crate::disruption::{self, fingerprint, DisruptionPlan, DisruptionSettings};
use crate::sim::SimError;

/// How long a pass that found nothing keeps the cluster "consolidated" if nothing changes.
const CONSOLIDATED_TTL_SECONDS: f64 = 300.0;
/// Retry interval of a drain blocked by a PodDisruptionBudget.
const DRAIN_RETRY_SECONDS: f64 = 5.0;

#[derive(Default)]
pub(in crate::sim) struct State {
    command: Option<Command>,
    /// Signature of the cluster and time of the last pass that found nothing to do.
    quiet: Option<(u64, f64)>,
}

struct Command {
    plan: DisruptionPlan,
    /// Names of the launched replacements once validated; empty while validating.
    replacements: Vec<String>,
    validated: bool,
    draining: bool,
}

impl World<'_> {
    pub(super) fn disruption_tick(&mut self) -> Result<(), SimError> {
        if self.disruption.command.is_some() || self.busy() {
            return Ok(());
        }
        let now = self.now();
        let sig = self.signature();
        // Karpenter re-runs a quiet cluster every five minutes in case something it cannot see
        // changed; the simulation sees everything, so an unchanged signature gives the same answer
        let fresh = |t: f64| !self.scheduled_budgets() || now - t < CONSOLIDATED_TTL_SECONDS;
        if self.disruption.quiet.is_some_and(|(s, t)| s == sig && fresh(t)) {
            return Ok(());
        }
        let plan = self.decide()?;
        tracing::debug!(
            hours = now / 3600.0,
            nodes = self.snap.nodes.len(),
            candidates = plan.solver.candidates,
            actions = plan.actions.len(),
            deleted = plan.deleted_nodes(),
            launched = plan.actions.iter().map(|a| a.launch.len()).sum::<usize>(),
            savings = plan.savings_per_hour,
            blocked = plan.blocked.len(),
            status = %plan.solver.status,
            "disruption pass"
        );
        if plan.actions.is_empty() {
            self.disruption.quiet = Some((sig, now));
            return Ok(());
        }
        self.disruption.command = Some(Command { plan, replacements: vec![], validated: false, draining: false });
        self.at(now + self.sc.timing.validation_delay, Ev::Validate);
        Ok(())
    }

    fn decide(&mut self) -> Result<DisruptionPlan, SimError> {
        let catalog = self.unavailable.mask(&self.sc.catalog, self.now());
        let mut settings = DisruptionSettings::new(self.timestamp());
        settings.strategy = self.strategy.disruption();
        settings.time_limit = Duration::from_secs_f64(self.sc.solver.disruption_time_limit);
        settings.gap = self.sc.solver.gap;
        // nothing reads a pass's bound here; its time goes to the decisions instead
        settings.lower_bound = false;
        let plan = disruption::consolidate(&self.snap, &catalog, &settings).map_err(|e| SimError::Decision(e.to_string()))?;
        self.record_solve(plan.solver.seconds, &plan.solver.status);
        Ok(plan)
    }

    /// Capacity is on its way or being asked for: nodes booting, or pending pods that the last
    /// solve did not give up on. Disruption waits, as a command decided now would race them.
    fn busy(&self) -> bool {
        let now = self.now();
        !self.booting.is_empty() || self.snap.pending_pods().any(|p| self.parked.get(&p.key()).is_none_or(|t| *t <= now))
    }

    /// What a pass depends on: nodes (and whether they are schedulable), where every pod is,
    /// which nodes are eligible (consolidateAfter, expiry, drift, do-not-disrupt all move with the
    /// clock) and which offerings are out of capacity.
    fn signature(&self) -> u64 {
        let mut h = DefaultHasher::new();
        for n in &self.snap.nodes {
            (&n.name, n.unschedulable).hash(&mut h);
        }
        for p in &self.snap.pods {
            (p.key(), &p.node_name).hash(&mut h);
        }
        // availability is hashed on its own: masking would copy the whole catalog every tick
        for c in Candidates::build(&self.snap, &self.sc.catalog, self.timestamp()).nodes {
            (c.name, c.consolidatable, c.expired, c.drift.is_some(), c.block.is_some()).hash(&mut h);
        }
        self.unavailable.keys(self.now()).hash(&mut h);
        h.finish()
    }

    /// Budgets with cron schedules change what a pass may do with nothing else changing: for them
    /// the simulator falls back to Karpenter's five-minute re-run.
    fn scheduled_budgets(&self) -> bool {
        self.snap.nodepools.iter().any(|p| p.disruption.budgets.iter().any(|b| b.schedule.is_some()))
    }

    /// After the validation delay: the plan stands only if its inputs are unchanged.
    pub(super) fn validate(&mut self) -> Result<(), SimError> {
        let Some(cmd) = self.disruption.command.as_ref() else { return Ok(()) };
        let catalog = self.unavailable.mask(&self.sc.catalog, self.now());
        if self.busy() || fingerprint::of(&self.snap, &catalog, &cmd.plan) != cmd.plan.fingerprint {
            self.abandon();
            return Ok(());
        }
        let plan = cmd.plan.clone();
        for name in plan.actions.iter().flat_map(|a| &a.delete) {
            if let Some(n) = self.snap.nodes.iter_mut().find(|n| &n.name == name) {
                n.unschedulable = true;
            }
        }
        let mut launched = Vec::new();
        for node in plan.actions.iter().flat_map(|a| &a.launch) {
            match self.launch(node) {
                Some(name) => launched.push(name),
                None => {
                    // Karpenter drops a command whose replacement cannot launch; what did launch
                    // stays and is consolidated later if it is not needed
                    self.abandon();
                    return Ok(());
                }
            }
        }
        // the replacements' pods are still running on the old nodes: nothing is nominated yet
        for name in &launched {
            self.nominated.retain(|_, n| n != name);
        }
        if let Some(cmd) = self.disruption.command.as_mut() {
            cmd.replacements = launched;
            cmd.validated = true;
        }
        self.counters.executed += 1;
        self.replacement_ready();
        Ok(())
    }

    fn abandon(&mut self) {
        if let Some(cmd) = self.disruption.command.take() {
            for name in cmd.plan.actions.iter().flat_map(|a| &a.delete) {
                if let Some(n) = self.snap.nodes.iter_mut().find(|n| &n.name == name) {
                    n.unschedulable = false;
                }
            }
            self.counters.abandoned += 1;
        }
        self.disruption.quiet = None;
    }

    /// Starts draining once the command is validated and every replacement has registered.
    pub(super) fn replacement_ready(&mut self) {
        let Some(cmd) = self.disruption.command.as_mut() else { return };
        if !cmd.validated || cmd.draining || cmd.replacements.iter().any(|r| self.booting.contains_key(r)) {
            return;
        }
        cmd.draining = true;
        self.drain_step();
    }

    /// A replacement vanished (interrupted while booting): the command cannot finish.
    pub(super) fn replacement_lost(&mut self, name: &str) {
        let lost = self.disruption.command.as_ref().is_some_and(|c| !c.draining && c.replacements.iter().any(|r| r == name));
        if lost {
            self.abandon();
        }
    }

    /// Evicts what the budgets allow from the command's nodes; terminates the nodes left empty.
    pub(super) fn drain_step(&mut self) {
        let Some(cmd) = self.disruption.command.as_ref().filter(|c| c.draining) else { return };
        let nodes: Vec<String> = cmd.plan.actions.iter().flat_map(|a| a.delete.iter().cloned()).collect();
        let mut waiting = false;
        for node in &nodes {
            let pods: Vec<String> = self.snap.pods.iter().filter(|p| p.node_name.as_deref() == Some(node) && p.is_reschedulable()).map(|p| p.key()).collect();
            for pod in &pods {
                if self.eviction_allowed(pod) {
                    self.evict(pod);
                    self.refresh_pdb_status();
                } else {
                    waiting = true;
                }
            }
            let left = self.snap.pods.iter().any(|p| p.node_name.as_deref() == Some(node) && p.is_reschedulable());
            if !left {
                self.terminate(node);
            }
        }
        if waiting {
            self.at(self.now() + DRAIN_RETRY_SECONDS, Ev::DrainStep);
        } else {
            self.disruption.command = None;
            self.disruption.quiet = None;
        }
    }

    /// The Eviction API's check: every PodDisruptionBudget selecting the pod allows one more.
    fn eviction_allowed(&self, key: &str) -> bool {
        let Some(pod) = self.snap.pods.iter().find(|p| p.key() == key) else { return false };
        self.snap
            .pdbs
            .iter()
            .filter(|b| b.namespace == pod.namespace && b.selector.matches(&pod.labels))
            .all(|b| b.disruptions_allowed.unwrap_or(0) > 0)
    }
}
