//! Launching one node: launch templates and CreateFleet.
//!
//! A request's offerings are grouped by capacity type in the order the plan gave them (one fleet
//! cannot mix spot and on-demand). For each group, every offering becomes an override (instance
//! type and the zone's subnet with the most free addresses) of the launch template its options
//! need: the AMI of its architecture and the user data for its pod density. Templates are named
//! after a hash of their resolved options, so identical requests share one and a changed
//! EC2NodeClass makes new ones; they are created on first use and remembered. The group is launched
//! with CreateFleet `instant` for one instance (lowest-price for on-demand,
//! price-capacity-optimized for spot). When EC2 answers with insufficient-capacity errors and no
//! instance, the next group is tried; the offerings that failed are returned so the caller keeps
//! them out of later solves.

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceLifecycle,
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest,
    OnDemandOptionsRequest, RequestLaunchTemplateData, ResourceType, SpotAllocationStrategy,
    SpotOptionsRequest, Tag, TagSpecification, TargetCapacitySpecificationRequest,
};
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::nodeclass::ResolvedNodeClass;
use super::userdata::{user_data, Bootstrap};
use super::{
    cluster_tag_key, AwsClients, AwsError, AwsSettings, CLUSTER_NAME_TAG, NODECLAIM_TAG,
    NODECLASS_TAG, NODEPOOL_TAG,
};
use crate::api::{AmiFamily, BlockDeviceMapping, HttpTokens, Toggle};
use crate::catalog::{CapacityType, Catalog};
use crate::cloud::{LaunchRequest, OfferingKey};
use crate::domain::labels::Taint;
use crate::optimizer::OfferingRef;

/// EC2 error codes that mean "no capacity for this offering now": the offering is kept out of
/// solves for a while instead of failing the claim (Karpenter's list).
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 6] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
];

/// Taint every node registers with until joiner has registered its NodeClaim.
const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";

/// Everything a launch template holds; its hash names the template.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateOptions {
    pub image_id: String,
    pub instance_profile: String,
    pub security_groups: Vec<String>,
    pub user_data: String,
    pub block_devices: Vec<BlockDeviceMapping>,
    pub http_endpoint: bool,
    pub http_ipv6: bool,
    pub http_tokens_required: bool,
    pub hop_limit: i64,
    pub public_ip: Option<bool>,
    pub detailed_monitoring: bool,
    pub tags: BTreeMap<String, String>,
}

impl TemplateOptions {
    /// `joiner/<cluster>/<first 16 hex digits of the options' SHA-256>`.
    pub fn name(&self, cluster: &str) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("joiner/{cluster}/{hex}")
    }
}

/// One launch template's overrides: the offerings it serves and their subnets.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateGroup {
    pub options: TemplateOptions,
    pub overrides: Vec<(OfferingRef, String)>,
}

/// A planned fleet: one capacity type, one or more templates.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPlan {
    pub capacity_type: CapacityType,
    pub groups: Vec<TemplateGroup>,
    /// Offerings the node class cannot launch (no subnet in the zone, no AMI for the architecture).
    pub skipped: Vec<OfferingKey>,
}

/// The tags every instance and volume of a claim carries.
pub fn instance_tags(
    settings: &AwsSettings,
    nc: &ResolvedNodeClass,
    request: &LaunchRequest,
) -> BTreeMap<String, String> {
    let mut tags = nc.spec.tags.clone().unwrap_or_default();
    tags.insert(cluster_tag_key(&settings.cluster_name), "owned".into());
    tags.insert(CLUSTER_NAME_TAG.into(), settings.cluster_name.clone());
    tags.insert(NODEPOOL_TAG.into(), request.nodepool.clone());
    tags.insert(NODECLAIM_TAG.into(), request.claim.clone());
    tags.insert(NODECLASS_TAG.into(), nc.name.clone());
    tags.insert(
        "Name".into(),
        format!("{}/{}", request.nodepool, request.claim),
    );
    tags
}

