//! The instance catalog from the live EC2 APIs: the same [`Catalog`] `joiner catalog build` makes
//! from the offline data folder, built from what the account sees now.
//!
//! Data flow: four fetchers read every page of DescribeInstanceTypes (hardware),
//! DescribeInstanceTypeOfferings with location type `availability-zone-id` (where each type is
//! offered), DescribeAvailabilityZones (zone ID -> zone name for this account) and
//! DescribeSpotPriceHistory (`Linux/UNIX` and `Linux/UNIX (Amazon VPC)`, the latest price per type
//! and zone name). On-demand prices come from the caller: the Pricing API ([`super::pricing`]) or,
//! with no route to it, the bundled catalog. [`catalog_from_api`] is the pure join: it converts
//! each offered type's record into the offline builder's hardware record and goes through the same
//! conversion (`catalog::build`: architecture rule, GPUs, Neuron devices, ENIs of the default
//! network card, root-volume ephemeral-storage, price rounding), names zones by zone ID, and gives
//! a type one on-demand offering per offered zone and a spot offering where a spot price was
//! observed. What it leaves out is counted in the [`DiscoveryReport`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{
    AvailabilityZone, EphemeralNvmeSupport, InstanceTypeInfo, InstanceTypeOffering, LocationType,
    SpotPrice,
};
use serde::Serialize;

use super::{AwsClients, AwsError};
use crate::catalog::build::{arch_of, build_type, round6, RawNeuron, RawType};
use crate::catalog::{CapacityType, Catalog, Gpu, Offering};

/// Spot prices of these product descriptions (Linux, as Karpenter asks for it: EC2 reports VPC
/// prices under either name depending on the account's age).
pub const SPOT_PRODUCT_DESCRIPTIONS: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// Spot prices by (instance type, zone name), $/h.
pub type SpotPrices = BTreeMap<(String, String), f64>;

/// What discovery read, kept and left out; printed by `joiner catalog live` and stored in the
/// catalog's `provenance.counts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DiscoveryReport {
    pub region: String,
    /// Records DescribeInstanceTypes returned.
    pub types_described: usize,
    /// Distinct types DescribeInstanceTypeOfferings lists for the region's zones.
    pub types_offered: usize,
    pub types_kept: usize,
    /// Left out: no positive on-demand price.
    pub types_without_on_demand_price: usize,
    /// Left out: only mac or i386 architectures.
    pub types_unsupported_arch: usize,
    /// Left out: offered but not described, or described without a name, vCPUs or memory.
    pub types_not_described: usize,
    /// Left out: priced and supported, but no offering in a named zone under a usage class it is
    /// sold by.
    pub types_without_offerings: usize,
    pub offerings: usize,
    pub on_demand_offerings: usize,
    pub spot_offerings: usize,
    /// (type, zone) spot prices handed in.
    pub spot_prices_read: usize,
    /// Spot price history records without a type, zone, timestamp or positive price.
    pub spot_records_skipped: usize,
    /// Zone offerings of kept spot-capable types with no spot price for the zone.
    pub spot_without_price: usize,
    /// Zone offerings dropped because DescribeAvailabilityZones does not name the zone ID.
    pub unnamed_zone_offerings: usize,
    /// Offering records of another location type than `availability-zone-id`, ignored.
    pub offerings_other_location: usize,
}

impl fmt::Display for DiscoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        writeln!(
            f,
            "catalog {} (live): kept {} of {} instance types offered in the region ({} described)",
            r.region, r.types_kept, r.types_offered, r.types_described
        )?;
        writeln!(
            f,
            "  left out: {} without an on-demand price, {} with an unsupported architecture (mac, i386-only), \
             {} not described, {} without a usable zone offering",
            r.types_without_on_demand_price, r.types_unsupported_arch, r.types_not_described, r.types_without_offerings
        )?;
        writeln!(
            f,
            "  offerings: {} ({} on-demand, {} spot at an observed price); {} spot prices read, {} history records skipped",
            r.offerings, r.on_demand_offerings, r.spot_offerings, r.spot_prices_read, r.spot_records_skipped
        )?;
        write!(
            f,
            "  spot offerings left out (no spot price for the zone): {}",
            r.spot_without_price
        )?;
        if r.unnamed_zone_offerings > 0 {
            write!(
                f,
                "\n  zone offerings dropped (zone ID without a zone name): {}",
                r.unnamed_zone_offerings
            )?;
        }
        if r.offerings_other_location > 0 {
            write!(
                f,
                "\n  offering records of another location type ignored: {}",
                r.offerings_other_location
            )?;
        }
        Ok(())
    }
}

