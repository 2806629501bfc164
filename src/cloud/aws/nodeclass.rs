//! EC2NodeClass resolution: the selector terms of an EC2NodeClass become concrete subnets, security
//! groups and AMIs, the way Karpenter's subnet, security group and AMI providers resolve them.
//!
//! Terms are ORed and each term's fields ANDed: every term is one Describe call with EC2 filters
//! (`tag:K=V`, `tag-key=K` for the `*` wildcard, ids, names) and the answers are unioned by id. AMI
//! aliases (`al2023@latest`, `bottlerocket@v1.20.0`, ...) and `ssmParameter` terms go through SSM
//! to an image id first. The result is a [`ResolvedNodeClass`], which launches read (one subnet per
//! zone, the newest usable AMI per architecture), and an [`EC2NodeClassStatus`] with the
//! `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady` and `Ready`
//! conditions the operator writes back.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image};
use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use super::{AwsClients, AwsError, AwsSettings};
use crate::api::READY;
use crate::api::{
    Ami, AmiFamily, AmiSelectorTerm, EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus,
    SecurityGroup, Subnet, EC2NODECLASS_AMIS_READY, EC2NODECLASS_INSTANCE_PROFILE_READY,
    EC2NODECLASS_SECURITY_GROUPS_READY, EC2NODECLASS_SUBNETS_READY,
};
use crate::catalog::Arch;
use crate::domain::labels::ARCH;

/// A subnet a node may launch in.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub free_ips: i64,
}

/// An AMI nodes of one architecture may boot.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedAmi {
    pub id: String,
    pub name: Option<String>,
    pub arch: Arch,
    pub created: String,
    pub deprecated: bool,
}

/// What an EC2NodeClass resolved to; launches read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedNodeClass {
    pub name: String,
    pub family: AmiFamily,
    pub subnets: Vec<ResolvedSubnet>,
    pub security_groups: Vec<SecurityGroup>,
    /// Newest first within an architecture; non-deprecated before deprecated.
    pub amis: Vec<ResolvedAmi>,
    pub instance_profile: String,
    pub spec: EC2NodeClassSpec,
}

impl ResolvedNodeClass {
    /// The subnet of `zone` with the most free addresses (ties: the lower id, for determinism).
    pub fn subnet_in(&self, zone: &str) -> Option<&ResolvedSubnet> {
        self.subnets
            .iter()
            .filter(|s| s.zone == zone)
            .max_by(|a, b| a.free_ips.cmp(&b.free_ips).then(b.id.cmp(&a.id)))
    }

    /// The AMI a node of `arch` boots: the newest non-deprecated one, else the newest deprecated.
    pub fn ami_for(&self, arch: Arch) -> Option<&ResolvedAmi> {
        self.amis.iter().find(|a| a.arch == arch)
    }

    /// Whether both resolutions give the same launch templates: everything but the subnets, whose
    /// free-address counts change with every launch and which go into the fleet's overrides.
    pub fn same_templates(&self, other: &ResolvedNodeClass) -> bool {
        self.name == other.name
            && self.family == other.family
            && self.security_groups == other.security_groups
            && self.amis == other.amis
            && self.instance_profile == other.instance_profile
            && self.spec == other.spec
    }
}

/// The outcome of resolving one EC2NodeClass: the status to write, and the resolution when every
/// part resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub status: EC2NodeClassStatus,
    pub resolved: Option<ResolvedNodeClass>,
}

/// The EC2 filters of a tag map: `*` matches any value (a `tag-key` filter).
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                filter("tag-key", k)
            } else {
                filter(&format!("tag:{k}"), v)
            }
        })
        .collect()
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// Why an `amiSelectorTerms[].alias` names no SSM parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("alias {0:?} is not family@version")]
    NotFamilyAtVersion(String),
    #[error("alias family {0:?} is not al2, al2023 or bottlerocket")]
    UnknownFamily(String),
}

