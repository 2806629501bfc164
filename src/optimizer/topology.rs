//! Topology spread, pod affinity and pod anti-affinity, resolved against pod classes: which classes
//! a constraint counts, how many matching pods already run in each domain, and which domains are
//! eligible. Hostname constraints act per node; every other key (zone, capacity type, ...) acts on
//! the value an offering or existing node carries for that key.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::labels::{tolerates_all, HOSTNAME};
use crate::domain::{
    ClusterSnapshot, LabelSelector, Labels, NodeSelector, Pod, PodAffinityTerm, PodConstraints,
    Requirement, Taint, Toleration, TopologySpread, WhenUnsatisfiable,
};

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
        self.min_domains
            .is_some_and(|m| (self.eligible.len() as u32) < m)
    }
}

/// The nodes a spread group counts, by kube-scheduler's node inclusion policies: pods on other nodes
/// do not count, and their domains are not the group's. The default counts every node.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeFilter {
    /// The owner's nodeSelector and required node affinity, under `nodeAffinityPolicy: Honor`.
    affinity: Option<(Vec<Requirement>, NodeSelector)>,
    /// The owner's tolerations, under `nodeTaintsPolicy: Honor`.
    tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    /// The filter of spread `s` written on a pod with constraints `c`.
    pub fn of(c: &PodConstraints, s: &TopologySpread) -> NodeFilter {
        NodeFilter {
            affinity: s
                .node_affinity_policy
                .honors()
                .then(|| (c.node_selector.clone(), c.node_affinity.clone())),
            tolerations: s.node_taints_policy.honors().then(|| c.tolerations.clone()),
        }
    }

    /// Whether a node with these labels and taints counts.
    pub fn admits(&self, labels: &Labels, taints: &[Taint]) -> bool {
        self.admits_labels(labels) && self.admits_taints(taints)
    }

    fn admits_labels(&self, labels: &Labels) -> bool {
        self.affinity.as_ref().is_none_or(|(selector, affinity)| {
            selector.iter().all(|r| r.matches(labels)) && affinity.matches(labels)
        })
    }

    fn admits_taints(&self, taints: &[Taint]) -> bool {
        self.tolerations
            .as_ref()
            .is_none_or(|t| tolerates_all(t, taints))
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

/// Running pods' preferred anti-affinity toward the classes in `members`. kube-scheduler weighs
/// such a term both ways: a new pod it selects, placed in the running pod's domain, makes the
/// running pod miss it. Only running pods that meet their term now count (one that already shares
/// its domain with a pod it selects loses nothing more).
#[derive(Debug, Clone)]
pub struct Shunning {
    pub members: Vec<usize>,
    pub key: String,
    /// Per domain (hostname for the hostname key), the summed weight of the running pods there
    /// whose term a member pod placed in that domain would break.
    pub weight: BTreeMap<String, i64>,
}

impl Shunning {
    pub fn is_host(&self) -> bool {
        self.key == HOSTNAME
    }
}

#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub spreads: Vec<SpreadGroup>,
    /// Per spread group (same index), the nodes it counts; a group past its end (a relaxation's
    /// caps) counts every node.
    pub spread_filters: Vec<NodeFilter>,
    pub affinities: Vec<AffinityRule>,
    pub preferred: Vec<PreferredRule>,
    /// Per class: indices into `preferred` of the rules it owns.
    pub preferred_of: Vec<Vec<usize>>,
    /// Per class: indices into `preferred` of the rules that count it.
    pub preferred_counting: Vec<Vec<usize>>,
    /// Per class: (key, domain) pairs where a running pod's required anti-affinity selects the
    /// class.
    pub inverse_forbidden: Vec<Vec<(String, String)>>,
    /// Running pods' preferred anti-affinity toward classes.
    pub shunned: Vec<Shunning>,
    /// Least pod counts per domain; only the bound's relaxation has them (`milp::floors`).
    pub floors: Vec<Floor>,
}