/// The fleets to try for `request`, one per capacity type in the order its offerings come.
pub fn plan_fleets(
    settings: &AwsSettings,
    nc: &ResolvedNodeClass,
    catalog: &Catalog,
    request: &LaunchRequest,
) -> Result<Vec<FleetPlan>, AwsError> {
    let mut fleets: Vec<FleetPlan> = vec![];
    for o in &request.offerings {
        let at = match fleets
            .iter()
            .position(|f| f.capacity_type == o.capacity_type)
        {
            Some(i) => i,
            None => {
                fleets.push(FleetPlan {
                    capacity_type: o.capacity_type,
                    groups: vec![],
                    skipped: vec![],
                });
                fleets.len() - 1
            }
        };
        let fleet = &mut fleets[at];
        let subnet = nc.subnet_in(&o.zone);
        let it = catalog
            .instance_types
            .iter()
            .find(|t| t.name == o.instance_type);
        let ami = it.and_then(|t| nc.ami_for(t.arch));
        let (Some(subnet), Some(it), Some(ami)) = (subnet, it, ami) else {
            fleet.skipped.push(o.into());
            continue;
        };
        let pods = it.pods(request.template.kubelet.as_ref());
        let options = template_options(settings, nc, request, &ami.id, pods)?;
        match fleet.groups.iter_mut().find(|g| g.options == options) {
            Some(g) => g.overrides.push((o.clone(), subnet.id.clone())),
            None => fleet.groups.push(TemplateGroup {
                options,
                overrides: vec![(o.clone(), subnet.id.clone())],
            }),
        }
    }
    Ok(fleets)
}

fn template_options(
    settings: &AwsSettings,
    nc: &ResolvedNodeClass,
    request: &LaunchRequest,
    image: &str,
    pods: u32,
) -> Result<TemplateOptions, AwsError> {
    let t = &request.template;
    let mut labels: BTreeMap<String, String> = t
        .labels
        .iter()
        .filter(|(k, _)| kubelet_may_set(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(NODEPOOL_TAG.into(), request.nodepool.clone());
    let mut taints: Vec<Taint> = t.taints.iter().chain(&t.startup_taints).cloned().collect();
    taints.push(Taint {
        key: UNREGISTERED_TAINT.into(),
        value: String::new(),
        effect: crate::domain::labels::TaintEffect::NoExecute,
    });
    let bootstrap = Bootstrap {
        cluster_name: &settings.cluster_name,
        cluster_endpoint: &settings.cluster_endpoint,
        ca_bundle: settings.cluster_ca_bundle.as_deref(),
        cluster_cidr: settings.cluster_cidr.as_deref(),
        max_pods: Some(pods),
        labels: &labels,
        taints: &taints,
        kubelet: nc.spec.kubelet.as_ref(),
        custom: nc.spec.user_data.as_deref(),
    };
    let text = user_data(&nc.name, nc.family, &bootstrap)?;
    let meta = &nc.spec.metadata_options;
    let mut tags = nc.spec.tags.clone().unwrap_or_default();
    tags.insert(cluster_tag_key(&settings.cluster_name), "owned".into());
    tags.insert(NODECLASS_TAG.into(), nc.name.clone());
    Ok(TemplateOptions {
        image_id: image.to_string(),
        instance_profile: nc.instance_profile.clone(),
        security_groups: nc.security_groups.iter().map(|g| g.id.clone()).collect(),
        user_data: base64::engine::general_purpose::STANDARD.encode(text),
        block_devices: nc
            .spec
            .block_device_mappings
            .clone()
            .unwrap_or_else(|| default_block_devices(nc.family)),
        http_endpoint: meta.http_endpoint == Toggle::Enabled,
        http_ipv6: meta.http_protocol_ipv6 == Toggle::Enabled,
        http_tokens_required: meta.http_tokens == HttpTokens::Required,
        hop_limit: meta.http_put_response_hop_limit,
        public_ip: nc.spec.associate_public_ip_address,
        detailed_monitoring: nc.spec.detailed_monitoring.unwrap_or(false),
        tags,
    })
}

/// Labels outside the `kubernetes.io` and `k8s.io` domains, or under the prefixes the
/// NodeRestriction admission plugin lets a kubelet set; the rest are applied at registration.
fn kubelet_may_set(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return true;
    };
    let restricted = prefix == "kubernetes.io"
        || prefix == "k8s.io"
        || prefix.ends_with(".kubernetes.io")
        || prefix.ends_with(".k8s.io");
    !restricted
        || prefix.ends_with("kubelet.kubernetes.io")
        || prefix.ends_with("node.kubernetes.io")
}

/// The root volume Karpenter gives each family when the EC2NodeClass names none: 20Gi gp3,
/// encrypted (Bottlerocket: a 4Gi OS volume and a 20Gi data volume).
pub fn default_block_devices(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    let ebs = |size: &str| crate::api::BlockDevice {
        volume_size: Some(size.into()),
        volume_type: Some(crate::api::VolumeType::Gp3),
        encrypted: Some(true),
        delete_on_termination: Some(true),
        ..Default::default()
    };
    let disk = |device: &str, size: &str, root: bool| BlockDeviceMapping {
        device_name: Some(device.into()),
        ebs: Some(ebs(size)),
        root_volume: root,
    };
    match family {
        AmiFamily::Bottlerocket => vec![
            disk("/dev/xvda", "4Gi", false),
            disk("/dev/xvdb", "20Gi", true),
        ],
        AmiFamily::Custom => vec![],
        _ => vec![disk("/dev/xvda", "20Gi", true)],
    }
}

/// EBS sizes are whole GiB: `100Gi`, `100G` (rounded up), `1Ti`, `1T`.
fn volume_gib(size: &str) -> Option<i32> {
    let (n, unit) = size
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| size.split_at(i))?;
    let n: f64 = n.parse().ok()?;
    let gib = match unit {
        "Gi" => n,
        "G" => n * 1e9 / (1u64 << 30) as f64,
        "Ti" => n * 1024.0,
        "T" => n * 1e12 / (1u64 << 30) as f64,
        _ => return None,
    };
    Some(gib.ceil() as i32)
}