/// Why an EC2NodeClass's selectors do not resolve; the message becomes its status condition.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Aws(#[from] AwsError),
    #[error(transparent)]
    Alias(#[from] AliasError),
    #[error("ssm parameter {0} not found")]
    ParameterNotFound(String),
    #[error("set spec.role or spec.instanceProfile")]
    NoRoleOrProfile,
}

/// The SSM parameter that holds the image id of an alias for one architecture and Kubernetes
/// version (the EKS-optimized and Bottlerocket public parameters).
pub fn alias_parameter(alias: &str, arch: Arch, k8s_version: &str) -> Result<String, AliasError> {
    let (family, version) = alias
        .split_once('@')
        .ok_or_else(|| AliasError::NotFamilyAtVersion(alias.to_string()))?;
    let a = match arch {
        Arch::Amd64 => "x86_64",
        Arch::Arm64 => "arm64",
    };
    match (family, version) {
        ("al2023", "latest") => Ok(format!("/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023/{a}/standard/recommended/image_id")),
        ("al2023", v) => Ok(format!("/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023/{a}/standard/amazon-eks-node-al2023-{a}-standard-{k8s_version}-{v}/image_id")),
        ("al2", v) => {
            let variant = if arch == Arch::Arm64 { "amazon-linux-2-arm64" } else { "amazon-linux-2" };
            let release = if v == "latest" { "recommended".to_string() } else { format!("amazon-eks-{}node-{k8s_version}-{v}", if arch == Arch::Arm64 { "arm64-" } else { "" }) };
            Ok(format!("/aws/service/eks/optimized-ami/{k8s_version}/{variant}/{release}/image_id"))
        }
        ("bottlerocket", v) => Ok(format!("/aws/service/bottlerocket/aws-k8s-{k8s_version}/{a}/{}/image_id", v.trim_start_matches('v'))),
        _ => Err(AliasError::UnknownFamily(family.to_string())),
    }
}

/// Resolves `nc` against EC2, SSM and (for a role) IAM. `k8s_version` (`1.33`) picks the alias
/// parameters.
pub async fn resolve(
    clients: &AwsClients,
    settings: &AwsSettings,
    nc: &EC2NodeClass,
    k8s_version: &str,
) -> Resolution {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let mut status = EC2NodeClassStatus {
        conditions: nc
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
        ..Default::default()
    };
    let subnets = subnets(clients, &nc.spec).await;
    let groups = security_groups(clients, &nc.spec).await;
    let amis = amis(clients, nc, k8s_version).await;
    let profile = match (&nc.spec.instance_profile, &nc.spec.role) {
        (Some(p), _) => Ok(p.clone()),
        (None, Some(role)) => super::profile::ensure(
            clients,
            &settings.region,
            &settings.cluster_name,
            &name,
            role,
        )
        .await
        .map_err(ResolveError::from),
        (None, None) => Err(ResolveError::NoRoleOrProfile),
    };
    set(
        &mut status,
        EC2NODECLASS_SUBNETS_READY,
        found(
            &subnets,
            "SubnetsNotFound",
            "no subnet matched subnetSelectorTerms",
        ),
    );
    set(
        &mut status,
        EC2NODECLASS_SECURITY_GROUPS_READY,
        found(
            &groups,
            "SecurityGroupsNotFound",
            "no security group matched securityGroupSelectorTerms",
        ),
    );
    set(
        &mut status,
        EC2NODECLASS_AMIS_READY,
        found(&amis, "AMINotFound", "no AMI matched amiSelectorTerms"),
    );
    set(
        &mut status,
        EC2NODECLASS_INSTANCE_PROFILE_READY,
        profile
            .as_ref()
            .map(|_| ())
            .map_err(|m| ("InstanceProfileNotFound", m.to_string())),
    );
    let parts = [
        found(&subnets, "", "no subnet matched subnetSelectorTerms"),
        found(
            &groups,
            "",
            "no security group matched securityGroupSelectorTerms",
        ),
        found(&amis, "", "no AMI matched amiSelectorTerms"),
        profile
            .as_ref()
            .map(|_| ())
            .map_err(|m| ("", m.to_string())),
    ];
    let all: Option<String> = parts.into_iter().find_map(|r| r.err().map(|(_, m)| m));
    set(
        &mut status,
        READY,
        match &all {
            None => Ok(()),
            Some(m) => Err(("NotReady", m.clone())),
        },
    );
    let (Ok(subnets), Ok(groups), Ok(amis), Ok(profile)) = (subnets, groups, amis, profile) else {
        return Resolution {
            status,
            resolved: None,
        };
    };
    status.subnets = subnets
        .iter()
        .map(|s| Subnet {
            id: s.id.clone(),
            zone: s.zone.clone(),
            zone_id: s.zone_id.clone(),
        })
        .collect();
    status.security_groups = groups.clone();
    status.amis = amis.iter().map(ami_status).collect();
    status.instance_profile = Some(profile.clone());
    let family = nc.ami_family().unwrap_or(AmiFamily::Custom);
    let resolved = ResolvedNodeClass {
        name,
        family,
        subnets,
        security_groups: groups,
        amis,
        instance_profile: profile,
        spec: nc.spec.clone(),
    };
    Resolution {
        status,
        resolved: Some(resolved),
    }
}

