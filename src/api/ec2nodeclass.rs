//! `karpenter.k8s.aws/v1 EC2NodeClass`: the AWS side of a node — where it runs (subnets, security
//! groups, capacity reservations), what it boots (AMIs, user data, IAM), and how the kubelet and
//! disks are configured. The status holds what the selectors resolved to.

// kube-derive's `printcolumn(...)` lists repeat `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::deserialize_conditions;

/// EC2NodeClass condition: at least one subnet matched the selectors.
pub const EC2NODECLASS_SUBNETS_READY: &str = "SubnetsReady";
/// EC2NodeClass condition: at least one security group matched the selectors.
pub const EC2NODECLASS_SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// EC2NodeClass condition: at least one AMI matched the selectors.
pub const EC2NODECLASS_AMIS_READY: &str = "AMIsReady";
/// EC2NodeClass condition: the instance profile exists (created from `role` or given).
pub const EC2NODECLASS_INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// EC2NodeClass condition: the capacity reservation selectors resolved.
pub const EC2NODECLASS_CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
/// EC2NodeClass condition: launch parameters passed the provider's dry-run checks.
pub const EC2NODECLASS_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";

// Tag maps in selector terms: non-empty keys and values ("*" is the any-value wildcard).
const TAGS_NOT_EMPTY: &str = "self.all(k, k != '' && self[k] != '')";
const TAGS_NOT_EMPTY_MESSAGE: &str = "tag keys and values must not be empty";

/// Desired state of an EC2NodeClass.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    derive = "PartialEq",
    plural = "ec2nodeclasses",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    status = "EC2NodeClassStatus",
    doc = "AWS launch settings for nodes: subnets, security groups, AMIs, IAM, kubelet and disks.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Role",
        type_ = "string",
        json_path = ".spec.role",
        priority = 1
    )
)]
#[x_kube(
    validation = Rule::new("has(self.role) != has(self.instanceProfile)").message("set exactly one of 'role' and 'instanceProfile'"),
    validation = Rule::new("has(self.amiFamily) || self.amiSelectorTerms.exists(t, has(t.alias))").message("'amiFamily' is required unless an amiSelectorTerm uses an alias"),
    validation = Rule::new("!has(self.amiFamily) || self.amiFamily == 'Custom' || self.amiSelectorTerms.all(t, !has(t.alias) || t.alias.split('@')[0] == self.amiFamily.lowerAscii())").message("with an alias, 'amiFamily' must be the alias's family or 'Custom'")
)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// Which subnets nodes may launch in; terms are ORed.
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.size() != 0").message("subnetSelectorTerms must not be empty"),
        validation = Rule::new("self.all(t, has(t.tags) || has(t.id))").message("each subnet selector term needs 'tags' or 'id'"),
        validation = Rule::new("!self.exists(t, has(t.id) && has(t.tags))").message("a subnet selector term with 'id' cannot have other fields")
    )]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Which security groups nodes get; terms are ORed.
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.size() != 0").message("securityGroupSelectorTerms must not be empty"),
        validation = Rule::new("self.all(t, has(t.tags) || has(t.id) || has(t.name))").message("each security group selector term needs 'tags', 'id' or 'name'"),
        validation = Rule::new("!self.exists(t, has(t.id) && (has(t.tags) || has(t.name)))").message("a security group selector term with 'id' cannot have other fields"),
        validation = Rule::new("!self.exists(t, has(t.name) && (has(t.tags) || has(t.id)))").message("a security group selector term with 'name' cannot have other fields")
    )]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which capacity reservations nodes may launch into; terms are ORed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.all(t, has(t.tags) || has(t.id) || has(t.instanceMatchCriteria))").message("each capacity reservation selector term needs 'tags', 'id' or 'instanceMatchCriteria'"),
        validation = Rule::new("!self.exists(t, has(t.id) && (has(t.tags) || has(t.ownerID) || has(t.instanceMatchCriteria)))").message("a capacity reservation selector term with 'id' cannot have other fields")
    )]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// Whether instances get a public IPv4 address; unset follows the subnet's setting.
    #[serde(
        rename = "associatePublicIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Which AMIs nodes boot; terms are ORed.
    #[schemars(length(min = 1, max = 30))]
    #[x_kube(
        validation = Rule::new("self.all(t, has(t.tags) || has(t.id) || has(t.name) || has(t.alias) || has(t.ssmParameter))").message("each AMI selector term needs one of 'tags', 'id', 'name', 'alias' or 'ssmParameter'"),
        validation = Rule::new("!self.exists(t, has(t.id) && (has(t.alias) || has(t.tags) || has(t.name) || has(t.owner)))").message("an AMI selector term with 'id' cannot have other fields"),
        validation = Rule::new("!self.exists(t, has(t.alias) && (has(t.id) || has(t.tags) || has(t.name) || has(t.owner)))").message("an AMI selector term with 'alias' cannot have other fields"),
        validation = Rule::new("!self.exists(t, has(t.alias)) || self.size() == 1").message("an 'alias' AMI selector term must be the only term")
    )]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// Bootstrap format and default disks; inferred from an alias when one is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    /// User data merged with the bootstrap configuration the provider generates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for nodes; an instance profile is created for it. Exclusive with `instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("role must not be empty"))]
    pub role: Option<String>,
    /// An existing IAM instance profile for nodes. Exclusive with `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("instanceProfile must not be empty"))]
    pub instance_profile: Option<String>,
    /// Tags put on instances, volumes and launch templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new("self.all(k, k != '')").message("tag keys must not be empty"),
        validation = Rule::new("self.all(k, k != 'eks:eks-cluster-name')").message("the tag 'eks:eks-cluster-name' is reserved"),
        validation = Rule::new("self.all(k, !k.startsWith('kubernetes.io/cluster'))").message("tags starting with 'kubernetes.io/cluster' are reserved"),
        validation = Rule::new("self.all(k, k != 'karpenter.sh/nodepool')").message("the tag 'karpenter.sh/nodepool' is reserved"),
        validation = Rule::new("self.all(k, k != 'karpenter.sh/nodeclaim')").message("the tag 'karpenter.sh/nodeclaim' is reserved"),
        validation = Rule::new("self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')").message("the tag 'karpenter.k8s.aws/ec2nodeclass' is reserved")
    )]
    pub tags: Option<BTreeMap<String, String>>,
    /// Kubelet settings; the ones that change allocatable resources also affect scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Disks attached at launch; unset uses the AMI family's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[x_kube(validation = Rule::new("self.filter(m, has(m.rootVolume) && m.rootVolume).size() <= 1").message("at most one block device mapping may be the root volume"))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// How to use instance-store NVMe disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Whether CloudWatch detailed (1-minute) monitoring is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service settings; defaults to IMDSv2 only, hop limit 1.
    #[serde(default)]
    pub metadata_options: MetadataOptions,
    /// Reserved EC2 Fleet `Context` value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// Selects subnets by tags or by id.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry; `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new(TAGS_NOT_EMPTY).message(TAGS_NOT_EMPTY_MESSAGE))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Subnet id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// Selects security groups by tags, id or group name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SecurityGroupSelectorTerm {
    /// Tags the group must carry; `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new(TAGS_NOT_EMPTY).message(TAGS_NOT_EMPTY_MESSAGE))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Security group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// Security group name (the group's name, not its Name tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Selects capacity reservations (ODCRs, capacity blocks).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new(TAGS_NOT_EMPTY).message(TAGS_NOT_EMPTY_MESSAGE))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Reservation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// Owning AWS account.
    #[serde(rename = "ownerID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