/// Builds the catalog of `region` from API answers. `offerings` must be of location type
/// `availability-zone-id` (zone IDs name the same physical zone in every account; zone names do
/// not), `zones` names them, `on_demand` prices types and `spot` is keyed by (type, zone name).
pub fn catalog_from_api(
    region: &str,
    types: &[InstanceTypeInfo],
    offerings: &[InstanceTypeOffering],
    zones: &[AvailabilityZone],
    on_demand: &BTreeMap<String, f64>,
    spot: &SpotPrices,
) -> (Catalog, DiscoveryReport) {
    let mut report = DiscoveryReport {
        region: region.to_string(),
        types_described: types.len(),
        spot_prices_read: spot.len(),
        ..Default::default()
    };
    let offered = offered_zone_ids(offerings, &mut report);
    report.types_offered = offered.len();
    let join = Join {
        described: types
            .iter()
            .filter_map(|t| Some((t.instance_type()?.as_str(), t)))
            .collect(),
        zone_names: zone_names(zones),
        on_demand,
        spot,
    };
    let kept: Vec<_> = offered
        .into_iter()
        .filter_map(|(name, ids)| join.instance_type(name, &ids, &mut report))
        .collect();
    report.types_kept = kept.len();
    report.offerings = kept.iter().map(|t| t.offerings.len()).sum();
    let provenance = provenance(region, &report);
    (
        Catalog {
            region: region.to_string(),
            instance_types: kept,
            provenance: Some(provenance),
        },
        report,
    )
}

/// The answers one offered type is converted and priced from.
struct Join<'a> {
    described: BTreeMap<&'a str, &'a InstanceTypeInfo>,
    /// zone ID -> zone name
    zone_names: BTreeMap<&'a str, &'a str>,
    on_demand: &'a BTreeMap<String, f64>,
    spot: &'a SpotPrices,
}

impl Join<'_> {
    /// The catalog entry of type `name` offered in `zone_ids`, or None (counted) when it is left
    /// out.
    fn instance_type(
        &self,
        name: &str,
        zone_ids: &BTreeSet<&str>,
        report: &mut DiscoveryReport,
    ) -> Option<crate::catalog::InstanceType> {
        let Some(raw) = self.described.get(name).and_then(|info| raw_type(info)) else {
            report.types_not_described += 1;
            return None;
        };
        // Architecture first, as the offline builder does, so mac types are counted as such.
        let Some(arch) = arch_of(&raw.arch) else {
            report.types_unsupported_arch += 1;
            return None;
        };
        let Some(price) = self
            .on_demand
            .get(name)
            .copied()
            .filter(|p| p.is_finite() && *p > 0.0)
        else {
            report.types_without_on_demand_price += 1;
            return None;
        };
        let mut zones = BTreeSet::new();
        for id in zone_ids {
            match self.zone_names.get(id) {
                Some(zone) => _ = zones.insert(*zone),
                None => report.unnamed_zone_offerings += 1,
            }
        }
        let offers = offerings_of(&raw, round6(price), &zones, self.spot, report);
        if offers.is_empty() {
            report.types_without_offerings += 1;
            return None;
        }
        Some(build_type(&raw, arch, offers))
    }
}

/// zone ID -> zone name, as this account's DescribeAvailabilityZones pairs them.
fn zone_names(zones: &[AvailabilityZone]) -> BTreeMap<&str, &str> {
    zones
        .iter()
        .filter_map(|z| Some((z.zone_id()?, z.zone_name()?)))
        .collect()
}

/// type -> zone IDs it is offered in.
fn offered_zone_ids<'a>(
    offerings: &'a [InstanceTypeOffering],
    report: &mut DiscoveryReport,
) -> BTreeMap<&'a str, BTreeSet<&'a str>> {
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for o in offerings {
        let by_id = o.location_type() == Some(&LocationType::AvailabilityZoneId);
        match (o.instance_type(), o.location()) {
            (Some(t), Some(zone_id)) if by_id => {
                _ = out.entry(t.as_str()).or_default().insert(zone_id)
            }
            _ => report.offerings_other_location += 1,
        }
    }
    out
}