/// At least `least[domain]` pods of the classes in `members` go to each domain of `key`: what a
/// hard spread implies for every domain once its pod count is known. Only a relaxation carries
/// these; nothing builds them from a snapshot.
#[derive(Debug, Clone)]
pub struct Floor {
    pub key: String,
    /// Classes counted, ascending.
    pub members: Vec<usize>,
    pub least: BTreeMap<String, u32>,
}

fn pseudo_pod(c: &PodConstraints) -> Pod {
    stand_in(&c.namespace, &c.labels)
}

/// A pod with only a namespace and labels: all a selector reads.
fn stand_in(namespace: &str, labels: &Labels) -> Pod {
    Pod {
        namespace: namespace.to_string(),
        labels: std::sync::Arc::new(labels.clone()),
        ..Pod::new(String::new(), PodConstraints::default())
    }
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
        keys.extend(self.shunned.iter().map(|r| r.key.clone()));
        keys.extend(self.floors.iter().map(|f| f.key.clone()));
        keys.remove(crate::domain::labels::HOSTNAME);
        keys.into_iter().collect()
    }

    pub fn build<'a>(
        snapshot: &ClusterSnapshot,
        classes: &'a [PodClass],
        shapes: &[Shape],
        existing: &[ExistingNode],
    ) -> Topology {
        let running = Running::gather(snapshot, existing);
        let pseudo: Vec<Pod> = classes.iter().map(|c| pseudo_pod(&c.constraints)).collect();
        let mut t = Topology {
            inverse_forbidden: vec![Vec::new(); classes.len()],
            preferred_of: vec![Vec::new(); classes.len()],
            ..Default::default()
        };
        let mut eligible_memo: BTreeMap<(NodeFilter, &str), BTreeSet<String>> = BTreeMap::new();
        // classes of one workload repeat the same selectors: count their members and running pods
        // once
        type SpreadKey<'a> = (&'a str, &'a LabelSelector, &'a str, NodeFilter);
        let mut spread_memo: BTreeMap<SpreadKey<'_>, Selected> = BTreeMap::new();
        let mut term_memo: BTreeMap<(&str, &PodAffinityTerm), Selected> = BTreeMap::new();
        for (k, class) in classes.iter().enumerate() {
            let c = &class.constraints;
            for s in &c.spread {
                let filter = NodeFilter::of(c, s);
                let (members, counts) = spread_memo
                    .entry((&c.namespace, &s.selector, &s.topology_key, filter.clone()))
                    .or_insert_with(|| {
                        let members = (0..classes.len())
                            .filter(|&j| spread_selects(&c.namespace, &s.selector, &pseudo[j]))
                            .collect();
                        let counts = running.count_on(
                            &s.topology_key,
                            |p| spread_selects(&c.namespace, &s.selector, p),
                            |n| filter.admits(&n.labels, &n.taints),
                        );
                        (members, counts)
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
                        .entry((filter.clone(), &s.topology_key))
                        .or_insert_with(|| {
                            eligible_domains(&filter, &s.topology_key, shapes, existing)
                        })
                        .clone(),
                });
                t.spread_filters.push(filter);
            }
            let mut select = |term: &'a PodAffinityTerm| -> Selected {
                term_memo
                    .entry((&c.namespace, term))
                    .or_insert_with(|| {
                        let members = (0..pseudo.len())
                            .filter(|&j| term.selects(&c.namespace, &pseudo[j]))
                            .collect();
                        (
                            members,
                            running.count(&term.topology_key, |p| term.selects(&c.namespace, p)),
                        )
                    })
                    .clone()
            };
            for (terms, anti) in [(&c.pod_affinity, false), (&c.pod_anti_affinity, true)] {
                for term in terms {
                    let (members, running) = select(term);
                    t.affinities.push(AffinityRule {
                        owner: k,
                        members,
                        key: term.topology_key.clone(),
                        anti,
                        running,
                    });
                }
            }
            for (terms, anti) in [
                (&c.preferred_pod_affinity, false),
                (&c.preferred_pod_anti_affinity, true),
            ] {
                for w in terms.iter().filter(|w| w.weight > 0) {
                    let term = &w.term;
                    let (members, running) = select(term);
                    t.preferred_of[k].push(t.preferred.len());
                    t.preferred.push(PreferredRule {
                        owner: k,
                        members,
                        key: term.topology_key.clone(),
                        anti,
                        weight: w.weight,
                        running,
                    });
                }
            }
            let mut forbidden: BTreeSet<(String, String)> = BTreeSet::new();
            for (p, nodes) in &running.repelling {
                for term in p
                    .constraints
                    .pod_anti_affinity
                    .iter()
                    .filter(|term| term.selects(&p.namespace, &pseudo[k]))
                {
                    forbidden.extend(
                        nodes
                            .iter()
                            .filter_map(|l| l.get(&term.topology_key))
                            .map(|d| (term.topology_key.clone(), d.clone())),
                    );
                }
            }
            t.inverse_forbidden[k] = forbidden.into_iter().collect();
        }
        t.shunned = shunning(&running, &pseudo);
        t.preferred_counting = vec![Vec::new(); classes.len()];
        for (ri, r) in t.preferred.iter().enumerate() {
            for &m in &r.members {
                t.preferred_counting[m].push(ri);
            }
        }
        t
    }

    /// Whether spread group `gi` counts a pod placed on a node with these labels and taints.
    pub fn spread_counts_node(&self, gi: usize, labels: &Labels, taints: &[Taint]) -> bool {
        self.spread_filters
            .get(gi)
            .is_none_or(|f| f.admits(labels, taints))
    }

    /// Indices into `preferred` of the rules class `k` owns (none for a class the topology does not
    /// list).
    pub fn owned_preferred(&self, k: usize) -> &[usize] {
        self.preferred_of.get(k).map_or(&[], Vec::as_slice)
    }

    /// Whether any preferred pod term, a class's own or a running pod's, prices plans.
    pub fn has_preferred(&self) -> bool {
        !self.preferred.is_empty() || !self.shunned.is_empty()
    }

    /// Keys of the running pods' terms that select class `k`, other than the hostname.
    pub fn shunned_zone_keys(&self, k: usize) -> impl Iterator<Item = &String> {
        self.shunned
            .iter()
            .filter(move |s| !s.is_host() && s.members.binary_search(&k).is_ok())
            .map(|s| &s.key)
    }

    /// The preferred rules class `k` owns or is counted by.
    pub fn preferred_touching(&self, k: usize) -> impl Iterator<Item = &PreferredRule> {
        let (own, counted) = (self.preferred_of.get(k), self.preferred_counting.get(k));
        own.into_iter()
            .chain(counted)
            .flatten()
            .map(|&ri| &self.preferred[ri])
    }

    /// Narrows classes' offerings and nodes to what their affinity to running pods allows.
    pub fn restrict(&self, classes: &mut [PodClass], shapes: &[Shape], existing: &[ExistingNode]) {
        for rule in self
            .affinities
            .iter()
            .filter(|r| !r.anti && !r.running.is_empty())
        {
            let class = &mut classes[rule.owner];
            class.existing.retain(|&e| {
                existing[e]
                    .labels
                    .get(&rule.key)
                    .is_some_and(|d| rule.running.contains_key(d))
            });
            if rule.is_host() {
                class.offerings.clear();
            } else {
                class.offerings.retain(|&(s, o)| {
                    shapes[s].offerings[o]
                        .labels
                        .get(&rule.key)
                        .is_some_and(|d| rule.running.contains_key(d))
                });
            }
        }
        for (k, forbidden) in self.inverse_forbidden.iter().enumerate() {
            let banned = |labels: &crate::domain::Labels| {
                forbidden.iter().any(|(key, d)| labels.get(key) == Some(d))
            };
            classes[k]
                .existing
                .retain(|&e| !banned(&existing[e].labels));
            classes[k]
                .offerings
                .retain(|&(s, o)| !banned(&shapes[s].offerings[o].labels));
        }
        for rule in self.affinities.iter().filter(|r| r.anti) {
            let class = &mut classes[rule.owner];
            class.existing.retain(|&e| {
                existing[e]
                    .labels
                    .get(&rule.key)
                    .is_none_or(|d| !rule.running.contains_key(d))
            });
            if !rule.is_host() {
                class.offerings.retain(|&(s, o)| {
                    shapes[s].offerings[o]
                        .labels
                        .get(&rule.key)
                        .is_none_or(|d| !rule.running.contains_key(d))
                });
            }
        }
    }
}

