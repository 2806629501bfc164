//! Prometheus metrics of the in-cluster controller, served on `/metrics`: joiner's own `joiner_*`
//! series, and Karpenter's `karpenter_*` series ([`karpenter`]) with its names and labels. joiner's
//! labels take values from fixed sets (phases, solver statuses, reasons, provider methods) except
//! the offering labels of the price estimates, which range over the catalog's offerings: bounded
//! too. Karpenter's node and pod series have one series per node or pod, as Karpenter's do.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::catalog::Catalog;
use crate::controller::{ProvisioningCost, SolveStatus};
use crate::disruption::DisruptionStatus;
use crate::domain::labels::{CAPACITY_TYPE, NODEPOOL};
use crate::domain::Node;
use crate::optimizer::problem::node_price;

mod disruption;
mod gauges;
pub mod interruption;
pub mod karpenter;

use disruption::Savings;
use gauges::GaugeSet;
use karpenter::{Karpenter, Observed, Seen};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub phase: &'static str,
    /// optimal, time-limit, feasible, greedy, fallback-greedy, fallback-baseline, other.
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub method: &'static str,
    /// insufficient-capacity, not-found, provider.
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// certified, busy, other-pods, failed.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    pub nodepool: String,
    pub capacity_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub arch: &'static str,
    pub os: &'static str,
}

type F64Gauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OfferingLabels {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: &'static str,
}