/// One on-demand offering per zone when the type is sold on demand, and one spot offering per zone
/// with an observed spot price when it is sold as spot; ordered by zone then capacity type.
fn offerings_of(
    raw: &RawType,
    on_demand: f64,
    zones: &BTreeSet<&str>,
    spot: &SpotPrices,
    report: &mut DiscoveryReport,
) -> Vec<Offering> {
    let offering = |zone: &str, capacity_type, price| Offering {
        zone: zone.to_string(),
        capacity_type,
        price,
        available: true,
        price_estimated: false,
        interruption_band: None,
    };
    let mut out = Vec::new();
    for zone in zones {
        if raw.sold_as("on-demand") {
            out.push(offering(zone, CapacityType::OnDemand, on_demand));
            report.on_demand_offerings += 1;
        }
        if !raw.sold_as("spot") {
            continue;
        }
        match spot
            .get(&(raw.name.clone(), zone.to_string()))
            .filter(|p| p.is_finite() && **p > 0.0)
        {
            Some(p) => {
                out.push(offering(zone, CapacityType::Spot, round6(*p)));
                report.spot_offerings += 1;
            }
            None => report.spot_without_price += 1,
        }
    }
    out
}

/// The offline builder's hardware record of one DescribeInstanceTypes answer (the offline
/// `instance-types.json` was made from the same records); None without a name, vCPUs or memory.
fn raw_type(info: &InstanceTypeInfo) -> Option<RawType> {
    let positive = |n: i64| u64::try_from(n).ok().filter(|n| *n > 0);
    let name = info.instance_type()?.as_str().to_string();
    let vcpu = u32::try_from(info.v_cpu_info()?.default_v_cpus()?)
        .ok()
        .filter(|n| *n > 0)?;
    let memory_mib = positive(info.memory_info()?.size_in_mib()?)?;
    let processor = info.processor_info();
    let network = info.network_info();
    Some(RawType {
        name,
        vcpu,
        memory_mib,
        arch: processor
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        cpu_manufacturer: processor.and_then(|p| p.manufacturer()).map(str::to_string),
        gpu: gpu(info),
        neuron: neuron(info),
        local_nvme_gb: local_nvme_gb(info),
        default_card_max_enis: network.and_then(default_card_enis),
        ipv4_per_eni: network.and_then(|n| u32::try_from(n.ipv4_addresses_per_interface()?).ok()),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
        supported_usage_classes: info
            .supported_usage_classes()
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
    })
}

/// Total GPUs over the device records, named and sized (memory per GPU) after the first record.
fn gpu(info: &InstanceTypeInfo) -> Option<Gpu> {
    let devices = info.gpu_info()?.gpus();
    let first = devices.first()?;
    Some(Gpu {
        count: devices
            .iter()
            .filter_map(|d| u32::try_from(d.count()?).ok())
            .sum(),
        manufacturer: first.manufacturer().unwrap_or_default().to_string(),
        name: first.name().unwrap_or_default().to_string(),
        memory_mib: first
            .memory_info()
            .and_then(|m| u64::try_from(m.size_in_mib()?).ok())
            .unwrap_or(0),
    })
}

fn neuron(info: &InstanceTypeInfo) -> Option<RawNeuron> {
    let devices = info.neuron_info()?.neuron_devices();
    let count = devices
        .iter()
        .filter_map(|d| u32::try_from(d.count()?).ok())
        .sum();
    Some(RawNeuron { count })
}

/// Instance storage size when it is NVMe (required or supported), as the offline data records it.
fn local_nvme_gb(info: &InstanceTypeInfo) -> Option<u64> {
    let storage = info.instance_storage_info()?;
    let nvme = storage
        .nvme_support()
        .is_some_and(|s| *s != EphemeralNvmeSupport::Unsupported);
    nvme.then(|| u64::try_from(storage.total_size_in_gb()?).ok())
        .flatten()
}

/// ENIs of the default network card (see `catalog::build::build_type` for why not the total); types
/// described without network cards have a single card.
fn default_card_enis(network: &aws_sdk_ec2::types::NetworkInfo) -> Option<u32> {
    let index = network.default_network_card_index().unwrap_or(0);
    let card = network
        .network_cards()
        .iter()
        .find(|c| c.network_card_index() == Some(index));
    let enis = match card {
        Some(c) => c.maximum_network_interfaces()?,
        None => network.maximum_network_interfaces()?,
    };
    u32::try_from(enis).ok()
}