fn found<T>(
    r: &Result<Vec<T>, ResolveError>,
    reason: &'static str,
    none: &str,
) -> Result<(), (&'static str, String)> {
    match r {
        Ok(v) if !v.is_empty() => Ok(()),
        Ok(_) => Err((reason, none.to_string())),
        Err(m) => Err((reason, m.to_string())),
    }
}

fn set(status: &mut EC2NodeClassStatus, kind: &str, r: Result<(), (&'static str, String)>) {
    let (ok, reason, message) = match r {
        Ok(()) => (true, kind.to_string(), String::new()),
        Err((reason, m)) => (false, reason.to_string(), m),
    };
    crate::api::set_condition(
        &mut status.conditions,
        kind,
        ok,
        &reason,
        &message,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
}

fn ami_status(a: &ResolvedAmi) -> Ami {
    let req = NodeSelectorRequirement {
        key: ARCH.to_string(),
        operator: "In".into(),
        values: Some(vec![a.arch.as_str().to_string()]),
    };
    Ami {
        id: a.id.clone(),
        deprecated: a.deprecated,
        name: a.name.clone(),
        requirements: vec![req],
    }
}

async fn subnets(
    clients: &AwsClients,
    spec: &EC2NodeClassSpec,
) -> Result<Vec<ResolvedSubnet>, ResolveError> {
    let mut out: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
    for term in &spec.subnet_selector_terms {
        let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
        if let Some(id) = &term.id {
            filters.push(filter("subnet-id", id));
        }
        let found = clients
            .ec2
            .describe_subnets()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await;
        for s in found.map_err(|e| AwsError::from_sdk("ec2:DescribeSubnets", e))? {
            let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            let free = s.available_ip_address_count().unwrap_or(0).into();
            out.insert(
                id.to_string(),
                ResolvedSubnet {
                    id: id.to_string(),
                    zone: zone.to_string(),
                    zone_id: s.availability_zone_id().map(str::to_string),
                    free_ips: free,
                },
            );
        }
    }
    Ok(out.into_values().collect())
}

async fn security_groups(
    clients: &AwsClients,
    spec: &EC2NodeClassSpec,
) -> Result<Vec<SecurityGroup>, ResolveError> {
    let mut out: BTreeMap<String, SecurityGroup> = BTreeMap::new();
    for term in &spec.security_group_selector_terms {
        let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
        if let Some(id) = &term.id {
            filters.push(filter("group-id", id));
        }
        if let Some(name) = &term.name {
            filters.push(filter("group-name", name));
        }
        let found = clients
            .ec2
            .describe_security_groups()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await;
        for g in found.map_err(|e| AwsError::from_sdk("ec2:DescribeSecurityGroups", e))? {
            let Some(id) = g.group_id() else { continue };
            out.insert(
                id.to_string(),
                SecurityGroup {
                    id: id.to_string(),
                    name: g.group_name().map(str::to_string),
                },
            );
        }
    }
    Ok(out.into_values().collect())
}

async fn amis(
    clients: &AwsClients,
    nc: &EC2NodeClass,
    k8s_version: &str,
) -> Result<Vec<ResolvedAmi>, ResolveError> {
    let mut images: BTreeMap<String, Image> = BTreeMap::new();
    for term in &nc.spec.ami_selector_terms {
        for image in images_of(clients, term, k8s_version).await? {
            if let Some(id) = image.image_id() {
                images.insert(id.to_string(), image);
            }
        }
    }
    let now = chrono::Utc::now();
    let mut out: Vec<ResolvedAmi> = images.values().filter_map(|i| usable(i, now)).collect();
    newest_first(&mut out);
    Ok(out)
}

/// By architecture; within one, usable before deprecated, then newest first (ties by id).
fn newest_first(amis: &mut [ResolvedAmi]) {
    amis.sort_by(|a, b| {
        (a.arch, a.deprecated, std::cmp::Reverse(&a.created), &a.id).cmp(&(
            b.arch,
            b.deprecated,
            std::cmp::Reverse(&b.created),
            &b.id,
        ))
    });
}

/// An image Kubernetes nodes can boot (x86_64 or arm64), with its deprecation as of `now`.
fn usable(i: &Image, now: chrono::DateTime<chrono::Utc>) -> Option<ResolvedAmi> {
    let arch = match i.architecture()?.as_str() {
        "x86_64" => Arch::Amd64,
        "arm64" => Arch::Arm64,
        _ => return None,
    };
    let deprecated = i
        .deprecation_time()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t <= now);
    Some(ResolvedAmi {
        id: i.image_id()?.to_string(),
        name: i.name().map(str::to_string),
        arch,
        created: i.creation_date().unwrap_or_default().to_string(),
        deprecated,
    })
}

/// The images one AMI selector term names.
async fn images_of(
    clients: &AwsClients,
    term: &AmiSelectorTerm,
    k8s_version: &str,
) -> Result<Vec<Image>, ResolveError> {
    let mut ids = vec![];
    if let Some(alias) = &term.alias {
        for arch in [Arch::Amd64, Arch::Arm64] {
            let path = alias_parameter(alias, arch, k8s_version)?;
            // a family without an arm64 (or x86_64) build has no parameter for it: skip that arch
            if let Some(id) = parameter(clients, &path).await? {
                ids.push(id);
            }
        }
        return describe_images(clients, vec![], ids, vec![]).await;
    }
    if let Some(p) = &term.ssm_parameter {
        let id = parameter(clients, p)
            .await?
            .ok_or_else(|| ResolveError::ParameterNotFound(p.clone()))?;
        return describe_images(clients, vec![], vec![id], vec![]).await;
    }
    let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
    if let Some(name) = &term.name {
        filters.push(filter("name", name));
    }
    if let Some(id) = &term.id {
        ids.push(id.clone());
    }
    // a name alone could match anyone's image: like Karpenter, trust only our own and Amazon's
    let owners = match (&term.owner, &term.name) {
        (Some(o), _) => vec![o.clone()],
        (None, Some(_)) => vec!["self".to_string(), "amazon".to_string()],
        _ => vec![],
    };
    describe_images(clients, filters, ids, owners).await
}

async fn describe_images(
    clients: &AwsClients,
    filters: Vec<Filter>,
    ids: Vec<String>,
    owners: Vec<String>,
) -> Result<Vec<Image>, ResolveError> {
    let mut call = clients.ec2.describe_images().set_filters(Some(filters));
    if !ids.is_empty() {
        call = call.set_image_ids(Some(ids));
    }
    if !owners.is_empty() {
        call = call.set_owners(Some(owners));
    }
    let found = call
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await;
    found.map_err(|e| AwsError::from_sdk("ec2:DescribeImages", e).into())
}

/// An SSM parameter's value, None when it does not exist.
async fn parameter(clients: &AwsClients, name: &str) -> Result<Option<String>, AwsError> {
    match clients.ssm.get_parameter().name(name).send().await {
        Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
        Err(e) => {
            let e = AwsError::from_sdk("ssm:GetParameter", e);
            if e.code() == Some("ParameterNotFound") {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_tag_becomes_a_tag_key_filter() {
        let tags: BTreeMap<String, String> = [
            ("karpenter.sh/discovery".into(), "prod".into()),
            ("tier".into(), "*".into()),
        ]
        .into();
        let f = tag_filters(&tags);
        assert_eq!(f[0].name(), Some("tag:karpenter.sh/discovery"));
        assert_eq!(f[0].values(), ["prod"]);
        assert_eq!(f[1].name(), Some("tag-key"));
        assert_eq!(f[1].values(), ["tier"]);
    }

    #[test]
    fn aliases_map_to_the_public_parameters() {
        assert_eq!(alias_parameter("al2023@latest", Arch::Arm64, "1.33").as_deref(), Ok("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"));
        assert_eq!(
            alias_parameter("al2023@v20250101", Arch::Amd64, "1.33").as_deref(),
            Ok("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250101/image_id")
        );
        assert_eq!(
            alias_parameter("al2@latest", Arch::Arm64, "1.30").as_deref(),
            Ok("/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id")
        );
        assert_eq!(
            alias_parameter("bottlerocket@v1.20.0", Arch::Amd64, "1.33").as_deref(),
            Ok("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.20.0/image_id")
        );
        assert!(alias_parameter("ubuntu@latest", Arch::Amd64, "1.33").is_err());
        assert!(alias_parameter("al2023", Arch::Amd64, "1.33").is_err());
    }

    fn image(id: &str, arch: &str, created: &str, deprecation: Option<&str>) -> Image {
        let b = Image::builder()
            .image_id(id)
            .architecture(arch.into())
            .creation_date(created);
        match deprecation {
            Some(d) => b.deprecation_time(d).build(),
            None => b.build(),
        }
    }

    #[test]
    fn the_newest_non_deprecated_image_wins_per_architecture() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .expect("time")
            .to_utc();
        let imgs = [
            image("ami-old", "x86_64", "2026-01-01T00:00:00.000Z", None),
            image(
                "ami-new-deprecated",
                "x86_64",
                "2026-05-01T00:00:00.000Z",
                Some("2026-05-15T00:00:00.000Z"),
            ),
            image(
                "ami-mid",
                "x86_64",
                "2026-03-01T00:00:00.000Z",
                Some("2027-01-01T00:00:00.000Z"),
            ),
            image("ami-arm", "arm64", "2026-02-01T00:00:00.000Z", None),
            image("ami-mac", "x86_64_mac", "2026-05-01T00:00:00.000Z", None),
        ];
        let mut amis: Vec<ResolvedAmi> = imgs.iter().filter_map(|i| usable(i, now)).collect();
        newest_first(&mut amis);
        let nc = ResolvedNodeClass { name: "n".into(), family: AmiFamily::AL2023, subnets: vec![], security_groups: vec![], amis, instance_profile: "p".into(), spec: serde_json::from_value(serde_json::json!({"subnetSelectorTerms": [], "securityGroupSelectorTerms": [], "amiSelectorTerms": []})).expect("spec") };
        assert_eq!(
            nc.ami_for(Arch::Amd64).map(|a| a.id.as_str()),
            Some("ami-mid")
        );
        assert_eq!(
            nc.ami_for(Arch::Arm64).map(|a| a.id.as_str()),
            Some("ami-arm")
        );
        assert_eq!(nc.amis.len(), 4, "the mac image is not usable");
    }
}