/// How instances are matched to a capacity reservation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMatchCriteria {
    Open,
    Targeted,
}

/// Selects AMIs by alias, id, name/owner, tags or SSM parameter.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. `al2023@latest` or `bottlerocket@v1.20.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.matches('^[a-zA-Z0-9]+@.+$')").message("alias must look like 'family@version'"),
        validation = Rule::new("self.split('@')[0] in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']").message("alias family must be one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025"),
        validation = Rule::new("!self.startsWith('windows') || self.split('@')[1] == 'latest'").message("windows aliases only support the version 'latest'")
    )]
    pub alias: Option<String>,
    /// Tags the AMI must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new(TAGS_NOT_EMPTY).message(TAGS_NOT_EMPTY_MESSAGE))]
    pub tags: Option<BTreeMap<String, String>>,
    /// AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// AMI name, wildcards allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Owner account id or alias (`self`, `amazon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Name or ARN of an SSM parameter holding an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// AMI families: they decide the user-data format and default disks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AmiFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

/// Kubelet settings. The reserved resources, eviction thresholds and pod density change how much
/// of an instance pods can use.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent").message("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"),
    validation = Rule::new("!has(self.evictionSoft) || (has(self.evictionSoftGracePeriod) && self.evictionSoft.all(k, k in self.evictionSoftGracePeriod))").message("every evictionSoft signal needs an evictionSoftGracePeriod"),
    validation = Rule::new("!has(self.evictionSoftGracePeriod) || (has(self.evictionSoft) && self.evictionSoftGracePeriod.all(k, k in self.evictionSoft))").message("every evictionSoftGracePeriod signal needs an evictionSoft threshold")
)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(
        rename = "clusterDNS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    /// Most pods a node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Most pods per CPU core (capped by `maxPods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources held back for the OS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new(RESERVED_KEYS).message("systemReserved keys must be cpu, memory, ephemeral-storage or pid"),
        validation = Rule::new(NOT_NEGATIVE).message("systemReserved values must not be negative")
    )]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources held back for the kubelet and container runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new(RESERVED_KEYS).message("kubeReserved keys must be cpu, memory, ephemeral-storage or pid"),
        validation = Rule::new(NOT_NEGATIVE).message("kubeReserved values must not be negative")
    )]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Thresholds at which the kubelet evicts pods at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(EVICTION_SIGNALS).message("evictionHard keys must be eviction signals"))]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Thresholds at which the kubelet evicts pods after a grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(EVICTION_SIGNALS).message("evictionSoft keys must be eviction signals"))]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Grace period per soft eviction signal (durations such as `1m30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(EVICTION_SIGNALS).message("evictionSoftGracePeriod keys must be eviction signals"))]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// Longest pod termination grace period honoured on soft eviction, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage percentage that always triggers image garbage collection.
    #[serde(
        rename = "imageGCHighThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage percentage image garbage collection frees down to.
    #[serde(
        rename = "imageGCLowThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Whether CPU limits are enforced with CFS quota.
    #[serde(
        rename = "cpuCFSQuota",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

const RESERVED_KEYS: &str = "self.all(k, k in ['cpu', 'memory', 'ephemeral-storage', 'pid'])";
const NOT_NEGATIVE: &str = "self.all(k, !self[k].startsWith('-'))";
const EVICTION_SIGNALS: &str =
    "self.all(k, k in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', \
     'imagefs.available', 'imagefs.inodesFree', 'pid.available'])";

/// One disk attached at launch.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// Device name, e.g. `/dev/xvda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume to create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume (at most one mapping).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// An EBS volume.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("has(self.snapshotID) || has(self.volumeSize)").message("an EBS volume needs 'snapshotID' or 'volumeSize'"),
    validation = Rule::new("!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')").message("'volumeInitializationRate' needs 'snapshotID'")
)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (gp3, io1, io2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(rename = "kmsKeyID", default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(
        rename = "snapshotID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Snapshot download rate in MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    /// Size as a quantity in G, Gi, T or Ti (up to 64T).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = VOLUME_SIZE_PATTERN))]
    pub volume_size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

// EBS sizes from 1G up to 64000G / 59000Gi / 64T / 58Ti.
const VOLUME_SIZE_PATTERN: &str = "^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";

/// EBS volume types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    Standard,
    Io1,
    Io2,
    Gp2,
    Sc1,
    St1,
    Gp3,
}

/// Instance-store handling.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum InstanceStorePolicy {
    /// Stripe all instance-store disks into one array used for ephemeral storage.
    RAID0,
}

/// `enabled` or `disabled`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    Enabled,
    Disabled,
}

