//! Karpenter's custom resources as joiner reads them: serde structs for karpenter.sh/v1 NodePool
//! and NodeClaim and karpenter.k8s.aws/v1 EC2NodeClass holding only the fields joiner uses (unknown
//! fields are ignored), plus the NodeClaim and EC2NodeClass conversions. NodePools are converted in
//! `nodepool.rs`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer};

use crate::domain::{
    KubeletSettings, Labels, NodeClaim, NodeClass, Quantity, Requirement, Resources, NODEPOOL,
};

/// Karpenter's annotation holding a NodePool template's hash, on the NodePool and on its
/// NodeClaims.
pub(crate) const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";

use super::convert::{is_percentage, requirement, resources, FieldError, FieldResult};

/// A scalar read as text. CRD fields typed int-or-string (`limits: {cpu: 1000}`) keep YAML
/// numbers, so numbers and booleans are accepted and written back in their plain form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The metadata fields joiner reads from custom resources.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    pub name: Option<String>,
    pub labels: Option<Labels>,
    pub annotations: Option<Labels>,
    pub creation_timestamp: Option<String>,
    /// Only presence matters.
    pub deletion_timestamp: Option<IgnoredAny>,
}

impl Meta {
    pub fn required_name(&self) -> FieldResult<String> {
        self.name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| FieldError::new("metadata.name", "missing"))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequirementSpec {
    pub key: String,
    pub operator: String,
    pub values: Option<Vec<Text>>,
    pub min_values: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaintSpec {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

pub(crate) type QuantityMap = BTreeMap<String, Text>;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodePoolObject {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: Option<NodePoolSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodePoolSpec {
    pub template: Option<NodeClaimTemplate>,
    pub disruption: Option<DisruptionSpec>,
    pub limits: Option<QuantityMap>,
    pub weight: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClaimTemplate {
    pub metadata: Option<TemplateMeta>,
    pub spec: Option<NodeClaimTemplateSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TemplateMeta {
    pub labels: Option<Labels>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClaimTemplateSpec {
    pub requirements: Option<Vec<RequirementSpec>>,
    pub taints: Option<Vec<TaintSpec>>,
    pub startup_taints: Option<Vec<TaintSpec>>,
    pub node_class_ref: Option<NodeClassRef>,
    pub expire_after: Option<Text>,
    pub termination_grace_period: Option<Text>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClassRef {
    pub name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DisruptionSpec {
    pub consolidation_policy: Option<String>,
    pub consolidation_threshold: Option<f64>,
    pub consolidate_after: Option<Text>,
    pub budgets: Option<Vec<BudgetSpec>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BudgetSpec {
    pub nodes: Option<Text>,
    pub reasons: Option<Vec<String>>,
    pub schedule: Option<String>,
    pub duration: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClaimObject {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: Option<NodeClaimSpec>,
    pub status: Option<NodeClaimStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClaimSpec {
    pub requirements: Option<Vec<RequirementSpec>>,
    pub expire_after: Option<Text>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClaimStatus {
    pub node_name: Option<String>,
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    pub capacity: Option<QuantityMap>,
    pub allocatable: Option<QuantityMap>,
    pub conditions: Option<Vec<Condition>>,
    pub last_pod_event_time: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClassObject {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: Option<NodeClassSpec>,
    pub status: Option<NodeClassStatus>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct NodeClassStatus {
    #[serde(default)]
    pub subnets: Vec<SubnetStatus>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct SubnetStatus {
    pub zone: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeClassSpec {
    pub kubelet: Option<KubeletSpec>,
    pub ami_family: Option<String>,
    pub ami_selector_terms: Option<Vec<AmiTermSpec>>,
    pub block_device_mappings: Option<Vec<BlockDeviceMappingSpec>>,
    pub instance_store_policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct AmiTermSpec {
    pub alias: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BlockDeviceMappingSpec {
    pub device_name: Option<String>,
    pub ebs: Option<EbsSpec>,
    #[serde(default)]
    pub root_volume: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EbsSpec {
    pub volume_size: Option<Text>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KubeletSpec {
    pub max_pods: Option<u32>,
    pub pods_per_core: Option<u32>,
    pub kube_reserved: Option<QuantityMap>,
    pub system_reserved: Option<QuantityMap>,
    pub eviction_hard: Option<BTreeMap<String, Text>>,
}

/// A quantity map (absent is empty) with entries at `{path}.{name}`.
pub(crate) fn quantity_map(map: Option<&QuantityMap>, path: &str) -> FieldResult<Resources> {
    resources(
        map.into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
        path,
    )
}

/// Validated requirements at `{path}[i]`.
pub(crate) fn requirements(
    reqs: Option<&[RequirementSpec]>,
    path: &str,
) -> FieldResult<Vec<Requirement>> {
    let mut out = Vec::new();
    for (i, r) in reqs.unwrap_or_default().iter().enumerate() {
        let values = r.values.iter().flatten().map(|v| v.0.clone()).collect();
        out.push(requirement(
            &r.key,
            &r.operator,
            values,
            r.min_values,
            &format!("{path}[{i}]"),
        )?);
    }
    Ok(out)
}

pub(crate) fn convert_node_claim(obj: NodeClaimObject) -> FieldResult<NodeClaim> {
    let name = obj.metadata.required_name()?;
    let labels = obj.metadata.labels.unwrap_or_default();
    let spec_reqs = obj.spec.as_ref().and_then(|s| s.requirements.as_deref());
    let status = obj.status.unwrap_or_default();
    let condition = |t: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let (initialized, drifted) = (condition("Initialized"), condition("Drifted"));
    let expire_after = obj
        .spec
        .as_ref()
        .and_then(|s| s.expire_after.as_ref())
        .map(|t| t.0.clone());
    if let Some(e) = expire_after
        .as_ref()
        .filter(|e| !super::convert::is_karpenter_duration(e))
    {
        return Err(FieldError::new(
            "spec.expireAfter",
            format!("malformed duration {e:?}"),
        ));
    }
    Ok(NodeClaim {
        initialized,
        drifted,
        expire_after,
        created: obj.metadata.creation_timestamp.clone(),
        last_pod_event: status.last_pod_event_time.clone(),
        nodepool_hash: obj
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODEPOOL_HASH))
            .cloned(),
        name,
        nodepool: labels.get(NODEPOOL).cloned(),
        requirements: requirements(spec_reqs, "spec.requirements")?,
        node_name: status.node_name.filter(|n| !n.is_empty()),
        provider_id: status.provider_id.filter(|p| !p.is_empty()),
        capacity: quantity_map(status.capacity.as_ref(), "status.capacity")?,
        allocatable: quantity_map(status.allocatable.as_ref(), "status.allocatable")?,
        deleting: obj.metadata.deletion_timestamp.is_some(),
        labels,
    })
}

pub(crate) fn convert_node_class(obj: NodeClassObject) -> FieldResult<NodeClass> {
    let name = obj.metadata.required_name()?;
    // an unresolved class (no status yet, as in hand-written dumps) is not narrowed to any zone
    let mut zones: Vec<String> = obj
        .status
        .map(|s| s.subnets.into_iter().map(|s| s.zone).collect())
        .unwrap_or_default();
    zones.sort();
    zones.dedup();
    let zones = (!zones.is_empty()).then_some(zones);
    let spec = obj.spec.unwrap_or_default();
    let volumes = launch_volumes(&spec)?;
    let k = spec.kubelet.unwrap_or_default();
    let mut eviction_hard = BTreeMap::new();
    for (signal, Text(value)) in k.eviction_hard.unwrap_or_default() {
        // Every eviction signal takes a percentage or a quantity; catching typos here keeps
        // allocatable arithmetic downstream from guessing.
        if !is_percentage(&value) && Quantity::parse(&value).map_or(true, |q| q.is_negative()) {
            let path = format!("spec.kubelet.evictionHard.{signal}");
            return Err(FieldError::new(
                path,
                format!("{value:?} is neither a percentage nor a quantity"),
            ));
        }
        eviction_hard.insert(signal, value);
    }
    let kubelet = KubeletSettings {
        max_pods: k.max_pods,
        pods_per_core: k.pods_per_core,
        kube_reserved: quantity_map(k.kube_reserved.as_ref(), "spec.kubelet.kubeReserved")?,
        system_reserved: quantity_map(k.system_reserved.as_ref(), "spec.kubelet.systemReserved")?,
        eviction_hard,
    };
    Ok(NodeClass {
        name,
        kubelet,
        zones,
        ephemeral_volume: volumes.ephemeral_volume,
        instance_store_raid0: volumes.instance_store_raid0,
        launch_data_volumes: volumes.data_volumes,
    })
}

/// What an EC2NodeClass launches a node with that scheduling sees: the ephemeral-storage volume,
/// the instance-store policy and the EBS volumes besides the root.
#[derive(Debug, Default, PartialEq)]
struct LaunchVolumes {
    ephemeral_volume: Option<Quantity>,
    instance_store_raid0: bool,
    data_volumes: u32,
}

/// AMI families by the disks their images come with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskLayout {
    /// AL2 and AL2023 (and a class naming no family): one root volume, `/dev/xvda`, 20Gi.
    AmazonLinux,
    /// A 4Gi OS volume on `/dev/xvda` and a 20Gi data volume on `/dev/xvdb` for containers.
    Bottlerocket,
    /// One root volume, `/dev/sda1`, 50Gi.
    Windows,
    /// Whatever the image has: joiner cannot know its devices.
    Custom,
}

impl DiskLayout {
    fn of(spec: &NodeClassSpec) -> DiskLayout {
        let alias_family = spec
            .ami_selector_terms
            .iter()
            .flatten()
            .find_map(|t| t.alias.as_deref())
            .and_then(|a| a.split('@').next());
        let family = spec.ami_family.as_deref().or(alias_family).unwrap_or("");
        let family = family.to_ascii_lowercase();
        if family == "bottlerocket" {
            DiskLayout::Bottlerocket
        } else if family.starts_with("windows") {
            DiskLayout::Windows
        } else if family == "custom" {
            DiskLayout::Custom
        } else {
            DiskLayout::AmazonLinux
        }
    }

    /// The device the image boots from, when the family fixes it.
    fn root_device(self) -> Option<&'static str> {
        match self {
            DiskLayout::AmazonLinux | DiskLayout::Bottlerocket => Some("/dev/xvda"),
            DiskLayout::Windows => Some("/dev/sda1"),
            DiskLayout::Custom => None,
        }
    }

    /// The device pods' ephemeral storage is on, when the family fixes it.
    fn ephemeral_device(self) -> Option<&'static str> {
        match self {
            DiskLayout::Bottlerocket => Some("/dev/xvdb"),
            other => other.root_device(),
        }
    }

    /// The ephemeral volume's size when the class maps no device for it; None is Karpenter's
    /// default 20Gi.
    fn default_ephemeral(self) -> Option<Quantity> {
        match self {
            DiskLayout::Windows => Some(Quantity::from_units(50 << 30)),
            _ => None,
        }
    }
}

/// Karpenter's rules for ephemeral storage (aws/karpenter-provider-aws at commit `1d927085`,
/// `pkg/providers/instancetype/types.go` `ephemeralStorage` and the AMI families' default
/// mappings in `pkg/providers/amifamily`): the mapping marked `rootVolume`; else, for a custom AMI, the last mapping; else the
/// mapping on the family's ephemeral device; else the family's default. A mapping without a
/// `volumeSize` (a snapshot's size) does not decide.
fn launch_volumes(spec: &NodeClassSpec) -> FieldResult<LaunchVolumes> {
    let layout = DiskLayout::of(spec);
    let instance_store_raid0 = match spec.instance_store_policy.as_deref() {
        None => false,
        Some("RAID0") => true,
        Some(other) => {
            return Err(FieldError::new(
                "spec.instanceStorePolicy",
                format!("{other:?} is not a policy (RAID0 is the only one)"),
            ))
        }
    };
    let mappings = spec.block_device_mappings.as_deref().unwrap_or_default();
    let mut sizes = Vec::with_capacity(mappings.len());
    for (i, m) in mappings.iter().enumerate() {
        sizes.push(volume_size(m, i)?);
    }
    let on_device = |device: Option<&str>| {
        mappings
            .iter()
            .zip(&sizes)
            .find(|(m, _)| device.is_some() && m.device_name.as_deref() == device)
    };
    let root = mappings.iter().zip(&sizes).find(|(m, _)| m.root_volume);
    let ephemeral_volume = match (root.and_then(|(_, s)| *s), layout) {
        (Some(size), _) => Some(size),
        (None, DiskLayout::Custom) if !sizes.is_empty() => sizes.last().copied().flatten(),
        (None, _) => on_device(layout.ephemeral_device())
            .and_then(|(_, s)| *s)
            .or(layout.default_ephemeral()),
    };
    let root_mapped = root.is_some() || on_device(layout.root_device()).is_some();
    let data_volumes = if mappings.is_empty() {
        u32::from(layout == DiskLayout::Bottlerocket)
    } else {
        // the image's root volume is there whether or not a mapping replaces it
        let ebs = mappings.iter().filter(|m| m.ebs.is_some()).count();
        let ebs = u32::try_from(ebs).unwrap_or(u32::MAX);
        ebs.saturating_sub(u32::from(root_mapped))
    };
    Ok(LaunchVolumes {
        ephemeral_volume,
        instance_store_raid0,
        data_volumes,
    })
}

/// EBS's largest volume (64 TiB); beyond it a size is a typo, and allocatable arithmetic on it
/// could overflow.
const MAX_VOLUME_BYTES: i64 = 64 << 40;

/// A mapping's `ebs.volumeSize`: a positive quantity up to EBS's largest, or None when not given.
fn volume_size(m: &BlockDeviceMappingSpec, i: usize) -> FieldResult<Option<Quantity>> {
    let Some(Text(text)) = m.ebs.as_ref().and_then(|e| e.volume_size.as_ref()) else {
        return Ok(None);
    };
    match Quantity::parse(text) {
        Ok(q) if q.milli() > 0 && q <= Quantity::from_units(MAX_VOLUME_BYTES) => Ok(Some(q)),
        _ => Err(FieldError::new(
            format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"),
            format!("{text:?} is not a size between 1 byte and 64Ti"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::convert::typed;

    fn yaml(s: &str) -> serde_yaml_ng::Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn node_claim_fields() {
        let obj: NodeClaimObject = typed(yaml(
            "metadata:\n  name: c1\n  labels: {karpenter.sh/nodepool: default}\n  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n\
             spec:\n  requirements:\n  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge], minValues: 2}\n\
             status:\n  nodeName: ip-1\n  providerID: aws:///x/i-1\n  capacity: {cpu: 2, memory: 8Gi}\n",
        ))
        .unwrap();
        let c = convert_node_claim(obj).unwrap();
        assert_eq!(c.nodepool.as_deref(), Some("default"));
        assert!(c.deleting);
        assert_eq!(c.requirements[0].min_values, Some(2));
        assert_eq!(c.capacity.get("cpu"), Quantity::from_units(2));
        assert_eq!(c.node_name.as_deref(), Some("ip-1"));
        assert_eq!(c.provider_id.as_deref(), Some("aws:///x/i-1"));
    }

    #[test]
    fn node_class_kubelet_and_eviction_validation() {
        let obj: NodeClassObject = typed(yaml(
            "metadata: {name: default}\nspec:\n  kubelet:\n    maxPods: 58\n    kubeReserved: {cpu: 100m}\n    \
             evictionHard: {memory.available: 5%, nodefs.available: 1Gi}\n",
        ))
        .unwrap();
        let c = convert_node_class(obj).unwrap();
        assert_eq!(c.kubelet.max_pods, Some(58));
        assert_eq!(
            c.kubelet.kube_reserved.get("cpu"),
            Quantity::from_milli(100)
        );
        assert_eq!(c.kubelet.eviction_hard["memory.available"], "5%");
        let bad: NodeClassObject = typed(yaml(
            "metadata: {name: d}\nspec: {kubelet: {evictionHard: {memory.available: lots}}}\n",
        ))
        .unwrap();
        let e = convert_node_class(bad).unwrap_err();
        assert_eq!(e.path, "spec.kubelet.evictionHard.memory.available");
    }

    fn class(spec: &str) -> FieldResult<NodeClass> {
        convert_node_class(typed(yaml(&format!("metadata: {{name: c}}\nspec: {spec}\n"))).unwrap())
    }

    #[test]
    fn root_volume_mapping_sizes_ephemeral_storage() {
        let c = class(
            "{amiFamily: AL2023, blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, \
             ebs: {volumeSize: 100Gi}}, {deviceName: /dev/xvdc, ebs: {volumeSize: 10Gi}}]}",
        )
        .unwrap();
        assert_eq!(c.ephemeral_volume, Some(Quantity::from_units(100 << 30)));
        assert_eq!(c.launch_data_volumes, 1);
        assert!(!c.instance_store_raid0);
    }

    #[test]
    fn without_a_root_mapping_the_family_decides() {
        // AL2023's ephemeral device is its root, /dev/xvda
        let c = class("{amiFamily: AL2023, blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 80G}}]}")
            .unwrap();
        assert_eq!(
            c.ephemeral_volume,
            Some(Quantity::from_units(80_000_000_000))
        );
        assert_eq!(c.launch_data_volumes, 0);
        // Bottlerocket's is the data volume /dev/xvdb; the alias names the family
        let c = class(
            "{amiSelectorTerms: [{alias: bottlerocket@latest}], blockDeviceMappings: [\
             {deviceName: /dev/xvda, ebs: {volumeSize: 4Gi}}, {deviceName: /dev/xvdb, ebs: {volumeSize: 60Gi}}]}",
        )
        .unwrap();
        assert_eq!(c.ephemeral_volume, Some(Quantity::from_units(60 << 30)));
        assert_eq!(c.launch_data_volumes, 1);
        // no mappings: Bottlerocket still has its data volume, Windows a 50Gi root, AL2 the default
        let c = class("{amiFamily: Bottlerocket}").unwrap();
        assert_eq!((c.ephemeral_volume, c.launch_data_volumes), (None, 1));
        let c = class("{amiSelectorTerms: [{alias: windows2022@latest}]}").unwrap();
        assert_eq!(c.ephemeral_volume, Some(Quantity::from_units(50 << 30)));
        let c = class("{amiFamily: AL2}").unwrap();
        assert_eq!((c.ephemeral_volume, c.launch_data_volumes), (None, 0));
        // a custom AMI: the last mapping's size; no mapping is known to be the root
        let c = class(
            "{amiFamily: Custom, blockDeviceMappings: [{deviceName: /dev/sdb, ebs: {volumeSize: 30Gi}}, \
             {deviceName: /dev/sdc, ebs: {volumeSize: 40Gi}}]}",
        )
        .unwrap();
        assert_eq!(c.ephemeral_volume, Some(Quantity::from_units(40 << 30)));
        assert_eq!(c.launch_data_volumes, 2);
    }

    #[test]
    fn raid0_and_bad_volume_fields() {
        let c = class("{instanceStorePolicy: RAID0}").unwrap();
        assert!(c.instance_store_raid0);
        let e = class("{instanceStorePolicy: RAID5}").unwrap_err();
        assert_eq!(e.path, "spec.instanceStorePolicy");
        let e = class("{blockDeviceMappings: [{rootVolume: true, ebs: {volumeSize: big}}]}")
            .unwrap_err();
        assert_eq!(e.path, "spec.blockDeviceMappings[0].ebs.volumeSize");
        let e = class("{blockDeviceMappings: [{ebs: {volumeSize: 0Gi}}]}").unwrap_err();
        assert_eq!(e.path, "spec.blockDeviceMappings[0].ebs.volumeSize");
    }

    #[test]
    fn text_accepts_numbers() {
        let t: Text = typed(yaml("1000")).unwrap();
        assert_eq!(t.0, "1000");
        assert!(typed::<Text>(yaml("[1]")).is_err());
    }
}
