//! The plan's nodes: each new node resolved against the catalog and its NodePool (offering, price,
//! labels, requirements, allocatable, minValues, fallbacks), and each existing placement against
//! the snapshot's nodes.

use std::collections::BTreeSet;

use crate::catalog::{CapacityType, InstanceType, Offering};
use crate::domain::labels::{CAPACITY_TYPE, HOSTNAME, NODEPOOL, ZONE};
use crate::domain::{
    ClusterSnapshot, DaemonSet, Labels, NodeClass, NodePool, Operator, Pod, Quantity, Resources,
    Taint,
};
use crate::optimizer::plan::{ExistingPlacement, NewNode, OfferingRef};

use super::world::{blocking, Host, World};
use super::{FallbackProblem, Violation, PRICE_EPS};

/// Label domains whose keys Karpenter sets itself; a NodePool requirement on any other key with
/// a single `In` value becomes a label of the nodes it launches.
const RESTRICTED_DOMAINS: [&str; 3] = ["kubernetes.io/", "karpenter.sh/", "karpenter.k8s.aws/"];

/// The labels a node of `it` launched from `pool` as an offering in `zone` carries (its hostname
/// aside): the instance type's well-known labels, the NodePool's single-valued requirements on
/// keys of its own, its template labels, then zone, capacity type and NodePool.
pub(super) fn launch_labels(
    it: &InstanceType,
    pool: &NodePool,
    zone: &str,
    capacity_type: CapacityType,
    region: &str,
) -> Labels {
    let mut labels = it.labels(region);
    for r in &pool.requirements {
        let restricted = RESTRICTED_DOMAINS.iter().any(|d| r.key.contains(d));
        if r.operator == Operator::In && r.values.len() == 1 && !restricted {
            labels
                .entry(r.key.clone())
                .or_insert_with(|| r.values[0].clone());
        }
    }
    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels.insert(ZONE.to_string(), zone.to_string());
    labels.insert(
        CAPACITY_TYPE.to_string(),
        capacity_type.as_str().to_string(),
    );
    labels.insert(NODEPOOL.to_string(), pool.name.clone());
    labels
}

/// The DaemonSets whose pod runs on a node with these labels and NodePool taints (Karpenter counts
/// the template's taints, not its start-up taints).
pub(super) fn daemons_for<'a>(
    snapshot: &'a ClusterSnapshot,
    labels: &Labels,
    taints: &[Taint],
) -> Vec<&'a DaemonSet> {
    let taints = blocking(taints.to_vec());
    let tolerated = |ds: &DaemonSet| {
        taints
            .iter()
            .all(|t| ds.pod.tolerations.iter().any(|tol| tol.tolerates(t)))
    };
    snapshot
        .daemonsets
        .iter()
        .filter(|ds| ds.pod.node_matches(labels) && tolerated(ds))
        .collect()
}

fn offering_text(instance_type: &str, zone: &str, capacity_type: CapacityType) -> String {
    format!("{instance_type} {zone} {}", capacity_type.as_str())
}

fn find_offering<'c>(it: &'c InstanceType, zone: &str, ct: CapacityType) -> Option<&'c Offering> {
    it.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
}

/// The NodePool a new node is launched from, with its EC2NodeClass when the snapshot has it.
struct Launch<'a> {
    pool: &'a NodePool,
    class: Option<&'a NodeClass>,
}

impl Launch<'_> {
    fn zone_allowed(&self, zone: &str) -> bool {
        self.class
            .and_then(|c| c.zones.as_ref())
            .is_none_or(|zones| zones.iter().any(|z| z == zone))
    }
}