/// The running pods' preferred anti-affinity terms that select some class and are met now.
fn shunning(running: &Running<'_>, pseudo: &[Pod]) -> Vec<Shunning> {
    let mut out = Vec::new();
    for (pod, nodes) in &running.shunning {
        for w in pod
            .constraints
            .preferred_pod_anti_affinity
            .iter()
            .filter(|w| w.weight > 0)
        {
            let term = &w.term;
            let members: Vec<usize> = (0..pseudo.len())
                .filter(|&j| term.selects(&pod.namespace, &pseudo[j]))
                .collect();
            if members.is_empty() {
                continue;
            }
            let matching = running.count(&term.topology_key, |q| term.selects(&pod.namespace, q));
            let own = i64::from(term.selects(&pod.namespace, pod));
            let mut weight: BTreeMap<String, i64> = BTreeMap::new();
            for d in nodes.iter().filter_map(|l| l.get(&term.topology_key)) {
                if matching.get(d).copied().unwrap_or(0) - own <= 0 {
                    *weight.entry(d.clone()).or_insert(0) += i64::from(w.weight);
                }
            }
            if !weight.is_empty() {
                out.push(Shunning {
                    members,
                    key: term.topology_key.clone(),
                    weight,
                });
            }
        }
    }
    out
}

/// What a selector picks: the classes it counts, and matching running pods per domain.
type Selected = (Vec<usize>, BTreeMap<String, i64>);

