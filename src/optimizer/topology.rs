//! Topology spread, pod affinity and pod anti-affinity, resolved against pod classes: which classes a
//! constraint counts, how many matching pods already run in each domain, and which domains are
//! eligible. Hostname constraints act per node; every other key (zone, capacity type, ...) acts on
//! the value an offering or existing node carries for that key.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::labels::{tolerates_all, HOSTNAME};
use crate::domain::{ClusterSnapshot, LabelSelector, Labels, Pod, PodAffinityTerm, PodConstraints, WhenUnsatisfiable};

use super::problem::{ExistingNode, PodClass, Shape};

/// A spread constraint written on `owner`, counting the classes in `members`.
#[derive(Debug, Clone)]
pub struct SpreadGroup {
    pub owner: usize,
    pub members: Vec<usize>,
    pub key: String,
    pub max_skew: i64,
    pub hard: bool,
    pub min_domains: Option<u32>,
    /// Running pods that match, per domain.
    pub existing: BTreeMap<String, i64>,
    /// Domains the owner could use (non-hostname keys only).
    pub eligible: BTreeSet<String>,
}

impl SpreadGroup {
    pub fn is_host(&self) -> bool {
        self.key == HOSTNAME
    }

    /// Whether the global minimum is forced to zero because too few domains are eligible.
    pub fn min_is_zero(&self) -> bool {
        self.min_domains.is_some_and(|m| (self.eligible.len() as u32) < m)
    }
}

/// A required pod (anti-)affinity term of `owner`.
#[derive(Debug, Clone)]
pub struct AffinityRule {
    pub owner: usize,
    pub members: Vec<usize>,
    pub key: String,
    pub anti: bool,
    /// Domains (hostnames for the hostname key) where matching pods already run, with counts.
    pub running: BTreeMap<String, i64>,
}

impl AffinityRule {
    pub fn is_host(&self) -> bool {
        self.key == HOSTNAME
    }

    pub fn self_selecting(&self) -> bool {
        self.members.contains(&self.owner)
    }
}

/// A preferred pod (anti-)affinity term of `owner`: a penalty in the objective, never a rule a plan
/// must obey (see `super::preferred`).
#[derive(Debug, Clone)]
pub struct PreferredRule {
    pub owner: usize,
    pub members: Vec<usize>,
    pub key: String,
    pub anti: bool,
    /// The term's weight (1-100); the cost weights turn it into $/h per pod.
    pub weight: i32,
    /// Matching running pods per domain (hostnames for the hostname key).
    pub running: BTreeMap<String, i64>,
}

impl PreferredRule {
    pub fn is_host(&self) -> bool {
        self.key == HOSTNAME
    }
}

#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub spreads: Vec<SpreadGroup>,
    pub affinities: Vec<AffinityRule>,
    pub preferred: Vec<PreferredRule>,
    /// Per class: indices into `preferred` of the rules it owns.
    pub preferred_of: Vec<Vec<usize>>,
    /// Per class: indices into `preferred` of the rules that count it.
    pub preferred_counting: Vec<Vec<usize>>,
    /// Per class: (key, domain) pairs where a running pod's required anti-affinity selects the class.
    pub inverse_forbidden: Vec<Vec<(String, String)>>,
}

fn pseudo_pod(c: &PodConstraints) -> Pod {
    stand_in(&c.namespace, &c.labels)
}

/// A pod with only a namespace and labels: all a selector reads.
fn stand_in(namespace: &str, labels: &Labels) -> Pod {
    Pod { namespace: namespace.to_string(), labels: std::sync::Arc::new(labels.clone()), ..Pod::new(String::new(), PodConstraints::default()) }
}

fn spread_selects(ns: &str, sel: &LabelSelector, pod: &Pod) -> bool {
    pod.namespace == ns && sel.matches(&pod.labels)
}

