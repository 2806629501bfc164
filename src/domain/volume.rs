//! Storage as the decision core sees it: the PersistentVolumes, PersistentVolumeClaims,
//! StorageClasses and CSINodes of a cluster, the volumes each pod mounts, and what they demand of a
//! node. A pod's claims are resolved ([`Storage::needs`]) into node requirements (the zones its
//! volumes allow: a bound PersistentVolume's node affinity, or an unbound claim's StorageClass
//! `allowedTopologies`) and a count of EBS attachments; `crate::snapshot` writes both into the pod's
//! constraints, so every decision (the MILP, the greedy baseline, consolidation, the simulator)
//! honours them through the same checks as node affinity and resource requests. A claim that
//! cannot be resolved makes its pod unschedulable with a message naming the object and field.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::cluster::ClusterSnapshot;
use super::labels::{NodeSelector, Operator, Requirement};
use super::pod::Pod;
use super::quantity::Quantity;

/// The EBS CSI driver: the only EC2 block storage with a per-instance attachment limit.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";
/// The in-tree EBS plugin, migrated to the CSI driver (its volumes count against the same limit).
pub const IN_TREE_EBS: &str = "kubernetes.io/aws-ebs";
/// StorageClass annotation that makes it the default for claims that name none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The resource a node offers, and a pod requests, for attachments of `driver`'s volumes: the name
/// kubelet reported as allocatable before CSINode carried the limit.
pub fn attach_resource(driver: &str) -> String {
    format!("attachable-volumes-csi-{driver}")
}

/// The resource counting EBS attachments.
pub fn ebs_attach_resource() -> String {
    attach_resource(EBS_CSI_DRIVER)
}

/// Attachments of a node whose limit is unknown (no CSINode yet): Karpenter and kube-scheduler
/// apply no limit then.
pub const UNLIMITED_ATTACHMENTS: i64 = 1_000_000;

