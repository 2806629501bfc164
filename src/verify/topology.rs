//! The rules between pods, checked on the cluster as the plan leaves it: topology spread with
//! `whenUnsatisfiable: DoNotSchedule`, required pod affinity and required pod anti-affinity, on any
//! topology key. Running pods count; terminating ones do not (Karpenter ignores them for topology).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::catalog::Catalog;
use crate::domain::labels::HOSTNAME;
use crate::domain::{
    ClusterSnapshot, Labels, Pod, PodAffinityTerm, PodConstraints, TopologySpread,
    WhenUnsatisfiable,
};

use super::nodes::launch_labels;
use super::world::Host;
use super::Violation;

/// A pod on a node: running there, or put there by the plan.
struct Placed<'a> {
    pod: &'a Pod,
    host: usize,
    planned: bool,
}

struct Cluster<'a, 'h> {
    hosts: &'h [Host<'a>],
    placed: Vec<Placed<'a>>,
    snapshot: &'a ClusterSnapshot,
    catalog: &'a Catalog,
    /// Labels of every offering some NodePool may launch, with the NodePool's index; built when a
    /// spread first needs the domains no node is in yet.
    launchable: Option<Vec<(usize, Labels)>>,
}

pub(super) fn check<'a>(
    hosts: &[Host<'a>],
    snapshot: &'a ClusterSnapshot,
    catalog: &'a Catalog,
) -> Vec<Violation> {
    let mut placed = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        for p in h.running.iter().filter(|p| !p.terminating) {
            placed.push(Placed {
                pod: p,
                host: i,
                planned: false,
            });
        }
        for p in &h.planned {
            placed.push(Placed {
                pod: p,
                host: i,
                planned: true,
            });
        }
    }
    let mut cluster = Cluster {
        hosts,
        placed,
        snapshot,
        catalog,
        launchable: None,
    };
    let mut out = cluster.spreads();
    out.extend(cluster.affinities());
    out.extend(cluster.anti_affinities());
    out
}

/// Matching pods per eligible domain of one spread constraint, and the global minimum.
struct Tally {
    counts: BTreeMap<String, usize>,
    min: usize,
}

