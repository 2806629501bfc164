//! Problems the optimizer's unit tests share, built from domain types.

use std::sync::Arc;

use crate::catalog::{Arch, CapacityType, Catalog, InstanceType, Offering};
use crate::domain::labels::{HOSTNAME, ZONE};
use crate::domain::{
    ClusterSnapshot, LabelSelector, NodePool, Pod, PodConstraints, Quantity, Resources,
    TopologySpread, WhenUnsatisfiable,
};

use super::problem::Problem;

/// `pods` pods (1500m, 256Mi) of one Deployment spread over zones z1 and z2 (maxSkew 1,
/// DoNotSchedule), and one on-demand type at 0.1 in both zones that holds two of them.
pub(crate) fn zone_spread(pods: usize) -> Problem {
    zone_spread_priced(pods, &[("z1", 0.1), ("z2", 0.1)])
}

/// [`zone_spread`] over the zones and prices given.
pub(crate) fn zone_spread_priced(pods: usize, zones: &[(&str, f64)]) -> Problem {
    let mut it = InstanceType::new("two.large", 4, 8192, Arch::Amd64);
    it.max_pods = Some(20);
    for &(zone, price) in zones {
        it.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: CapacityType::OnDemand,
            price,
            available: true,
            price_estimated: false,
            interruption_band: None,
        });
    }
    let catalog = Catalog {
        region: "test".into(),
        instance_types: vec![it],
        provenance: None,
    };
    let pods = (0..pods)
        .map(|i| {
            spread_pod(
                "web",
                (format!("web-{i}"), format!("uid-{i}")),
                (1500, 256),
                ZONE,
            )
        })
        .collect();
    let snapshot = ClusterSnapshot {
        pods,
        nodepools: vec![NodePool::unconstrained("default")],
        ..Default::default()
    };
    Problem::build(&snapshot, &catalog)
}

/// One small on-demand type (2 vCPU, 2 GiB, at most 6 pods) in one zone: nodes of a few pods, where
/// the pricers' answers can be checked exhaustively.
pub(crate) fn tiny_catalog() -> Catalog {
    let mut it = InstanceType::new("tiny.large", 2, 2048, Arch::Amd64);
    it.max_pods = Some(6);
    it.offerings.push(Offering {
        zone: "z1".into(),
        capacity_type: CapacityType::OnDemand,
        price: 0.05,
        available: true,
        price_estimated: false,
        interruption_band: None,
    });
    Catalog {
        region: "test".into(),
        instance_types: vec![it],
        provenance: None,
    }
}

/// The 8 vCPU, 32 GiB type of [`two_zone_catalog`] at 0.3 in zones z1 and z2 and at 0.9 in z3.
pub(crate) fn dear_zone_catalog() -> Catalog {
    let mut c = two_zone_catalog();
    let it = &mut c.instance_types[0];
    it.offerings.push(Offering {
        zone: "z3".into(),
        capacity_type: CapacityType::OnDemand,
        price: 0.9,
        available: true,
        price_estimated: false,
        interruption_band: None,
    });
    c
}

/// One 8 vCPU, 32 GiB on-demand type at 0.3 in zones z1 and z2: every pod of the diverse mix fits,
/// and neither zone is cheaper.
pub(crate) fn two_zone_catalog() -> Catalog {
    let mut it = InstanceType::new("eight.xlarge", 8, 32768, Arch::Amd64);
    it.max_pods = Some(58);
    for zone in ["z1", "z2"] {
        it.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: CapacityType::OnDemand,
            price: 0.3,
            available: true,
            price_estimated: false,
            interruption_band: None,
        });
    }
    Catalog {
        region: "test".into(),
        instance_types: vec![it],
        provenance: None,
    }
}

/// Pods of Deployments that each spread one per node (hostname, maxSkew 1, DoNotSchedule): per
/// entry `(app, cpu milli, pods)` with 1 GiB each, an app's entries sharing its spread, on
/// [`two_zone_catalog`].
pub(crate) fn host_spread_deployments(pods: &[(&str, i64, usize)]) -> Problem {
    let pods = pods
        .iter()
        .flat_map(|&(app, cpu, n)| (0..n).map(move |i| (app, cpu, format!("{app}-{cpu}m-{i}"))))
        .map(|(app, cpu, name)| {
            spread_pod(
                app,
                (name.clone(), format!("uid-{name}")),
                (cpu, 1024),
                HOSTNAME,
            )
        })
        .collect();
    let snapshot = ClusterSnapshot {
        pods,
        nodepools: vec![NodePool::unconstrained("default")],
        ..Default::default()
    };
    Problem::build(&snapshot, &two_zone_catalog())
}

/// A pod of Deployment `app` (label `app`, owned by its ReplicaSet) named and with the uid given,
/// requesting `(cpu milli, memory MiB)`, spread over `key` with maxSkew 1 (DoNotSchedule).
fn spread_pod(
    app: &str,
    (name, uid): (String, String),
    (cpu, mib): (i64, i64),
    key: &str,
) -> Arc<Pod> {
    let labels: crate::domain::Labels = [("app".to_string(), app.to_string())].into();
    let selector = LabelSelector {
        match_labels: labels.clone(),
        match_expressions: vec![],
    };
    let requests = Resources::new()
        .with("cpu", Quantity::from_milli(cpu))
        .with("memory", Quantity::from_mib(mib))
        .with("pods", Quantity::from_units(1));
    let spread = TopologySpread {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        selector,
        min_domains: None,
        node_affinity_policy: crate::domain::NodeInclusionPolicy::affinity_default(),
        node_taints_policy: crate::domain::NodeInclusionPolicy::taints_default(),
    };
    let c = PodConstraints {
        namespace: "default".into(),
        labels: labels.clone(),
        requests,
        spread: vec![spread],
        ..Default::default()
    };
    Arc::new(Pod {
        namespace: "default".into(),
        uid,
        labels: Arc::new(labels),
        ..Pod::new(name, c).owned_by("ReplicaSet", app)
    })
}