/// The driver whose attach limit a volume counts against: CSI drivers by name, the in-tree EBS
/// plugin as the EBS CSI driver.
pub fn attach_driver(driver_or_provisioner: &str) -> &str {
    if driver_or_provisioner == IN_TREE_EBS {
        EBS_CSI_DRIVER
    } else {
        driver_or_provisioner
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BindingMode {
    Immediate,
    WaitForFirstConsumer,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageClass {
    pub name: String,
    pub provisioner: String,
    pub binding_mode: BindingMode,
    /// `allowedTopologies` as node selector terms (each a list of `In` requirements); empty allows
    /// every node.
    pub allowed_topologies: NodeSelector,
    /// Annotated as the cluster's default class.
    pub default: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolume {
    pub name: String,
    /// `spec.csi.driver`, or the in-tree plugin's name (`kubernetes.io/aws-ebs`); None for volumes
    /// no node attaches (NFS, hostPath).
    pub driver: Option<String>,
    /// `spec.nodeAffinity.required`; empty terms allow every node.
    pub node_affinity: NodeSelector,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimPhase {
    Pending,
    Bound,
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolumeClaim {
    pub namespace: String,
    pub name: String,
    /// `spec.volumeName`: the PersistentVolume it is bound to.
    pub volume_name: Option<String>,
    /// `spec.storageClassName`; `Some("")` asks for no class (static binding only).
    pub storage_class: Option<String>,
    pub phase: ClaimPhase,
    /// Has a deletionTimestamp.
    pub deleting: bool,
}

/// A volume a pod mounts that needs a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodVolume {
    /// The volume's name in `spec.volumes`.
    pub name: String,
    /// The claim's name in the pod's namespace.
    pub claim: String,
    /// A generic ephemeral volume: the class its `volumeClaimTemplate` names (`Some(None)` when it
    /// names none). Its claim, `<pod>-<volume>`, may not exist yet.
    pub ephemeral: Option<Option<String>>,
}

/// The storage objects of a cluster, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    pub classes: BTreeMap<String, StorageClass>,
    pub volumes: BTreeMap<String, PersistentVolume>,
    /// Keyed by `namespace/name`.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    /// CSINode attach limits: node name → driver → `allocatable.count`.
    pub attach_limits: BTreeMap<String, BTreeMap<String, u32>>,
}

/// What a pod's volumes ask of the node it runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeNeeds {
    /// Node selectors that must all match (one per zonal volume).
    pub requirements: Vec<NodeSelector>,
    /// EBS attachments: the distinct claims on the EBS driver.
    pub attachments: u32,
    /// Unbound claims whose volume the pod's node will place (WaitForFirstConsumer).
    pub unbound: Vec<String>,
}

impl Storage {
    pub fn add_volume(&mut self, v: PersistentVolume) {
        self.volumes.insert(v.name.clone(), v);
    }

    pub fn add_claim(&mut self, c: PersistentVolumeClaim) {
        self.claims.insert(format!("{}/{}", c.namespace, c.name), c);
    }

    pub fn add_class(&mut self, c: StorageClass) {
        self.classes.insert(c.name.clone(), c);
    }

    pub fn add_attach_limits(&mut self, node: String, limits: BTreeMap<String, u32>) {
        self.attach_limits.insert(node, limits);
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
            && self.volumes.is_empty()
            && self.claims.is_empty()
            && self.attach_limits.is_empty()
    }

    /// The cluster's default StorageClass (the alphabetically last when several claim it, as no
    /// choice between them is right).
    pub fn default_class(&self) -> Option<&StorageClass> {
        self.classes.values().rfind(|c| c.default)
    }

    /// Resolves the volumes of a pod in `namespace` (named `pod` for messages). An error names the
    /// object and field at fault; the pod cannot be scheduled until it is mended.
    pub fn needs(
        &self,
        namespace: &str,
        pod: &str,
        volumes: &[PodVolume],
    ) -> Result<VolumeNeeds, String> {
        let mut needs = VolumeNeeds::default();
        let mut ebs_claims = BTreeSet::new();
        for v in volumes {
            let need = self
                .claim_need(namespace, v)
                .map_err(|e| format!("volume {:?} of pod {namespace}/{pod}: {e}", v.name))?;
            if let Some(sel) = need.requirements {
                if !sel.terms.is_empty() && !needs.requirements.contains(&sel) {
                    needs.requirements.push(sel);
                }
            }
            if need.driver.as_deref().map(attach_driver) == Some(EBS_CSI_DRIVER) {
                ebs_claims.insert(v.claim.clone());
            }
            if need.unbound {
                needs.unbound.push(format!("{namespace}/{}", v.claim));
            }
        }
        needs.attachments = u32::try_from(ebs_claims.len()).unwrap_or(u32::MAX);
        Ok(needs)
    }

    fn claim_need(&self, namespace: &str, v: &PodVolume) -> Result<ClaimNeed, String> {
        let key = format!("{namespace}/{}", v.claim);
        let Some(claim) = self.claims.get(&key) else {
            return match &v.ephemeral {
                Some(class) => self.class_need(class.as_deref(), "spec.volumes[].ephemeral"),
                None => Err(format!(
                    "PersistentVolumeClaim {key} (spec.volumes[].persistentVolumeClaim.claimName) \
                     is not found"
                )),
            };
        };
        if claim.deleting {
            return Err(format!("PersistentVolumeClaim {key} is being deleted"));
        }
        if claim.phase == ClaimPhase::Lost {
            return Err(format!(
                "PersistentVolumeClaim {key} is Lost (status.phase): its volume is gone"
            ));
        }
        if let Some(pv) = claim.volume_name.as_deref().filter(|n| !n.is_empty()) {
            return self.volume_need(pv, &key);
        }
        let what = format!("PersistentVolumeClaim {key} spec.storageClassName");
        self.class_need(claim.storage_class.as_deref(), &what)
    }

    fn volume_need(&self, name: &str, claim: &str) -> Result<ClaimNeed, String> {
        let pv = self.volumes.get(name).ok_or_else(|| {
            format!(
                "PersistentVolume {name} (PersistentVolumeClaim {claim} spec.volumeName) is not found"
            )
        })?;
        if !pv.node_affinity.terms.is_empty() && !pv.node_affinity.terms.iter().any(satisfiable) {
            return Err(format!(
                "PersistentVolume {name} spec.nodeAffinity.required: no node can match its \
                 contradictory terms"
            ));
        }
        Ok(ClaimNeed {
            requirements: Some(pv.node_affinity.clone()),
            driver: pv.driver.clone(),
            unbound: false,
        })
    }

    /// An unbound claim (or a generic ephemeral volume's template) of class `name`.
    fn class_need(&self, name: Option<&str>, field: &str) -> Result<ClaimNeed, String> {
        let class = match name {
            // no class: only a pre-made volume can bind it; nothing constrains the node yet
            Some("") => return Ok(ClaimNeed::default()),
            Some(n) => self
                .classes
                .get(n)
                .ok_or_else(|| format!("StorageClass {n} ({field}) is not found"))?,
            None => match self.default_class() {
                Some(c) => c,
                None => return Ok(ClaimNeed::default()),
            },
        };
        if class.binding_mode == BindingMode::Immediate {
            // the provisioner places the volume without regard to the pod; kube-scheduler waits
            // for the binding, and the bound volume's zone is known at the next decision
            return Err(format!(
                "StorageClass {} volumeBindingMode is Immediate and the claim is not bound yet",
                class.name
            ));
        }
        Ok(ClaimNeed {
            requirements: Some(class.allowed_topologies.clone()),
            driver: Some(class.provisioner.clone()),
            unbound: true,
        })
    }
}

#[derive(Debug, Default)]
struct ClaimNeed {
    requirements: Option<NodeSelector>,
    driver: Option<String>,
    unbound: bool,
}

/// Whether some labels could satisfy every requirement of a node selector term.
pub fn satisfiable(term: &Vec<Requirement>) -> bool {
    let mut keys: BTreeMap<&str, Vec<&Requirement>> = BTreeMap::new();
    for r in term {
        keys.entry(r.key.as_str()).or_default().push(r);
    }
    keys.values().all(|rs| key_satisfiable(rs))
}

fn key_satisfiable(rs: &[&Requirement]) -> bool {
    let absent_ok = rs
        .iter()
        .all(|r| matches!(r.operator, Operator::NotIn | Operator::DoesNotExist));
    if absent_ok {
        return true;
    }
    if rs.iter().any(|r| r.operator == Operator::DoesNotExist) {
        return false;
    }
    let mut allowed: Option<BTreeSet<&str>> = None;
    for r in rs.iter().filter(|r| r.operator == Operator::In) {
        let vals: BTreeSet<&str> = r.values.iter().map(String::as_str).collect();
        allowed = Some(match allowed {
            Some(a) => a.intersection(&vals).copied().collect(),
            None => vals,
        });
    }
    let excluded: BTreeSet<&str> = rs
        .iter()
        .filter(|r| r.operator == Operator::NotIn)
        .flat_map(|r| r.values.iter().map(String::as_str))
        .collect();
    match allowed {
        Some(a) => a.iter().any(|v| !excluded.contains(v)),
        // Exists, Gt or Lt only: some value satisfies them unless Gt/Lt contradict, which the
        // label match itself reports; treat as satisfiable
        None => true,
    }
}

impl Storage {
    /// Writes `pod`'s volume needs into its constraints (`volume_requirements`, `volume_error` and
    /// the EBS attachment request). It sets, never adds, and copies the pod only when they change.
    pub fn resolve_pod(&self, pod: &mut Arc<Pod>) {
        let ebs = ebs_attach_resource();
        let c = &pod.constraints;
        if pod.volumes.is_empty()
            && c.volume_error.is_none()
            && c.volume_requirements.is_empty()
            && c.requests.get(&ebs).milli() == 0
        {
            return;
        }
        let (requirements, attachments, error) =
            match self.needs(&pod.namespace, &pod.name, &pod.volumes) {
                Ok(n) => (n.requirements, n.attachments, None),
                Err(e) => (vec![], 0, Some(e)),
            };
        let count = Quantity::from_units(i64::from(attachments));
        if c.volume_requirements == requirements
            && c.volume_error == error
            && c.requests.get(&ebs) == count
        {
            return;
        }
        let c = Arc::make_mut(&mut Arc::make_mut(pod).constraints);
        c.volume_requirements = requirements;
        c.volume_error = error;
        c.requests.set_or_remove(&ebs, count);
    }
}

impl ClusterSnapshot {
    /// Resolves every pod's volumes ([`Storage::resolve_pod`]) and then the nodes' attach limits
    /// ([`ClusterSnapshot::apply_attach_limits`]). Running it again after the storage objects
    /// change is safe.
    pub fn resolve_volumes(&mut self) {
        for pod in &mut self.pods {
            self.storage.resolve_pod(pod);
        }
        self.apply_attach_limits();
    }

    /// Writes each node's EBS attach limit into its allocatable once some pod attaches an EBS
    /// volume: the CSINode's count, or no limit where the node has none yet.
    pub fn apply_attach_limits(&mut self) {
        let ebs = ebs_attach_resource();
        if !self
            .pods
            .iter()
            .any(|p| p.constraints.requests.get(&ebs).milli() > 0)
        {
            return;
        }
        for node in &mut self.nodes {
            let limit = self
                .storage
                .attach_limits
                .get(&node.name)
                .and_then(|d| d.get(EBS_CSI_DRIVER))
                .map(|&l| Quantity::from_units(i64::from(l)));
            let limit = match limit {
                Some(l) => l,
                None if node.allocatable.get(&ebs).milli() > 0 => continue,
                None => Quantity::from_units(UNLIMITED_ATTACHMENTS),
            };
            if node.allocatable.get(&ebs) != limit {
                let n = Arc::make_mut(node);
                n.allocatable.set(ebs.clone(), limit);
                n.capacity.set(ebs.clone(), limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Pod, PodConstraints};

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    fn zone(z: &str) -> NodeSelector {
        NodeSelector {
            terms: vec![vec![req("zone", Operator::In, &[z])]],
        }
    }

    fn claim(name: &str, volume: Option<&str>, class: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            namespace: "ns".into(),
            name: name.into(),
            volume_name: volume.map(Into::into),
            storage_class: class.map(Into::into),
            phase: if volume.is_some() {
                ClaimPhase::Bound
            } else {
                ClaimPhase::Pending
            },
            deleting: false,
        }
    }

    fn mount(claim: &str) -> PodVolume {
        PodVolume {
            name: "data".into(),
            claim: claim.into(),
            ephemeral: None,
        }
    }

    #[test]
    fn contradictory_terms_are_unsatisfiable() {
        use Operator::*;
        assert!(satisfiable(&vec![
            req("z", In, &["a", "b"]),
            req("z", In, &["b"])
        ]));
        assert!(!satisfiable(&vec![
            req("z", In, &["a"]),
            req("z", In, &["b"])
        ]));
        assert!(!satisfiable(&vec![
            req("z", In, &["a"]),
            req("z", NotIn, &["a"])
        ]));
        assert!(!satisfiable(&vec![
            req("z", Exists, &[]),
            req("z", DoesNotExist, &[])
        ]));
        assert!(satisfiable(&vec![
            req("z", NotIn, &["a"]),
            req("z", DoesNotExist, &[])
        ]));
    }

    #[test]
    fn and_of_selectors_joins_every_pair_of_terms() {
        let either = NodeSelector {
            terms: vec![
                vec![req("a", Operator::Exists, &[])],
                vec![req("b", Operator::Exists, &[])],
            ],
        };
        let both = either.and(&zone("z1"));
        assert_eq!(both.terms.len(), 2);
        assert!(both.terms.iter().all(|t| t.len() == 2));
        assert_eq!(NodeSelector::default().and(&zone("z1")), zone("z1"));
    }

    #[test]
    fn distinct_ebs_claims_count_one_attachment_each() {
        let mut s = Storage::default();
        for (pv, z) in [("pv-1", "a"), ("pv-2", "b")] {
            s.add_volume(PersistentVolume {
                name: pv.into(),
                driver: Some(IN_TREE_EBS.into()),
                node_affinity: zone(z),
            });
        }
        s.add_claim(claim("c1", Some("pv-1"), None));
        s.add_claim(claim("c2", Some("pv-2"), None));
        let needs = s
            .needs("ns", "p", &[mount("c1"), mount("c2"), mount("c1")])
            .unwrap();
        assert_eq!(needs.attachments, 2);
        assert_eq!(needs.requirements, vec![zone("a"), zone("b")]);
        assert!(needs.unbound.is_empty());
    }

    #[test]
    fn an_unbound_claim_takes_the_default_class_and_an_immediate_one_waits() {
        let mut s = Storage::default();
        s.add_class(StorageClass {
            name: "gp3".into(),
            provisioner: EBS_CSI_DRIVER.into(),
            binding_mode: BindingMode::WaitForFirstConsumer,
            allowed_topologies: zone("c"),
            default: true,
        });
        s.add_claim(claim("c1", None, None));
        let needs = s.needs("ns", "p", &[mount("c1")]).unwrap();
        assert_eq!(needs.requirements, vec![zone("c")]);
        assert_eq!(needs.unbound, ["ns/c1"]);
        assert_eq!(needs.attachments, 1);
        s.classes.get_mut("gp3").unwrap().binding_mode = BindingMode::Immediate;
        let e = s.needs("ns", "p", &[mount("c1")]).unwrap_err();
        assert!(
            e.contains("StorageClass gp3 volumeBindingMode is Immediate"),
            "{e}"
        );
    }

    #[test]
    fn resolving_twice_changes_nothing_and_undoing_the_volume_clears_it() {
        let mut snap = ClusterSnapshot::default();
        snap.storage.add_volume(PersistentVolume {
            name: "pv-1".into(),
            driver: Some(EBS_CSI_DRIVER.into()),
            node_affinity: zone("a"),
        });
        snap.storage.add_claim(claim("c1", Some("pv-1"), None));
        let mut pod = Pod::new(
            "p",
            PodConstraints {
                namespace: "ns".into(),
                ..PodConstraints::default()
            },
        );
        pod.volumes = vec![mount("c1")];
        snap.pods.push(std::sync::Arc::new(pod));
        snap.resolve_volumes();
        let once = snap.clone();
        snap.resolve_volumes();
        assert_eq!(snap, once);
        let c = &snap.pods[0].constraints;
        assert_eq!(
            c.requests.get(&ebs_attach_resource()),
            Quantity::from_units(1)
        );
        assert_eq!(c.volume_requirements, vec![zone("a")]);
        std::sync::Arc::make_mut(&mut snap.pods[0]).volumes.clear();
        snap.resolve_volumes();
        assert_eq!(
            *snap.pods[0].constraints,
            PodConstraints {
                namespace: "ns".into(),
                ..PodConstraints::default()
            }
        );
    }
}