fn template_data(o: &TemplateOptions) -> RequestLaunchTemplateData {
    let devices: Vec<LaunchTemplateBlockDeviceMappingRequest> =
        o.block_devices.iter().map(block_device).collect();
    let meta = LaunchTemplateInstanceMetadataOptionsRequest::builder()
        .http_endpoint(if o.http_endpoint {
            LaunchTemplateInstanceMetadataEndpointState::Enabled
        } else {
            LaunchTemplateInstanceMetadataEndpointState::Disabled
        })
        .http_protocol_ipv6(if o.http_ipv6 {
            LaunchTemplateInstanceMetadataProtocolIpv6::Enabled
        } else {
            LaunchTemplateInstanceMetadataProtocolIpv6::Disabled
        })
        .http_tokens(if o.http_tokens_required {
            LaunchTemplateHttpTokensState::Required
        } else {
            LaunchTemplateHttpTokensState::Optional
        })
        .http_put_response_hop_limit(o.hop_limit.clamp(1, 64) as i32)
        .build();
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(&o.image_id)
        .iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(&o.instance_profile)
                .build(),
        )
        .user_data(&o.user_data)
        .set_block_device_mappings(Some(devices))
        .metadata_options(meta)
        .monitoring(
            LaunchTemplatesMonitoringRequest::builder()
                .enabled(o.detailed_monitoring)
                .build(),
        );
    data = match o.public_ip {
        // the public-address choice lives on the network interface, and then so must the groups
        Some(public) => data.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .associate_public_ip_address(public)
                .set_groups(Some(o.security_groups.clone()))
                .build(),
        ),
        None => data.set_security_group_ids(Some(o.security_groups.clone())),
    };
    let tags: Vec<Tag> = o
        .tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    data.tag_specifications(
        LaunchTemplateTagSpecificationRequest::builder()
            .resource_type(ResourceType::Volume)
            .set_tags(Some(tags))
            .build(),
    )
    .build()
}

fn block_device(m: &BlockDeviceMapping) -> LaunchTemplateBlockDeviceMappingRequest {
    let ebs = m.ebs.as_ref().map(|e| {
        LaunchTemplateEbsBlockDeviceRequest::builder()
            .set_delete_on_termination(e.delete_on_termination)
            .set_encrypted(e.encrypted)
            .set_iops(e.iops.map(|v| v as i32))
            .set_kms_key_id(e.kms_key_id.clone())
            .set_snapshot_id(e.snapshot_id.clone())
            .set_throughput(e.throughput.map(|v| v as i32))
            .set_volume_size(e.volume_size.as_deref().and_then(volume_gib))
            .set_volume_type(
                e.volume_type
                    .and_then(|t| serde_json::to_value(t).ok())
                    .and_then(|v| v.as_str().map(|s| s.into())),
            )
            .build()
    });
    LaunchTemplateBlockDeviceMappingRequest::builder()
        .set_device_name(m.device_name.clone())
        .set_ebs(ebs)
        .build()
}

/// Launch template names already created, by name.
#[derive(Debug, Default)]
pub struct TemplateCache {
    ids: Mutex<BTreeMap<String, String>>,
}

impl TemplateCache {
    /// The id of the template for `options`, created when EC2 has none by that name.
    pub async fn ensure(
        &self,
        clients: &AwsClients,
        cluster: &str,
        options: &TemplateOptions,
    ) -> Result<String, AwsError> {
        let name = options.name(cluster);
        if let Some(id) = self.lock().get(&name) {
            return Ok(id.clone());
        }
        let id = match find_template(clients, &name).await? {
            Some(id) => id,
            None => create_template(clients, &name, options, cluster).await?,
        };
        self.lock().insert(name, id.clone());
        Ok(id)
    }

    /// Forgets every template (after EC2 reported one missing, or the node class changed).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn find_template(clients: &AwsClients, name: &str) -> Result<Option<String>, AwsError> {
    match clients
        .ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
    {
        Ok(out) => Ok(out
            .launch_templates()
            .first()
            .and_then(|t| t.launch_template_id())
            .map(str::to_string)),
        Err(e) => {
            let e = AwsError::from_sdk("ec2:DescribeLaunchTemplates", e);
            match e.code() {
                Some("InvalidLaunchTemplateName.NotFoundException") => Ok(None),
                _ => Err(e),
            }
        }
    }
}