/// Pods running on known nodes, grouped so that a selector is tested once per distinct
/// (namespace, labels) rather than once per pod: 40,000 running pods of a few dozen workloads are a
/// few dozen tests per selector.
struct Running<'a> {
    /// A stand-in pod per (namespace, labels), with the nodes its copies run on.
    groups: Vec<(Pod, Vec<&'a ExistingNode>)>,
    /// Running pods with a required anti-affinity (they can repel a class), with their nodes'
    /// labels.
    repelling: Vec<(&'a Pod, Vec<&'a Labels>)>,
    /// Running pods with a preferred anti-affinity, one per (namespace, labels, terms), with the
    /// labels of each copy's node.
    shunning: Vec<(&'a Pod, Vec<&'a Labels>)>,
}

impl<'a> Running<'a> {
    fn gather(snapshot: &'a ClusterSnapshot, existing: &'a [ExistingNode]) -> Running<'a> {
        let nodes: BTreeMap<&str, &ExistingNode> =
            existing.iter().map(|n| (n.name.as_str(), n)).collect();
        let mut groups: BTreeMap<(&str, &Labels), Vec<&ExistingNode>> = BTreeMap::new();
        type Terms<'t> = (&'t str, &'t [PodAffinityTerm]);
        let mut repelling: BTreeMap<Terms<'_>, (&Pod, Vec<&Labels>)> = BTreeMap::new();
        type Soft<'t> = (
            &'t str,
            &'t Labels,
            &'t [crate::domain::Weighted<PodAffinityTerm>],
        );
        let mut shunning: BTreeMap<Soft<'_>, (&Pod, Vec<&Labels>)> = BTreeMap::new();
        for p in snapshot
            .pods
            .iter()
            .filter(|p| p.occupies_node() && !p.terminating)
        {
            let Some(&node) = p.node_name.as_deref().and_then(|n| nodes.get(n)) else {
                continue;
            };
            let labels = &node.labels;
            groups
                .entry((&p.namespace, &p.labels))
                .or_default()
                .push(node);
            if !p.constraints.pod_anti_affinity.is_empty() {
                repelling
                    .entry((&p.namespace, &p.constraints.pod_anti_affinity))
                    .or_insert_with(|| (p, Vec::new()))
                    .1
                    .push(labels);
            }
            if !p.constraints.preferred_pod_anti_affinity.is_empty() {
                // whether a copy meets its term depends on its own labels: they are part of the key
                shunning
                    .entry((
                        &p.namespace,
                        &p.labels,
                        &p.constraints.preferred_pod_anti_affinity,
                    ))
                    .or_insert_with(|| (p, Vec::new()))
                    .1
                    .push(labels);
            }
        }
        let groups = groups
            .into_iter()
            .map(|((ns, labels), nodes)| (stand_in(ns, labels), nodes))
            .collect();
        Running {
            groups,
            repelling: repelling.into_values().collect(),
            shunning: shunning.into_values().collect(),
        }
    }

    /// Matching running pods per domain of `key`.
    fn count(&self, key: &str, selects: impl Fn(&Pod) -> bool) -> BTreeMap<String, i64> {
        self.count_on(key, selects, |_| true)
    }

    /// Matching running pods per domain of `key`, on the nodes `admits` accepts.
    fn count_on(
        &self,
        key: &str,
        selects: impl Fn(&Pod) -> bool,
        admits: impl Fn(&ExistingNode) -> bool,
    ) -> BTreeMap<String, i64> {
        let mut counts = BTreeMap::new();
        for (_, nodes) in self.groups.iter().filter(|(pod, _)| selects(pod)) {
            for n in nodes.iter().filter(|n| admits(n)) {
                if let Some(d) = n.labels.get(key) {
                    *counts.entry(d.clone()).or_insert(0) += 1;
                }
            }
        }
        counts
    }
}