/// Whether IMDS requires session tokens (IMDSv2).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    Required,
    Optional,
}

/// Instance metadata service options. Each field defaults separately, so a partial object keeps
/// the safe defaults for the rest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default = "enabled")]
    pub http_endpoint: Toggle,
    #[serde(rename = "httpProtocolIPv6", default = "disabled")]
    pub http_protocol_ipv6: Toggle,
    /// Network hops an IMDS response may travel; 1 keeps it away from pods on the pod network.
    #[serde(default = "hop_limit")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    #[serde(default = "required")]
    pub http_tokens: HttpTokens,
}

fn enabled() -> Toggle {
    Toggle::Enabled
}

fn disabled() -> Toggle {
    Toggle::Disabled
}

fn hop_limit() -> i64 {
    1
}

fn required() -> HttpTokens {
    HttpTokens::Required
}

impl Default for MetadataOptions {
    fn default() -> Self {
        MetadataOptions {
            http_endpoint: enabled(),
            http_protocol_ipv6: disabled(),
            http_put_response_hop_limit: hop_limit(),
            http_tokens: required(),
        }
    }
}

/// Observed state of an EC2NodeClass: what the selectors resolved to.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Subnets the selectors matched, with their zones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// Security groups the selectors matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// Capacity reservations the selectors matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// AMIs the selectors matched, each with the requirements of the nodes it serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    /// The instance profile nodes are launched with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Current conditions (`SubnetsReady`, `AMIsReady`, ..., `Ready`).
    #[serde(
        default,
        deserialize_with = "deserialize_conditions",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// A resolved subnet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    #[serde(rename = "zoneID", default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// A resolved security group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct SecurityGroup {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI and the node requirements (architecture, GPU, ...) it applies to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Ami {
    pub id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// A resolved capacity reservation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    pub availability_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    pub id: String,
    pub instance_match_criteria: InstanceMatchCriteria,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` (ODCR) or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// Whether the reserved capacity can be interrupted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interruptible: bool,
    /// `active` or `expiring`.
    #[serde(default = "default_reservation_state")]
    pub state: String,
}

fn default_reservation_type() -> String {
    "default".to_string()
}

fn default_reservation_state() -> String {
    "active".to_string()
}

impl EC2NodeClass {
    /// The AMI family: the explicit one, else the one an alias names.
    pub fn ami_family(&self) -> Option<AmiFamily> {
        if self.spec.ami_family.is_some() {
            return self.spec.ami_family;
        }
        let alias = self
            .spec
            .ami_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref())?;
        match alias.split('@').next()? {
            "al2" => Some(AmiFamily::AL2),
            "al2023" => Some(AmiFamily::AL2023),
            "bottlerocket" => Some(AmiFamily::Bottlerocket),
            "windows2019" => Some(AmiFamily::Windows2019),
            "windows2022" => Some(AmiFamily::Windows2022),
            "windows2025" => Some(AmiFamily::Windows2025),
            _ => None,
        }
    }
}

super::common::has_conditions!(EC2NodeClass, EC2NodeClassStatus);

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
"#;

    #[test]
    fn minimal_nodeclass_gets_metadata_defaults() {
        let nc: EC2NodeClass =
            serde_yaml_ng::from_str(MINIMAL).expect("minimal EC2NodeClass reads");
        assert_eq!(nc.spec.metadata_options, MetadataOptions::default());
        assert_eq!(nc.ami_family(), Some(AmiFamily::AL2023));
        let partial = MINIMAL.to_string() + "  metadataOptions: {httpPutResponseHopLimit: 2}\n";
        let nc: EC2NodeClass = serde_yaml_ng::from_str(&partial).expect("EC2NodeClass reads");
        let opts = nc.spec.metadata_options;
        assert_eq!(
            (opts.http_put_response_hop_limit, opts.http_tokens),
            (2, HttpTokens::Required)
        );
    }

    #[test]
    fn full_nodeclass_round_trips() {
        let text = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: full}
spec:
  instanceProfile: KarpenterNodeInstanceProfile
  amiFamily: Custom
  amiSelectorTerms: [{name: my-ami-*, owner: self}, {id: ami-0123abcd}, {ssmParameter: /my/ami}]
  subnetSelectorTerms: [{id: subnet-0a1b}, {tags: {Name: private-*}}]
  securityGroupSelectorTerms: [{name: nodes}, {id: sg-0a1b}]
  capacityReservationSelectorTerms: [{ownerID: "123456789012", tags: {team: a}}, {instanceMatchCriteria: open}]
  associatePublicIPAddress: false
  userData: "echo hi"
  tags: {team: a}
  kubelet:
    clusterDNS: [10.0.0.10]
    maxPods: 110
    podsPerCore: 4
    systemReserved: {cpu: 100m}
    kubeReserved: {memory: 200Mi}
    evictionHard: {memory.available: 5%}
    evictionSoft: {nodefs.available: 10%}
    evictionSoftGracePeriod: {nodefs.available: 1m30s}
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
  blockDeviceMappings:
  - deviceName: /dev/xvda
    rootVolume: true
    ebs: {volumeSize: 100Gi, volumeType: gp3, iops: 3000, throughput: 125, encrypted: true, kmsKeyID: k, deleteOnTermination: true}
  instanceStorePolicy: RAID0
  detailedMonitoring: true
  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: enabled, httpPutResponseHopLimit: 2, httpTokens: optional}
  context: ctx
status:
  subnets: [{id: subnet-0a1b, zone: us-east-1a, zoneID: use1-az1}]
  securityGroups: [{id: sg-0a1b, name: nodes}]
  amis: [{id: ami-0123abcd, name: my-ami, requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]
  capacityReservations:
  - {availabilityZone: us-east-1a, id: cr-0a1b, instanceMatchCriteria: open, instanceType: m5.large, ownerID: "123456789012"}
  instanceProfile: KarpenterNodeInstanceProfile
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;
        let nc: EC2NodeClass = serde_yaml_ng::from_str(text).expect("full EC2NodeClass reads");
        assert_eq!(nc.ami_family(), Some(AmiFamily::Custom));
        let kubelet = nc.spec.kubelet.as_ref().expect("kubelet");
        assert_eq!(
            kubelet.cluster_dns.as_deref(),
            Some(&["10.0.0.10".to_string()][..])
        );
        let status = nc.status.as_ref().expect("status");
        assert_eq!(status.capacity_reservations[0].reservation_type, "default");
        let json = serde_json::to_value(&nc).expect("EC2NodeClass serializes");
        assert_eq!(json["spec"]["kubelet"]["cpuCFSQuota"], true);
        assert_eq!(
            json["spec"]["metadataOptions"]["httpProtocolIPv6"],
            "enabled"
        );
        let back: EC2NodeClass = serde_json::from_value(json).expect("EC2NodeClass reads back");
        assert_eq!(back, nc);
    }
}