/// The latest price of each (type, zone name) in a spot price history, and how many records could
/// not be used. Records of one pair may come in any order and on several pages; the newest wins.
pub fn latest_spot_prices(history: &[SpotPrice]) -> (SpotPrices, usize) {
    let mut latest: BTreeMap<(String, String), (DateTime, f64)> = BTreeMap::new();
    let mut skipped = 0;
    for record in history {
        let Some((key, at, price)) = spot_record(record) else {
            skipped += 1;
            continue;
        };
        match latest.get(&key) {
            Some((seen, _)) if *seen >= at => {}
            _ => _ = latest.insert(key, (at, price)),
        }
    }
    (
        latest.into_iter().map(|(k, (_, p))| (k, p)).collect(),
        skipped,
    )
}

/// (type, zone name), time and price of one history record; None when a part is missing or the
/// price is not a positive number.
fn spot_record(record: &SpotPrice) -> Option<((String, String), DateTime, f64)> {
    let price: f64 = record.spot_price()?.trim().parse().ok()?;
    if !price.is_finite() || price <= 0.0 {
        return None;
    }
    let key = (
        record.instance_type()?.as_str().to_string(),
        record.availability_zone()?.to_string(),
    );
    Some((key, *record.timestamp()?, price))
}

/// Every page of DescribeInstanceTypes.
pub async fn describe_instance_types(
    ec2: &aws_sdk_ec2::Client,
) -> Result<Vec<InstanceTypeInfo>, AwsError> {
    let pages = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .items()
        .send();
    pages
        .try_collect()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypes", e))
}

/// Every page of DescribeInstanceTypeOfferings by zone ID.
pub async fn describe_offerings(
    ec2: &aws_sdk_ec2::Client,
) -> Result<Vec<InstanceTypeOffering>, AwsError> {
    let request = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZoneId);
    let pages = request.max_results(1000).into_paginator().items().send();
    pages
        .try_collect()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypeOfferings", e))
}

/// The region's zones this account can use (DescribeAvailabilityZones is not paginated).
pub async fn describe_zones(ec2: &aws_sdk_ec2::Client) -> Result<Vec<AvailabilityZone>, AwsError> {
    let out = ec2.describe_availability_zones().send().await;
    let out = out.map_err(|e| AwsError::from_sdk("ec2:DescribeAvailabilityZones", e))?;
    Ok(out.availability_zones().to_vec())
}

/// The current Linux spot price of every (type, zone name), from every page of
/// DescribeSpotPriceHistory starting now (EC2 then returns the price in effect for each pair), and
/// the number of unusable records.
pub async fn spot_prices(ec2: &aws_sdk_ec2::Client) -> Result<(SpotPrices, usize), AwsError> {
    let now = DateTime::from(std::time::SystemTime::now());
    let request = ec2
        .describe_spot_price_history()
        .set_product_descriptions(Some(SPOT_PRODUCT_DESCRIPTIONS.map(String::from).to_vec()))
        .start_time(now);
    let pages = request.max_results(1000).into_paginator().items().send();
    let history = pages
        .try_collect()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:DescribeSpotPriceHistory", e))?;
    Ok(latest_spot_prices(&history))
}

/// Reads the four EC2 APIs concurrently and builds the catalog of `region` with `on_demand` prices.
pub async fn discover(
    clients: &AwsClients,
    region: &str,
    on_demand: &BTreeMap<String, f64>,
) -> Result<(Catalog, DiscoveryReport), AwsError> {
    let ec2 = &clients.ec2;
    let (types, offerings, zones, (spot, spot_skipped)) = futures::try_join!(
        describe_instance_types(ec2),
        describe_offerings(ec2),
        describe_zones(ec2),
        spot_prices(ec2)
    )?;
    let (mut catalog, mut report) =
        catalog_from_api(region, &types, &offerings, &zones, on_demand, &spot);
    report.spot_records_skipped = spot_skipped;
    if let Some(p) = catalog.provenance.as_mut() {
        p["counts"] = serde_json::to_value(&report).unwrap_or_default();
    }
    Ok((catalog, report))
}