async fn create_template(
    clients: &AwsClients,
    name: &str,
    options: &TemplateOptions,
    cluster: &str,
) -> Result<String, AwsError> {
    let tags = vec![Tag::builder()
        .key(cluster_tag_key(cluster))
        .value("owned")
        .build()];
    let created = clients
        .ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(template_data(options))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .set_tags(Some(tags))
                .build(),
        )
        .send()
        .await;
    match created {
        Ok(out) => out
            .launch_template()
            .and_then(|t| t.launch_template_id())
            .map(str::to_string)
            .ok_or(AwsError::Response {
                call: "ec2:CreateLaunchTemplate",
                message: "names no template id".into(),
            }),
        Err(e) => {
            let e = AwsError::from_sdk("ec2:CreateLaunchTemplate", e);
            // another launch created it first: use theirs
            if e.code() == Some("InvalidLaunchTemplateName.AlreadyExistsException") {
                return find_template(clients, name).await?.ok_or(e);
            }
            Err(e)
        }
    }
}

/// What one CreateFleet call did.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOutcome {
    pub instance_id: Option<String>,
    /// Offerings EC2 reported without capacity.
    pub insufficient: Vec<OfferingKey>,
    /// Other errors, as `code: message`.
    pub errors: Vec<String>,
}

/// Launches one instance of `fleet` with CreateFleet `instant`.
pub async fn create_fleet(
    clients: &AwsClients,
    templates: &[String],
    fleet: &FleetPlan,
    tags: &BTreeMap<String, String>,
) -> Result<FleetOutcome, AwsError> {
    let mut configs = vec![];
    let mut priority = 0.0;
    for (group, id) in fleet.groups.iter().zip(templates) {
        let overrides = group.overrides.iter().map(|(o, subnet)| {
            priority += 1.0;
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(o.instance_type.as_str().into())
                .subnet_id(subnet)
                .priority(priority)
                .build()
        });
        configs.push(
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_id(id)
                        .version("$Latest")
                        .build(),
                )
                .set_overrides(Some(overrides.collect()))
                .build(),
        );
    }
    let spot = fleet.capacity_type == CapacityType::Spot;
    let target = TargetCapacitySpecificationRequest::builder()
        .total_target_capacity(1)
        .default_target_capacity_type(if spot {
            DefaultTargetCapacityType::Spot
        } else {
            DefaultTargetCapacityType::OnDemand
        })
        .build();
    let tag_list: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    let mut call = clients
        .ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(target)
        .set_launch_template_configs(Some(configs))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(tag_list.clone()))
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Volume)
                .set_tags(Some(tag_list))
                .build(),
        );
    call = if spot {
        call.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                .build(),
        )
    } else {
        call.on_demand_options(
            OnDemandOptionsRequest::builder()
                .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                .build(),
        )
    };
    let out = call
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:CreateFleet", e))?;
    let instance_id = out
        .instances()
        .iter()
        .flat_map(|i| i.instance_ids())
        .next()
        .cloned();
    let mut outcome = FleetOutcome {
        instance_id,
        insufficient: vec![],
        errors: vec![],
    };
    for e in out.errors() {
        let code = e.error_code().unwrap_or_default();
        let overrides = e
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let key = overrides.and_then(|o| {
            offering_of(
                fleet,
                o.instance_type().map(|t| t.as_str()),
                o.subnet_id(),
                e.lifecycle(),
            )
        });
        match key {
            Some(k) if INSUFFICIENT_CAPACITY_CODES.contains(&code) => outcome.insufficient.push(k),
            _ => outcome
                .errors
                .push(format!("{code}: {}", e.error_message().unwrap_or_default())),
        }
    }
    Ok(outcome)
}

/// The planned offering an error's override names.
fn offering_of(
    fleet: &FleetPlan,
    instance_type: Option<&str>,
    subnet: Option<&str>,
    lifecycle: Option<&InstanceLifecycle>,
) -> Option<OfferingKey> {
    let capacity_type = match lifecycle {
        Some(InstanceLifecycle::Spot) => CapacityType::Spot,
        Some(InstanceLifecycle::OnDemand) => CapacityType::OnDemand,
        _ => fleet.capacity_type,
    };
    fleet
        .groups
        .iter()
        .flat_map(|g| &g.overrides)
        .find(|(o, s)| {
            Some(o.instance_type.as_str()) == instance_type && subnet.is_none_or(|x| x == s)
        })
        .map(|(o, _)| OfferingKey {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type,
        })
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