impl Topology {
    /// Label keys whose value some rule compares across nodes (hostname excluded: unique per node).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: BTreeSet<String> = self.spreads.iter().map(|g| g.key.clone()).collect();
        keys.extend(self.affinities.iter().map(|r| r.key.clone()));
        keys.extend(self.preferred.iter().map(|r| r.key.clone()));
        keys.remove(crate::domain::labels::HOSTNAME);
        keys.into_iter().collect()
    }

    pub fn build<'a>(snapshot: &ClusterSnapshot, classes: &'a [PodClass], shapes: &[Shape], existing: &[ExistingNode]) -> Topology {
        let running = Running::gather(snapshot, existing);
        let pseudo: Vec<Pod> = classes.iter().map(|c| pseudo_pod(&c.constraints)).collect();
        let mut t = Topology { inverse_forbidden: vec![Vec::new(); classes.len()], preferred_of: vec![Vec::new(); classes.len()], ..Default::default() };
        type DomainKey<'a> = (&'a [crate::domain::Requirement], &'a crate::domain::NodeSelector, &'a [crate::domain::Toleration], &'a str);
        let mut eligible_memo: BTreeMap<DomainKey<'_>, BTreeSet<String>> = BTreeMap::new();
        // classes of one workload repeat the same selectors: count their members and running pods once
        type SpreadKey<'a> = (&'a str, &'a LabelSelector, &'a str);
        let mut spread_memo: BTreeMap<SpreadKey<'_>, Selected> = BTreeMap::new();
        let mut term_memo: BTreeMap<(&str, &PodAffinityTerm), Selected> = BTreeMap::new();
        for (k, class) in classes.iter().enumerate() {
            let c = &class.constraints;
            for s in &c.spread {
                let (members, counts) = spread_memo
                    .entry((&c.namespace, &s.selector, &s.topology_key))
                    .or_insert_with(|| {
                        let members = (0..classes.len()).filter(|&j| spread_selects(&c.namespace, &s.selector, &pseudo[j])).collect();
                        (members, running.count(&s.topology_key, |p| spread_selects(&c.namespace, &s.selector, p)))
                    })
                    .clone();
                t.spreads.push(SpreadGroup {
                    owner: k,
                    members,
                    key: s.topology_key.clone(),
                    max_skew: i64::from(s.max_skew.max(1)),
                    hard: s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule,
                    min_domains: s.min_domains,
                    existing: counts,
                    eligible: eligible_memo
                        .entry((&c.node_selector, &c.node_affinity, &c.tolerations, &s.topology_key))
                        .or_insert_with(|| eligible_domains(c, &s.topology_key, shapes, existing))
                        .clone(),
                });
            }
            let mut select = |term: &'a PodAffinityTerm| -> Selected {
                term_memo
                    .entry((&c.namespace, term))
                    .or_insert_with(|| {
                        let members = (0..pseudo.len()).filter(|&j| term.selects(&c.namespace, &pseudo[j])).collect();
                        (members, running.count(&term.topology_key, |p| term.selects(&c.namespace, p)))
                    })
                    .clone()
            };
            for (terms, anti) in [(&c.pod_affinity, false), (&c.pod_anti_affinity, true)] {
                for term in terms {
                    let (members, running) = select(term);
                    t.affinities.push(AffinityRule { owner: k, members, key: term.topology_key.clone(), anti, running });
                }
            }
            for (terms, anti) in [(&c.preferred_pod_affinity, false), (&c.preferred_pod_anti_affinity, true)] {
                for w in terms.iter().filter(|w| w.weight > 0) {
                    let term = &w.term;
                    let (members, running) = select(term);
                    t.preferred_of[k].push(t.preferred.len());
                    t.preferred.push(PreferredRule { owner: k, members, key: term.topology_key.clone(), anti, weight: w.weight, running });
                }
            }
            let mut forbidden: BTreeSet<(String, String)> = BTreeSet::new();
            for (p, nodes) in &running.repelling {
                for term in p.constraints.pod_anti_affinity.iter().filter(|term| term.selects(&p.namespace, &pseudo[k])) {
                    forbidden.extend(nodes.iter().filter_map(|l| l.get(&term.topology_key)).map(|d| (term.topology_key.clone(), d.clone())));
                }
            }
            t.inverse_forbidden[k] = forbidden.into_iter().collect();
        }
        t.preferred_counting = vec![Vec::new(); classes.len()];
        for (ri, r) in t.preferred.iter().enumerate() {
            for &m in &r.members {
                t.preferred_counting[m].push(ri);
            }
        }
        t
    }

    /// Indices into `preferred` of the rules class `k` owns (none for a class the topology does not list).
    pub fn owned_preferred(&self, k: usize) -> &[usize] {
        self.preferred_of.get(k).map_or(&[], Vec::as_slice)
    }

    /// The preferred rules class `k` owns or is counted by.
    pub fn preferred_touching(&self, k: usize) -> impl Iterator<Item = &PreferredRule> {
        let (own, counted) = (self.preferred_of.get(k), self.preferred_counting.get(k));
        own.into_iter().chain(counted).flatten().map(|&ri| &self.preferred[ri])
    }

    /// Narrows classes' offerings and nodes to what their affinity to running pods allows.
    pub fn restrict(&self, classes: &mut [PodClass], shapes: &[Shape], existing: &[ExistingNode]) {
        for rule in self.affinities.iter().filter(|r| !r.anti && !r.running.is_empty()) {
            let class = &mut classes[rule.owner];
            class.existing.retain(|&e| existing[e].labels.get(&rule.key).is_some_and(|d| rule.running.contains_key(d)));
            if rule.is_host() {
                class.offerings.clear();
            } else {
                class.offerings.retain(|&(s, o)| {
                    shapes[s].offerings[o].labels.get(&rule.key).is_some_and(|d| rule.running.contains_key(d))
                });
            }
        }
        for (k, forbidden) in self.inverse_forbidden.iter().enumerate() {
            let banned = |labels: &crate::domain::Labels| forbidden.iter().any(|(key, d)| labels.get(key) == Some(d));
            classes[k].existing.retain(|&e| !banned(&existing[e].labels));
            classes[k].offerings.retain(|&(s, o)| !banned(&shapes[s].offerings[o].labels));
        }
        for rule in self.affinities.iter().filter(|r| r.anti) {
            let class = &mut classes[rule.owner];
            class.existing.retain(|&e| existing[e].labels.get(&rule.key).is_none_or(|d| !rule.running.contains_key(d)));
            if !rule.is_host() {
                class.offerings.retain(|&(s, o)| {
                    shapes[s].offerings[o].labels.get(&rule.key).is_none_or(|d| !rule.running.contains_key(d))
                });
            }
        }
    }
}