/// On-demand prices of a catalog (the bundled one when the Pricing API is out of reach): each
/// type's lowest on-demand offering price, since a catalog prices a type per zone.
pub fn on_demand_prices_of(catalog: &Catalog) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for t in &catalog.instance_types {
        let prices = t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.price);
        if let Some(p) = prices.min_by(f64::total_cmp) {
            out.insert(t.name.clone(), p);
        }
    }
    out
}

fn provenance(region: &str, report: &DiscoveryReport) -> serde_json::Value {
    serde_json::json!({
        "built_by": format!("joiner catalog live --region {region}"),
        "sources": {
            "instance_types": "EC2 DescribeInstanceTypes",
            "offerings": "EC2 DescribeInstanceTypeOfferings (availability-zone-id), named with DescribeAvailabilityZones",
            "spot": format!("EC2 DescribeSpotPriceHistory ({}), latest price per type and zone", SPOT_PRODUCT_DESCRIPTIONS.join(", ")),
        },
        "max_enis": "ENIs of the default network card, as Karpenter's ENI-limited max pods uses",
        "capacity": "ephemeral-storage 20Gi on every type (Karpenter's default root volume); aws.amazon.com/neuron = Neuron devices",
        "left_out": "types without an on-demand price, mac and i386-only types; spot offerings without an observed price",
        "counts": report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Arch, InstanceType};
    use crate::domain::resources::EPHEMERAL_STORAGE;
    use crate::domain::Quantity;
    use aws_sdk_ec2::types::{
        ArchitectureType, GpuDeviceInfo, GpuDeviceMemoryInfo, GpuInfo, InstanceStorageInfo,
        InstanceTypeHypervisor, MemoryInfo, NetworkCardInfo, NetworkInfo, NeuronDeviceInfo,
        NeuronInfo, ProcessorInfo, UsageClassType, VCpuInfo,
    };

    fn card(index: i32, enis: i32) -> NetworkCardInfo {
        NetworkCardInfo::builder()
            .network_card_index(index)
            .maximum_network_interfaces(enis)
            .build()
    }

    /// An m5.large-like record named `name` with architecture `arch`, sold on demand and as spot.
    fn info(
        name: &str,
        arch: ArchitectureType,
    ) -> aws_sdk_ec2::types::builders::InstanceTypeInfoBuilder {
        InstanceTypeInfo::builder()
            .instance_type(name.into())
            .v_cpu_info(VCpuInfo::builder().default_v_cpus(2).build())
            .memory_info(MemoryInfo::builder().size_in_mib(8192).build())
            .processor_info(
                ProcessorInfo::builder()
                    .supported_architectures(arch)
                    .manufacturer("Intel")
                    .build(),
            )
            .network_info(
                NetworkInfo::builder()
                    .maximum_network_interfaces(3)
                    .ipv4_addresses_per_interface(10)
                    .default_network_card_index(0)
                    .network_cards(card(0, 3))
                    .build(),
            )
            .hypervisor(InstanceTypeHypervisor::Nitro)
            .supported_usage_classes(UsageClassType::OnDemand)
            .supported_usage_classes(UsageClassType::Spot)
    }

    fn types() -> Vec<InstanceTypeInfo> {
        let h100 = GpuDeviceInfo::builder()
            .count(8)
            .manufacturer("NVIDIA")
            .name("H100")
            .memory_info(GpuDeviceMemoryInfo::builder().size_in_mib(81920).build())
            .build();
        let p5_network = NetworkInfo::builder()
            .maximum_network_interfaces(64)
            .ipv4_addresses_per_interface(50)
            .default_network_card_index(0)
            .network_cards(card(0, 2))
            .network_cards(card(1, 2))
            .build();
        let p5_storage = InstanceStorageInfo::builder()
            .total_size_in_gb(30400)
            .nvme_support("required".into())
            .build();
        let neuron = NeuronInfo::builder().neuron_devices(
            NeuronDeviceInfo::builder()
                .count(1)
                .name("Inferentia2")
                .build(),
        );
        vec![
            info("m5.large", ArchitectureType::X8664).build(),
            info("m6g.large", ArchitectureType::Arm64).build(),
            info("r9g.large", ArchitectureType::Arm64).build(),
            info("mac2.metal", ArchitectureType::Arm64Mac).build(),
            info("p5.48xlarge", ArchitectureType::X8664)
                .gpu_info(GpuInfo::builder().gpus(h100).build())
                .network_info(p5_network)
                .instance_storage_info(p5_storage)
                .set_supported_usage_classes(Some(vec![
                    UsageClassType::OnDemand,
                    UsageClassType::CapacityBlock,
                ]))
                .build(),
            info("inf2.xlarge", ArchitectureType::X8664)
                .neuron_info(neuron.build())
                .build(),
            InstanceTypeInfo::builder()
                .instance_type("x9.broken".into())
                .build(),
        ]
    }

    fn offering(name: &str, zone_id: &str) -> InstanceTypeOffering {
        InstanceTypeOffering::builder()
            .instance_type(name.into())
            .location_type(LocationType::AvailabilityZoneId)
            .location(zone_id)
            .build()
    }

    /// Zone names and IDs deliberately crossed (1a = az2) so a join on names would misplace
    /// offerings.
    fn zones() -> Vec<AvailabilityZone> {
        [("test-1a", "t1-az2"), ("test-1b", "t1-az1")]
            .map(|(name, id)| {
                AvailabilityZone::builder()
                    .zone_name(name)
                    .zone_id(id)
                    .build()
            })
            .to_vec()
    }

    fn discover_test() -> (Catalog, DiscoveryReport) {
        let offerings = [
            ("m5.large", "t1-az1"),
            ("m5.large", "t1-az2"),
            ("m6g.large", "t1-az1"),
            ("r9g.large", "t1-az1"),
            ("mac2.metal", "t1-az1"),
            ("p5.48xlarge", "t1-az2"),
            ("inf2.xlarge", "t1-az1"),
            ("inf2.xlarge", "t1-az9"),
            ("x9.broken", "t1-az1"),
            ("z1.absent", "t1-az1"),
        ]
        .map(|(n, z)| offering(n, z));
        let on_demand: BTreeMap<String, f64> = [
            ("m5.large", 0.096),
            ("m6g.large", 0.077),
            ("p5.48xlarge", 55.04),
            ("inf2.xlarge", 0.7582),
            ("mac2.metal", 0.65),
        ]
        .map(|(n, p)| (n.to_string(), p))
        .into();
        let spot: SpotPrices = [
            (("m5.large", "test-1b"), 0.0312345678),
            (("p5.48xlarge", "test-1a"), 20.0), // not sold as spot
            (("m6g.large", "test-1a"), 0.03),   // not offered in test-1a
        ]
        .map(|((n, z), p)| ((n.to_string(), z.to_string()), p))
        .into();
        catalog_from_api("test-1", &types(), &offerings, &zones(), &on_demand, &spot)
    }

    fn find<'a>(c: &'a Catalog, name: &str) -> &'a InstanceType {
        c.instance_types
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} kept"))
    }

    fn zones_of(t: &InstanceType, ct: CapacityType) -> Vec<(&str, f64)> {
        t.offerings
            .iter()
            .filter(|o| o.capacity_type == ct)
            .map(|o| (o.zone.as_str(), o.price))
            .collect()
    }

    #[test]
    fn offerings_are_joined_on_zone_id_and_spot_needs_an_observed_price() {
        let (c, report) = discover_test();
        let m5 = find(&c, "m5.large");
        assert_eq!(
            zones_of(m5, CapacityType::OnDemand),
            [("test-1a", 0.096), ("test-1b", 0.096)]
        );
        // t1-az1 is test-1b: its spot price lands there, rounded to 6 decimals; test-1a has none.
        assert_eq!(zones_of(m5, CapacityType::Spot), [("test-1b", 0.031235)]);
        assert!(m5
            .offerings
            .iter()
            .all(|o| o.available && !o.price_estimated && o.interruption_band.is_none()));
        // m6g is offered in t1-az1 = test-1b only; its test-1a spot price has no offering to go to.
        assert_eq!(
            zones_of(find(&c, "m6g.large"), CapacityType::OnDemand),
            [("test-1b", 0.077)]
        );
        assert!(zones_of(find(&c, "m6g.large"), CapacityType::Spot).is_empty());
        // p5 is not sold as spot: no spot offering despite a price.
        assert!(zones_of(find(&c, "p5.48xlarge"), CapacityType::Spot).is_empty());
        assert_eq!(report.unnamed_zone_offerings, 1); // inf2 in t1-az9
        assert_eq!((report.spot_offerings, report.spot_prices_read), (1, 3));
        assert_eq!(report.spot_without_price, 3); // m5 test-1a, m6g test-1b, inf2 test-1b
    }

    #[test]
    fn unpriced_undescribed_and_unsupported_types_are_left_out_and_counted() {
        let (c, report) = discover_test();
        let names: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["inf2.xlarge", "m5.large", "m6g.large", "p5.48xlarge"]
        );
        assert_eq!(
            (
                report.types_described,
                report.types_offered,
                report.types_kept
            ),
            (7, 8, 4)
        );
        assert_eq!(report.types_without_on_demand_price, 1); // r9g.large
        assert_eq!(report.types_unsupported_arch, 1); // mac2.metal, although priced
        assert_eq!(report.types_not_described, 2); // x9.broken (no vCPUs), z1.absent
        assert_eq!((report.offerings, report.on_demand_offerings), (6, 5));
        assert!(
            report.to_string().contains("1 without an on-demand price"),
            "{report}"
        );
        assert_eq!(
            c.provenance
                .as_ref()
                .map(|p| p["counts"]["types_kept"].clone()),
            Some(4.into())
        );
    }

    #[test]
    fn hardware_goes_through_the_offline_conversion() {
        let (c, _) = discover_test();
        assert_eq!(find(&c, "m6g.large").arch, Arch::Arm64);
        let m5 = find(&c, "m5.large");
        assert_eq!(
            (m5.vcpu, m5.memory_mib, m5.max_enis, m5.ipv4_per_eni),
            (2, 8192, Some(3), Some(10))
        );
        assert_eq!(
            (m5.hypervisor.as_deref(), m5.cpu_manufacturer.as_deref()),
            (Some("nitro"), Some("Intel"))
        );
        let p5 = find(&c, "p5.48xlarge");
        assert_eq!(p5.max_enis, Some(2)); // default card, not the 64 over all cards
        let gpu = p5.gpu.as_ref().map(|g| {
            (
                g.count,
                g.manufacturer.as_str(),
                g.name.as_str(),
                g.memory_mib,
            )
        });
        assert_eq!(gpu, Some((8, "NVIDIA", "H100", 81920)));
        assert_eq!(p5.local_nvme_gb, Some(30400));
        assert_eq!(
            p5.capacity.get(EPHEMERAL_STORAGE),
            Quantity::from_units(20 << 30)
        );
        let inf2 = find(&c, "inf2.xlarge");
        assert_eq!(
            inf2.capacity.get("aws.amazon.com/neuron"),
            Quantity::from_units(1)
        );
        assert_eq!((inf2.gpu.as_ref(), inf2.local_nvme_gb), (None, None));
    }

    #[test]
    fn the_latest_spot_price_of_a_type_and_zone_wins() {
        let record = |zone: &str, secs: i64, price: &str| {
            SpotPrice::builder()
                .instance_type("m5.large".into())
                .availability_zone(zone)
                .spot_price(price)
                .timestamp(DateTime::from_secs(secs))
                .build()
        };
        let history = [
            record("test-1a", 200, "0.040"),
            record("test-1a", 300, "0.035"), // newest for test-1a
            record("test-1a", 100, "0.020"),
            record("test-1b", 100, "0.050"),
            record("test-1b", 400, "free"), // skipped, the older price stays
            record("test-1b", 500, "0"),    // skipped
            SpotPrice::builder()
                .spot_price("0.01")
                .availability_zone("test-1a")
                .build(), // no type
        ];
        let (prices, skipped) = latest_spot_prices(&history);
        let key = |z: &str| ("m5.large".to_string(), z.to_string());
        assert_eq!(
            (prices.get(&key("test-1a")), prices.get(&key("test-1b"))),
            (Some(&0.035), Some(&0.05))
        );
        assert_eq!((prices.len(), skipped), (2, 3));
    }

    #[test]
    fn bundled_on_demand_prices_are_the_lowest_on_demand_offering_per_type() {
        let catalog = Catalog::bundled("us-east-1").expect("bundled");
        let prices = on_demand_prices_of(&catalog);
        assert_eq!(prices.get("m5.large"), Some(&0.096));
        assert!(prices.len() > 1000 && prices.len() <= catalog.instance_types.len());
    }
}