impl<'a> Cluster<'a, '_> {
    fn domain(&self, placed: &Placed, key: &str) -> Option<&str> {
        self.hosts[placed.host].labels.get(key).map(String::as_str)
    }

    /// Each planned pod's DoNotSchedule spreads: its domain holds at most maxSkew more matching
    /// pods than the emptiest domain it could use.
    fn spreads(&mut self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut memo: HashMap<(&PodConstraints, usize), Tally> = HashMap::new();
        let hosts = self.hosts;
        for i in 0..self.placed.len() {
            let (pod, host) = (self.placed[i].pod, &hosts[self.placed[i].host]);
            let c: &'a PodConstraints = &pod.constraints;
            if !self.placed[i].planned || !c.node_matches(&host.labels) {
                continue;
            }
            for (si, s) in c.spread.iter().enumerate() {
                if s.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                    continue;
                }
                let Some(domain) = host.labels.get(&s.topology_key) else {
                    out.push(Violation::SpreadKeyMissing {
                        pod: pod.key(),
                        node: host.name.clone(),
                        key: s.topology_key.clone(),
                    });
                    continue;
                };
                let tally = memo.entry((c, si)).or_insert_with(|| self.tally(c, s));
                let count = tally.counts.get(domain).copied().unwrap_or(0);
                if count > tally.min + s.max_skew as usize {
                    out.push(Violation::Spread {
                        pod: pod.key(),
                        key: s.topology_key.clone(),
                        domain: domain.clone(),
                        count,
                        min: tally.min,
                        max_skew: s.max_skew,
                        domains: tally.counts.len(),
                    });
                }
            }
        }
        out
    }

    /// Domains are the values of the key on the nodes the spread's node inclusion policies admit
    /// (nodeAffinityPolicy Honor: the pod's nodeSelector and required node affinity accept the
    /// node; nodeTaintsPolicy Honor: the pod tolerates its NoSchedule and NoExecute taints), and,
    /// for keys other than the hostname, on the offerings NodePools may launch that the policies
    /// admit, taking the NodePool's taints (Karpenter spreads into zones it can launch in). Pods
    /// count on the nodes that are domains.
    fn tally(&mut self, c: &PodConstraints, s: &TopologySpread) -> Tally {
        let key = s.topology_key.as_str();
        let admitted: Vec<bool> = self
            .hosts
            .iter()
            .map(|h| s.counts_node(c, &h.labels, &h.taints))
            .collect();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (h, _) in self.hosts.iter().zip(&admitted).filter(|(_, &a)| a) {
            if let Some(d) = h.labels.get(key) {
                counts.entry(d.clone()).or_insert(0);
            }
        }
        for p in self.placed.iter().filter(|p| admitted[p.host]) {
            let labels = &self.hosts[p.host].labels;
            let counted = p.pod.namespace == c.namespace && s.selector.matches(&p.pod.labels);
            if let (true, Some(d)) = (counted, labels.get(key)) {
                *counts.entry(d.clone()).or_insert(0) += 1;
            }
        }
        if key != HOSTNAME {
            for d in self.launchable_domains(c, s) {
                counts.entry(d).or_insert(0);
            }
        }
        let too_few = s.min_domains.is_some_and(|m| counts.len() < m as usize);
        let min = if too_few {
            0
        } else {
            counts.values().copied().min().unwrap_or(0)
        };
        Tally { counts, min }
    }

    fn launchable_domains(&mut self, c: &PodConstraints, s: &TopologySpread) -> BTreeSet<String> {
        let key = s.topology_key.as_str();
        let (snapshot, catalog) = (self.snapshot, self.catalog);
        let pools = &snapshot.nodepools;
        let launchable = self
            .launchable
            .get_or_insert_with(|| launchable_offerings(snapshot, catalog));
        launchable
            .iter()
            .filter(|(pi, labels)| s.counts_node(c, labels, &pools[*pi].taints))
            .filter_map(|(_, labels)| labels.get(key).cloned())
            .collect()
    }

    /// Each planned pod's required pod affinity: its domain holds a pod the term selects that got
    /// there first, a running one or one that does not need the term itself. When no running pod
    /// matches, one domain may start the group: the first pod placed there selects itself.
    fn affinities(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut groups: BTreeMap<(&str, &PodAffinityTerm), Vec<usize>> = BTreeMap::new();
        for (i, p) in self.placed.iter().enumerate().filter(|(_, p)| p.planned) {
            for term in &p.pod.constraints.pod_affinity {
                groups
                    .entry((p.pod.namespace.as_str(), term))
                    .or_default()
                    .push(i);
            }
        }
        for ((ns, term), owners) in groups {
            self.affinity_group(ns, term, &owners, &mut out);
        }
        out
    }

    fn affinity_group(
        &self,
        ns: &str,
        term: &PodAffinityTerm,
        owners: &[usize],
        out: &mut Vec<Violation>,
    ) {
        let key = term.topology_key.as_str();
        let mut anchored: BTreeSet<&str> = BTreeSet::new();
        let mut running_match = false;
        for q in self.placed.iter().filter(|q| term.selects(ns, q.pod)) {
            running_match |= !q.planned;
            let owner =
                q.planned && q.pod.namespace == ns && q.pod.constraints.pod_affinity.contains(term);
            if let (false, Some(d)) = (owner, self.domain(q, key)) {
                anchored.insert(d);
            }
        }
        let mut loose: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in owners {
            match self.domain(&self.placed[i], key) {
                Some(d) if anchored.contains(d) => {}
                Some(d) => loose.entry(d).or_default().push(i),
                None => out.push(self.affinity_violation(i, key)),
            }
        }
        let start = loose
            .iter()
            .filter(|_| !running_match)
            .filter(|(_, v)| v.iter().any(|&i| term.selects(ns, self.placed[i].pod)))
            .max_by_key(|(_, v)| v.len())
            .map(|(d, _)| *d);
        for (d, v) in &loose {
            if Some(*d) != start {
                out.extend(v.iter().map(|&i| self.affinity_violation(i, key)));
            }
        }
    }

    fn affinity_violation(&self, i: usize, key: &str) -> Violation {
        let p = &self.placed[i];
        Violation::Affinity {
            pod: p.pod.key(),
            node: self.hosts[p.host].name.clone(),
            key: key.to_string(),
        }
    }

    /// No pod shares a domain with a pod its required anti-affinity selects, where either is
    /// planned: a running pod's term repels planned pods as much as a planned pod's own.
    fn anti_affinities(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut by_key: HashMap<&str, HashMap<&str, Vec<usize>>> = HashMap::new();
        for a in &self.placed {
            for term in &a.pod.constraints.pod_anti_affinity {
                let key = term.topology_key.as_str();
                let Some(d) = self.domain(a, key) else {
                    continue;
                };
                let index = by_key.entry(key).or_insert_with(|| self.by_domain(key));
                for &j in index.get(d).into_iter().flatten() {
                    let b = &self.placed[j];
                    let pair_planned = a.planned || b.planned;
                    if pair_planned
                        && !std::ptr::eq(a.pod, b.pod)
                        && term.selects(&a.pod.namespace, b.pod)
                    {
                        out.push(Violation::AntiAffinity {
                            pod: a.pod.key(),
                            other: b.pod.key(),
                            key: key.to_string(),
                            domain: d.to_string(),
                        });
                    }
                }
            }
        }
        out
    }

    fn by_domain(&self, key: &str) -> HashMap<&'_ str, Vec<usize>> {
        let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
        for (j, p) in self.placed.iter().enumerate() {
            if let Some(d) = self.domain(p, key) {
                index.entry(d).or_default().push(j);
            }
        }
        index
    }
}

/// Labels of every available offering each NodePool may launch (EC2NodeClass present, zone within
/// its subnets, NodePool requirements met), with the NodePool's index.
fn launchable_offerings(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Vec<(usize, Labels)> {
    let mut out = Vec::new();
    for (pi, pool) in snapshot.nodepools.iter().enumerate() {
        if snapshot.missing_node_class(pool).is_some() {
            continue;
        }
        let zones = snapshot
            .node_class(pool.node_class.as_deref())
            .and_then(|c| c.zones.as_ref());
        for it in &catalog.instance_types {
            for o in it.offerings.iter().filter(|o| o.available) {
                if zones.is_some_and(|z| !z.contains(&o.zone)) {
                    continue;
                }
                let labels = launch_labels(it, pool, &o.zone, o.capacity_type, &catalog.region);
                if pool.requirements.iter().all(|r| r.matches(&labels)) {
                    out.push((pi, labels));
                }
            }
        }
    }
    out
}