pub struct Metrics {
    pub registry: Registry,
    pub scheduling_duration: Histogram,
    pub solve_duration: Family<PhaseLabels, Histogram>,
    pub solves: Family<StatusLabels, Counter>,
    pub solve_gap: Family<PhaseLabels, Gauge<f64, AtomicU64>>,
    pub pods_pending: Gauge,
    pub nodeclaims_created: Family<ReasonLabels, Counter>,
    pub nodeclaims_terminated: Family<ReasonLabels, Counter>,
    pub disruption_decisions: Family<ReasonLabels, Counter>,
    pub evictions: Family<ReasonLabels, Counter>,
    pub cloud_duration: Family<MethodLabels, Histogram>,
    pub cloud_errors: Family<ErrorLabels, Counter>,
    pub offering_price: Family<OfferingLabels, Gauge<f64, AtomicU64>>,
    pub config_invalid: Gauge,
    pub config_reloads: Family<ReasonLabels, Counter>,
    pub leader: Gauge,
    pub api_errors: Counter,
    pub events_dropped: Counter,
    pub plan_cost: Family<PhaseLabels, F64Gauge>,
    pub plan_objective: Family<PhaseLabels, F64Gauge>,
    pub bound: Family<PhaseLabels, F64Gauge>,
    pub bounds: Family<OutcomeLabels, Counter>,
    pub bound_duration: Histogram,
    pub cluster_cost: GaugeSet<CostLabels>,
    pub savings: Savings,
    pub build_info: Family<BuildLabels, Gauge>,
    /// The series Karpenter's dashboards and alerts read.
    pub karpenter: Karpenter,
    seen: std::sync::Mutex<Seen>,
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        let karpenter = Karpenter::register(root.sub_registry_with_prefix("karpenter"));
        let m = Metrics {
            scheduling_duration: seconds_histogram(),
            solve_duration: Family::new_with_constructor(seconds_histogram),
            solves: Family::default(),
            solve_gap: Family::default(),
            pods_pending: Gauge::default(),
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            disruption_decisions: Family::default(),
            evictions: Family::default(),
            cloud_duration: Family::new_with_constructor(seconds_histogram),
            cloud_errors: Family::default(),
            offering_price: Family::default(),
            config_invalid: Gauge::default(),
            config_reloads: Family::default(),
            leader: Gauge::default(),
            api_errors: Counter::default(),
            events_dropped: crate::k8s::events::dropped(),
            plan_cost: Family::default(),
            plan_objective: Family::default(),
            bound: Family::default(),
            bounds: Family::default(),
            bound_duration: seconds_histogram(),
            cluster_cost: GaugeSet::default(),
            savings: Family::default(),
            build_info: Family::default(),
            karpenter,
            seen: std::sync::Mutex::new(Seen::new()),
            registry: Registry::default(),
        };
        let registry = root.sub_registry_with_prefix("joiner");
        registry.register(
            "scheduler_scheduling_duration_seconds",
            "Duration of a provisioning pass, batch closed to NodeClaims created",
            m.scheduling_duration.clone(),
        );
        registry.register(
            "solver_duration_seconds",
            "Wall-clock duration of each solve",
            m.solve_duration.clone(),
        );
        registry.register(
            "solver_solves",
            "Solves by phase and solver status",
            m.solves.clone(),
        );
        registry.register("solver_gap_ratio", "Relative optimality gap of the last solve: to the certified lower bound for provisioning, HiGHS's MIP gap for disruption (0 when none was computed)", m.solve_gap.clone());
        registry.register(
            "pods_pending",
            "Pods kube-scheduler marked unschedulable and joiner has not placed",
            m.pods_pending.clone(),
        );
        registry.register(
            "nodeclaims_created",
            "NodeClaims created, by reason",
            m.nodeclaims_created.clone(),
        );
        registry.register(
            "nodeclaims_terminated",
            "NodeClaims terminated, by reason",
            m.nodeclaims_terminated.clone(),
        );
        registry.register(
            "disruption_decisions",
            "Disruption commands, by outcome",
            m.disruption_decisions.clone(),
        );
        registry.register(
            "evictions",
            "Eviction API calls, by outcome",
            m.evictions.clone(),
        );
        registry.register(
            "cloudprovider_duration_seconds",
            "Duration of cloud provider calls",
            m.cloud_duration.clone(),
        );
        registry.register(
            "cloudprovider_errors",
            "Cloud provider call errors",
            m.cloud_errors.clone(),
        );
        registry.register(
            "offering_price_estimate",
            "Hourly price of each offering in the catalog, US dollars",
            m.offering_price.clone(),
        );
        registry.register(
            "config_invalid",
            "1 while the cost-weight ConfigMap is invalid and the last good weights are in force",
            m.config_invalid.clone(),
        );
        registry.register(
            "config_reloads",
            "Cost-weight ConfigMap reads, by result",
            m.config_reloads.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            m.leader.clone(),
        );
        registry.register(
            "kubernetes_write_errors",
            "API server writes that failed",
            m.api_errors.clone(),
        );
        registry.register(
            "events_dropped",
            "Kubernetes Events dropped because the publishing queue was full",
            m.events_dropped.clone(),
        );
        m.register_costs(registry);
        register_volume_waits(registry);
        Metrics {
            registry: root,
            ..m
        }
    }

    fn register_costs(&self, r: &mut Registry) {
        r.register(
            "plan_cost_dollars_per_hour",
            "Hourly price of the new nodes of the last plan, US dollars",
            self.plan_cost.clone(),
        );
        r.register(
            "plan_objective_dollars_per_hour",
            "Objective of the last plan: price plus preference penalties, $/h",
            self.plan_objective.clone(),
        );
        r.register(
            "bound_dollars_per_hour",
            "Certified lower bound on the objective of any plan placing the same pods as the last certified plan, $/h",
            self.bound.clone(),
        );
        r.register(
            "provisioning_bounds",
            "Provisioning plans' bounds computed after their launches, by outcome",
            self.bounds.clone(),
        );
        r.register(
            "provisioning_bound_duration_seconds",
            "Wall-clock duration of each provisioning bound",
            self.bound_duration.clone(),
        );
        r.register(
            "cluster_cost_dollars_per_hour",
            "Hourly price of the NodeClaims' offerings, by NodePool and capacity type, US dollars",
            self.cluster_cost.family.clone(),
        );
        r.register(
            "disruption_savings_dollars_per_hour",
            "Hourly price freed by consolidation decisions (nodes removed less replacements), summed over decisions",
            self.savings.clone(),
        );
        r.register(
            "build_info",
            "A metric with a constant 1 value labeled by the version joiner was built from",
            self.build_info.clone(),
        );
        self.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                arch: std::env::consts::ARCH,
                os: std::env::consts::OS,
            })
            .set(1);
    }

    /// Takes in one step's view of the cluster: Karpenter's series and the cluster's cost.
    pub fn observe_cluster(&self, o: &Observed) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        self.karpenter.observe(&mut seen, &self.savings, o);
        let costs = o.snap.node_claims.iter().filter(|c| !c.deleting).map(|c| {
            let get = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
            let node = Node::new(
                &c.name,
                c.labels.clone(),
                Default::default(),
                Default::default(),
            );
            let labels = CostLabels {
                nodepool: c.nodepool.clone().unwrap_or_else(|| get(NODEPOOL)),
                capacity_type: get(CAPACITY_TYPE),
            };
            (labels, node_price(&node, o.catalog))
        });
        self.cluster_cost.replace(costs);
    }

    /// A provisioning plan's cost, or its bound once computed.
    pub fn provisioning_cost(&self, cost: ProvisioningCost) {
        let phase = PhaseLabels {
            phase: "provisioning",
        };
        match cost {
            ProvisioningCost::Planned {
                cost_per_hour,
                objective,
            } => {
                self.plan_cost.get_or_create(&phase).set(cost_per_hour);
                self.plan_objective.get_or_create(&phase).set(objective);
            }
            ProvisioningCost::Certified {
                bound,
                gap,
                seconds,
                ..
            } => {
                self.bound.get_or_create(&phase).set(bound);
                self.solve_gap.get_or_create(&phase).set(gap);
                self.bound_duration.observe(seconds);
                self.bounds
                    .get_or_create(&OutcomeLabels {
                        outcome: "certified",
                    })
                    .inc();
            }
            ProvisioningCost::Uncertified(why) => {
                self.bounds
                    .get_or_create(&OutcomeLabels {
                        outcome: why.as_str(),
                    })
                    .inc();
            }
        }
    }

    /// Publishes the catalog's prices (on start and whenever it is refreshed).
    pub fn set_prices(&self, catalog: &Catalog) {
        for it in &catalog.instance_types {
            for o in &it.offerings {
                let labels = OfferingLabels {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.as_str(),
                };
                self.offering_price.get_or_create(&labels).set(o.price);
            }
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// A solver status as a label value: the disruption statuses `baseline` and `no-candidates` are
/// counted as `other` (docs/metrics.md).
pub fn status_label(status: SolveStatus) -> &'static str {
    match status {
        SolveStatus::Disruption(DisruptionStatus::Baseline | DisruptionStatus::NoCandidates) => {
            "other"
        }
        s => s.as_str(),
    }
}

/// Terminations' waits for VolumeAttachments (`k8s::lifecycle`), measured where they end.
fn register_volume_waits(registry: &mut Registry) {
    let (seconds, cut) = crate::k8s::lifecycle::volume_wait_metrics();
    registry.register(
        "termination_volume_wait_seconds",
        "Seconds a terminating node waited for its VolumeAttachments to go",
        seconds,
    );
    registry.register(
        "termination_volume_waits_cut",
        "Volume waits terminationGracePeriod cut short, the instance terminated with volumes attached",
        cut,
    );
}