impl<'a> World<'a> {
    pub fn add_new_node(&mut self, n: &NewNode) {
        if self.index.contains_key(&n.id) {
            self.violations
                .push(Violation::DuplicateNode { node: n.id.clone() });
        }
        let Some(it) = self.resolve_offering(n) else {
            return;
        };
        let Some(launch) = self.resolve_pool(n) else {
            return;
        };
        let mut labels = launch_labels(
            it,
            launch.pool,
            &n.zone,
            n.capacity_type,
            &self.catalog.region,
        );
        labels.insert(HOSTNAME.to_string(), n.id.clone());
        self.check_labels(n, &labels, launch.pool);
        let allocatable = it.node_allocatable(launch.class);
        self.check_allocatable(n, &allocatable);
        let planned = self.planned(&n.pods);
        self.check_min_values(n, &launch, &labels);
        self.check_fallbacks(n, &launch, &planned);
        let daemons = daemons_for(self.snapshot, &labels, &launch.pool.taints);
        self.push(Host {
            name: n.id.clone(),
            labels,
            taints: blocking(launch.pool.taints.clone()),
            allocatable,
            capacity: it.node_capacity(launch.class),
            pool: Some(launch.pool.name.clone()),
            new: true,
            cordoned: false,
            running: Vec::new(),
            planned,
            daemons,
        });
    }

    pub fn bind_existing(&mut self, e: &ExistingPlacement) {
        let planned = self.planned(&e.pods);
        match self.index.get(&e.node) {
            Some(&i) if !self.hosts[i].new => self.hosts[i].planned.extend(planned),
            _ => self.violations.push(Violation::UnknownNode {
                node: e.node.clone(),
            }),
        }
    }