/// What a selector picks: the classes it counts, and matching running pods per domain.
type Selected = (Vec<usize>, BTreeMap<String, i64>);

/// Pods running on known nodes, grouped so that a selector is tested once per distinct
/// (namespace, labels) rather than once per pod: 40,000 running pods of a few dozen workloads are a
/// few dozen tests per selector.
struct Running<'a> {
    /// A stand-in pod per (namespace, labels), with the labels of the nodes its copies run on.
    groups: Vec<(Pod, Vec<&'a Labels>)>,
    /// Running pods with a required anti-affinity (they can repel a class), with their nodes' labels.
    repelling: Vec<(&'a Pod, Vec<&'a Labels>)>,
}

impl<'a> Running<'a> {
    fn gather(snapshot: &'a ClusterSnapshot, existing: &'a [ExistingNode]) -> Running<'a> {
        let node_labels: BTreeMap<&str, &Labels> = existing.iter().map(|n| (n.name.as_str(), &n.labels)).collect();
        let mut groups: BTreeMap<(&str, &Labels), Vec<&Labels>> = BTreeMap::new();
        type Terms<'t> = (&'t str, &'t [PodAffinityTerm]);
        let mut repelling: BTreeMap<Terms<'_>, (&Pod, Vec<&Labels>)> = BTreeMap::new();
        for p in snapshot.pods.iter().filter(|p| p.occupies_node() && !p.terminating) {
            let Some(labels) = p.node_name.as_deref().and_then(|n| node_labels.get(n)) else { continue };
            groups.entry((&p.namespace, &p.labels)).or_default().push(labels);
            if !p.constraints.pod_anti_affinity.is_empty() {
                repelling.entry((&p.namespace, &p.constraints.pod_anti_affinity)).or_insert_with(|| (p, Vec::new())).1.push(labels);
            }
        }
        let groups = groups
            .into_iter()
            .map(|((ns, labels), nodes)| (stand_in(ns, labels), nodes))
            .collect();
        Running { groups, repelling: repelling.into_values().collect() }
    }

    /// Matching running pods per domain of `key`.
    fn count(&self, key: &str, selects: impl Fn(&Pod) -> bool) -> BTreeMap<String, i64> {
        let mut counts = BTreeMap::new();
        for (_, nodes) in self.groups.iter().filter(|(pod, _)| selects(pod)) {
            for d in nodes.iter().filter_map(|l| l.get(key)) {
                *counts.entry(d.clone()).or_insert(0) += 1;
            }
        }
        counts
    }
}

/// Values of `key` the pod could reach: existing nodes it selects and offerings of NodePools it tolerates.
fn eligible_domains(c: &PodConstraints, key: &str, shapes: &[Shape], existing: &[ExistingNode]) -> BTreeSet<String> {
    if key == HOSTNAME {
        return BTreeSet::new();
    }
    let mut out: BTreeSet<String> =
        existing.iter().filter(|n| c.node_matches(&n.labels)).filter_map(|n| n.labels.get(key).cloned()).collect();
    for s in shapes.iter().filter(|s| tolerates_all(&c.tolerations, &s.taints)) {
        for o in s.offerings.iter().filter(|o| c.node_matches(&o.labels)) {
            if let Some(d) = o.labels.get(key) {
                out.insert(d.clone());
            }
        }
    }
    out
}