/// A spread's domains of `key`: the values on existing nodes and on offerings its filter admits
/// (Karpenter spreads into the domains NodePools can launch in, as if they had a node each).
fn eligible_domains(
    filter: &NodeFilter,
    key: &str,
    shapes: &[Shape],
    existing: &[ExistingNode],
) -> BTreeSet<String> {
    if key == HOSTNAME {
        return BTreeSet::new();
    }
    let mut out: BTreeSet<String> = existing
        .iter()
        .filter(|n| filter.admits(&n.labels, &n.taints))
        .filter_map(|n| n.labels.get(key).cloned())
        .collect();
    for s in shapes.iter().filter(|s| filter.admits_taints(&s.taints)) {
        for o in s
            .offerings
            .iter()
            .filter(|o| filter.admits_labels(&o.labels))
        {
            if let Some(d) = o.labels.get(key) {
                out.insert(d.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::domain::labels::ZONE;
    use crate::optimizer::problem::Problem;

    const SCENARIO: &str =
        include_str!("../../fixtures/scenarios/running-pod-prefers-another-zone.yaml");
    const CATALOG: &str = include_str!("../../fixtures/catalogs/test-f0.json");

    fn problem(extra: &str) -> Problem {
        let snapshot = crate::snapshot::parse_snapshot(&format!("{SCENARIO}{extra}"), "test")
            .expect("scenario parses");
        Problem::build(
            &snapshot,
            &crate::catalog::Catalog::from_json(CATALOG, "test-f0").expect("catalog parses"),
        )
    }

    /// A running web pod beside cache-0: cache-0 already misses its term, so another web pod there
    /// costs it nothing more.
    const WEB_RUNNING: &str = "---
apiVersion: v1
kind: Pod
metadata: {name: web-old, namespace: default, labels: {app: web}}
spec:
  nodeName: ip-10-0-1-20.test
  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
  containers: [{name: app, image: app, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
status: {phase: Running}
";

    #[test]
    fn a_running_pods_met_preferred_anti_affinity_shuns_the_classes_it_selects() {
        let p = problem("");
        let web = p
            .classes
            .iter()
            .position(|c| c.pods.iter().any(|n| n == "default/web-0"))
            .expect("web class");
        assert_eq!(p.topology.shunned.len(), 1, "{:?}", p.topology.shunned);
        let s = &p.topology.shunned[0];
        assert_eq!(
            (s.key.as_str(), s.members.as_slice()),
            (ZONE, [web].as_slice())
        );
        assert_eq!(s.weight, [("test-zone-1".to_string(), 50)].into());
        assert!(p.topology.has_preferred() && p.topology.keys().contains(&ZONE.to_string()));
    }

    /// A problem from `fixtures/topology-policies/<text>` with `policy` added to each pending
    /// pod's spread.
    fn with_policy(text: &str, policy: &str) -> Problem {
        const SPREAD: &str = "labelSelector: {matchLabels: {app: web}}}";
        let changed = text.replace(
            SPREAD,
            &format!("labelSelector: {{matchLabels: {{app: web}}}}, {policy}}}"),
        );
        let snapshot = crate::snapshot::parse_snapshot(&changed, "test").expect("scenario parses");
        Problem::build(
            &snapshot,
            &crate::catalog::Catalog::from_json(CATALOG, "test-f0").expect("catalog parses"),
        )
    }

    /// The web spread's running counts and domains.
    fn web_spread(p: &Problem) -> (Vec<(&str, i64)>, Vec<&str>) {
        assert_eq!(p.topology.spreads.len(), 1, "{:?}", p.topology.spreads);
        let g = &p.topology.spreads[0];
        (
            g.existing.iter().map(|(d, &n)| (d.as_str(), n)).collect(),
            g.eligible.iter().map(String::as_str).collect(),
        )
    }

    const TAINTED: &str = include_str!("../../fixtures/topology-policies/tainted-domain.yaml");
    const POOL_SELECTOR: &str =
        include_str!("../../fixtures/topology-policies/affinity-pool-selector.yaml");
    const ZONE_SELECTOR: &str =
        include_str!("../../fixtures/topology-policies/affinity-zone-selector.yaml");

    #[test]
    fn ignored_taints_count_a_tainted_node_and_the_tainted_pools_zone() {
        let p = with_policy(TAINTED, "nodeTaintsPolicy: Ignore");
        let all = vec!["test-zone-1", "test-zone-2", "test-zone-3"];
        assert_eq!(web_spread(&p), (vec![("test-zone-3", 1)], all));
    }

    #[test]
    fn honoured_taints_leave_out_a_tainted_node_and_the_tainted_pools_zone() {
        let p = with_policy(TAINTED, "nodeTaintsPolicy: Honor");
        assert_eq!(web_spread(&p), (vec![], vec!["test-zone-1", "test-zone-2"]));
    }

    #[test]
    fn honoured_affinity_does_not_count_a_node_the_pods_selector_rejects() {
        let p = with_policy(POOL_SELECTOR, "nodeAffinityPolicy: Honor");
        let all = vec!["test-zone-1", "test-zone-2", "test-zone-3"];
        assert_eq!(web_spread(&p), (vec![], all.clone()));
        let p = with_policy(POOL_SELECTOR, "nodeAffinityPolicy: Ignore");
        assert_eq!(web_spread(&p), (vec![("test-zone-1", 2)], all));
    }

    #[test]
    fn ignored_affinity_makes_a_zone_the_pod_cannot_reach_a_domain() {
        let p = with_policy(ZONE_SELECTOR, "nodeAffinityPolicy: Honor");
        assert_eq!(web_spread(&p), (vec![], vec!["test-zone-1", "test-zone-2"]));
        let p = with_policy(ZONE_SELECTOR, "nodeAffinityPolicy: Ignore");
        let all = vec!["test-zone-1", "test-zone-2", "test-zone-3"];
        assert_eq!(web_spread(&p), (vec![("test-zone-3", 1)], all));
    }

    #[test]
    fn a_running_pod_that_already_misses_its_term_shuns_nothing() {
        let p = problem(WEB_RUNNING);
        assert!(p.topology.shunned.is_empty(), "{:?}", p.topology.shunned);
    }
}
