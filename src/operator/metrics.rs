//! Prometheus metrics of the in-cluster controller, served on `/metrics`. Every label takes values
//! from a fixed set (phases, solver statuses, reasons, provider methods) except the offering
//! labels of the price estimates, which range over the catalog's offerings: bounded too.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::catalog::Catalog;
use crate::controller::SolveStatus;
use crate::disruption::DisruptionStatus;

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
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("joiner");
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
            registry: Registry::default(),
        };
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
        register_volume_waits(&mut registry);
        Metrics { registry, ..m }
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