    /// The node's instance type and offering, available and at the catalog's price.
    fn resolve_offering(&mut self, n: &NewNode) -> Option<&'a InstanceType> {
        let node = n.id.clone();
        let catalog = self.catalog;
        let Some(it) = catalog
            .instance_types
            .iter()
            .find(|it| it.name == n.instance_type)
        else {
            self.violations.push(Violation::UnknownInstanceType {
                node,
                instance_type: n.instance_type.clone(),
            });
            return None;
        };
        let offering = offering_text(&n.instance_type, &n.zone, n.capacity_type);
        let Some(o) = find_offering(it, &n.zone, n.capacity_type) else {
            self.violations
                .push(Violation::UnknownOffering { node, offering });
            return None;
        };
        if !o.available {
            self.violations.push(Violation::UnavailableOffering {
                node: node.clone(),
                offering: offering.clone(),
            });
        }
        if (n.price - o.price).abs() > PRICE_EPS {
            self.violations.push(Violation::WrongPrice {
                node,
                offering,
                plan: n.price,
                catalog: o.price,
            });
        }
        Some(it)
    }

    /// The node's NodePool, able to launch nodes in the node's zone.
    fn resolve_pool(&mut self, n: &NewNode) -> Option<Launch<'a>> {
        let snapshot = self.snapshot;
        let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == n.nodepool) else {
            self.violations.push(Violation::UnknownNodePool {
                node: n.id.clone(),
                nodepool: n.nodepool.clone(),
            });
            return None;
        };
        if let Some(class) = snapshot.missing_node_class(pool) {
            self.violations.push(Violation::MissingNodeClass {
                node: n.id.clone(),
                nodepool: pool.name.clone(),
                node_class: class.to_string(),
            });
        }
        let launch = Launch {
            pool,
            class: snapshot.node_class(pool.node_class.as_deref()),
        };
        if !launch.zone_allowed(&n.zone) {
            self.violations.push(Violation::ZoneOutsideNodeClass {
                node: n.id.clone(),
                zone: n.zone.clone(),
                node_class: pool.node_class.clone().unwrap_or_default(),
            });
        }
        Some(launch)
    }

    /// The labels the plan claims agree with the derived ones, which meet the NodePool's
    /// requirements.
    fn check_labels(&mut self, n: &NewNode, labels: &Labels, pool: &NodePool) {
        for (key, value) in &n.labels {
            if let Some(expected) = labels.get(key).filter(|e| *e != value) {
                self.violations.push(Violation::WrongLabel {
                    node: n.id.clone(),
                    key: key.clone(),
                    plan: value.clone(),
                    expected: expected.clone(),
                });
            }
        }
        for r in pool.requirements.iter().filter(|r| !r.matches(labels)) {
            self.violations.push(Violation::NodePoolRequirement {
                node: n.id.clone(),
                nodepool: pool.name.clone(),
                requirement: r.to_string(),
            });
        }
    }

    /// The allocatable the plan reports is no more than the catalog's model gives.
    fn check_allocatable(&mut self, n: &NewNode, model: &Resources) {
        for (resource, text) in &n.allocatable {
            let claimed = Quantity::parse(text).ok();
            if claimed.is_none_or(|q| q > model.get(resource)) {
                self.violations.push(Violation::AllocatableOverstated {
                    node: n.id.clone(),
                    resource: resource.clone(),
                    plan: text.clone(),
                    model: model.get(resource),
                });
            }
        }
    }

    /// Each requirement with minValues sees that many distinct values among the node's offering and
    /// its fallbacks, the instance types Karpenter may choose from.
    fn check_min_values(&mut self, n: &NewNode, launch: &Launch, labels: &Labels) {
        for r in &launch.pool.requirements {
            let Some(min) = r.min_values else { continue };
            let mut values: BTreeSet<String> = BTreeSet::new();
            let fallbacks = n.fallbacks.iter();
            for l in std::iter::once(Some(labels.clone()))
                .chain(fallbacks.map(|f| self.fallback_labels(f, launch.pool)))
                .flatten()
            {
                if let Some(v) = l.get(&r.key).filter(|_| r.matches(&l)) {
                    values.insert(v.clone());
                }
            }
            if values.len() < min as usize {
                self.violations.push(Violation::MinValues {
                    node: n.id.clone(),
                    key: r.key.clone(),
                    min,
                    found: values.len(),
                });
            }
        }
    }

    fn fallback_labels(&self, f: &OfferingRef, pool: &NodePool) -> Option<Labels> {
        let it = self
            .catalog
            .instance_types
            .iter()
            .find(|it| it.name == f.instance_type)?;
        Some(launch_labels(
            it,
            pool,
            &f.zone,
            f.capacity_type,
            &self.catalog.region,
        ))
    }

    /// Every fallback is a catalog offering at its price that the NodePool may launch and that
    /// holds the node's pods.
    fn check_fallbacks(&mut self, n: &NewNode, launch: &Launch, pods: &[&Pod]) {
        for f in &n.fallbacks {
            if let Some(problem) = self.fallback_problem(f, launch, pods) {
                self.violations.push(Violation::Fallback {
                    node: n.id.clone(),
                    offering: offering_text(&f.instance_type, &f.zone, f.capacity_type),
                    problem,
                });
            }
        }
    }

    fn fallback_problem(
        &self,
        f: &OfferingRef,
        launch: &Launch,
        pods: &[&Pod],
    ) -> Option<FallbackProblem> {
        let catalog = self.catalog;
        let found = catalog
            .instance_types
            .iter()
            .find(|it| it.name == f.instance_type)
            .and_then(|it| Some((it, find_offering(it, &f.zone, f.capacity_type)?)));
        let Some((it, o)) = found else {
            return Some(FallbackProblem::NotInCatalog);
        };
        if !o.available {
            return Some(FallbackProblem::Unavailable);
        }
        if (f.price - o.price).abs() > PRICE_EPS {
            return Some(FallbackProblem::Price {
                plan: f.price,
                catalog: o.price,
            });
        }
        if !launch.zone_allowed(&f.zone) {
            return Some(FallbackProblem::ZoneOutsideNodeClass);
        }
        let labels = launch_labels(it, launch.pool, &f.zone, f.capacity_type, &catalog.region);
        if let Some(r) = launch
            .pool
            .requirements
            .iter()
            .find(|r| !r.matches(&labels))
        {
            return Some(FallbackProblem::Requirement(r.to_string()));
        }
        if let Some(p) = pods.iter().find(|p| !p.constraints.node_matches(&labels)) {
            return Some(FallbackProblem::NodeSelector { pod: p.key() });
        }
        let mut used = Resources::new();
        for ds in daemons_for(self.snapshot, &labels, &launch.pool.taints) {
            used.add(&ds.pod.requests);
        }
        for p in pods {
            used.add(p.requests());
        }
        let room = it.node_allocatable(launch.class);
        let short = used.exceeding(&room).next().map(str::to_string);
        short.map(|resource| FallbackProblem::Overcommitted { resource })
    }
}
