//! Builds a [`Catalog`] for one region from the offline AWS reference data folder (see its
//! README.md) and writes it as diff-friendly JSON; this is what `joiner catalog build` runs and how
//! the bundled catalogs in `fixtures/catalogs/` are made.
//!
//! Data flow: `offerings-REGION.json` says which types exist in which zone IDs (`by_zone_id`, which
//! does not depend on the AWS account) and the DescribeAvailabilityZones map turns zone IDs into
//! zone names. Each offered type is looked up in `instance-types.json` (hardware), priced from
//! `prices-REGION.json` (on-demand per type, observed spot per zone ID) and, where no spot price
//! was observed, given a spot price estimated from `spot-advisor.json` savings. Types that cannot
//! be priced on demand or run no Linux architecture Kubernetes knows are left out and counted in
//! the [`BuildReport`], so a reader of the bundled catalogs can see exactly what is missing and
//! why.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Arch, CapacityType, Catalog, CatalogError, Gpu, InstanceType, Offering};
use crate::domain::resources::EPHEMERAL_STORAGE;
use crate::domain::{Quantity, Resources};

/// Root volume size Karpenter gives a node when the EC2NodeClass does not set one (gp3, 20Gi).
/// Written into every type's `capacity` so that checkers that do not share our capacity model still
/// account for ephemeral-storage requests.
const ROOT_VOLUME_GIB: i64 = 20;
/// Extended resource Karpenter and the Neuron device plugin advertise: one per Inferentia/Trainium
/// device.
pub(crate) const NEURON_RESOURCE: &str = "aws.amazon.com/neuron";
/// Spot Advisor's interruption bands: 0 `<5%`, 1 `5-10%`, 2 `10-15%`, 3 `15-20%`, 4 `>20%`.
const INTERRUPTION_BANDS: u8 = 5;

/// What the builder kept, left out and estimated; printed by `joiner catalog build` and stored in
/// the catalog's `provenance.counts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BuildReport {
    pub region: String,
    /// Types the offerings file lists for the region (in any zone).
    pub types_offered: usize,
    pub types_kept: usize,
    /// Left out: no on-demand price in prices-REGION.json.
    pub types_without_on_demand_price: usize,
    /// Left out: only mac or i386 architectures.
    pub types_unsupported_arch: usize,
    /// Left out: offered but absent from instance-types.json.
    pub types_not_in_type_list: usize,
    /// Left out: priced and supported but with no zone offering that could be named or bought.
    pub types_without_offerings: usize,
    pub offerings: usize,
    pub on_demand_offerings: usize,
    pub spot_observed: usize,
    pub spot_estimated: usize,
    /// Zone spot offerings of kept types with neither an observed price nor Spot Advisor savings.
    pub spot_left_out: usize,
    /// Zone offerings dropped because the zone ID is missing from the zone-name map.
    pub unnamed_zone_offerings: usize,
}

impl fmt::Display for BuildReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        writeln!(
            f,
            "catalog {}: kept {} of {} instance types offered in the region",
            r.region, r.types_kept, r.types_offered
        )?;
        writeln!(
            f,
            "  left out: {} without an on-demand price, {} with an unsupported architecture (mac, i386-only), \
             {} missing from instance-types.json, {} without a usable zone offering",
            r.types_without_on_demand_price,
            r.types_unsupported_arch,
            r.types_not_in_type_list,
            r.types_without_offerings
        )?;
        let spot = r.spot_observed + r.spot_estimated;
        writeln!(
            f,
            "  offerings: {} ({} on-demand, {spot} spot: {} at an observed price, {} estimated from Spot Advisor savings)",
            r.offerings, r.on_demand_offerings, r.spot_observed, r.spot_estimated
        )?;
        write!(
            f,
            "  spot offerings left out (no observed price, no Spot Advisor data): {}",
            r.spot_left_out
        )?;
        if r.unnamed_zone_offerings > 0 {
            write!(
                f,
                "\n  zone offerings dropped (zone ID without a zone name): {}",
                r.unnamed_zone_offerings
            )?;
        }
        Ok(())
    }
}

// ---- input formats: only the fields the builder uses; serde ignores the rest ----

/// The hardware record of one type, as `instance-types.json` stores it; `cloud::aws::discovery`
/// builds the same record from a DescribeInstanceTypes answer, so both sources go through
/// [`build_type`].
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawType {
    pub(crate) name: String,
    pub(crate) vcpu: u32,
    pub(crate) memory_mib: u64,
    pub(crate) arch: Vec<String>,
    pub(crate) cpu_manufacturer: Option<String>,
    /// Same shape as the catalog's: total count, memory per GPU.
    pub(crate) gpu: Option<Gpu>,
    pub(crate) neuron: Option<RawNeuron>,
    #[serde(default)]
    pub(crate) local_nvme_gb: Option<u64>,
    /// ENIs on the default network card; see [`build_type`] for why this one.
    pub(crate) default_card_max_enis: Option<u32>,
    pub(crate) ipv4_per_eni: Option<u32>,
    pub(crate) hypervisor: Option<String>,
    #[serde(default)]
    pub(crate) supported_usage_classes: Vec<String>,
}

impl RawType {
    /// Whether EC2 sells the type by `class` (`on-demand`, `spot`, `capacity-block`).
    pub(crate) fn sold_as(&self, class: &str) -> bool {
        self.supported_usage_classes.iter().any(|c| c == class)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawNeuron {
    pub(crate) count: u32,
}

#[derive(Deserialize)]
struct RawOfferings {
    region: String,
    source: Option<String>,
    zone_name_to_id_moto_describe_availability_zones: BTreeMap<String, String>,
    #[serde(default)]
    region_instance_types: Vec<String>,
    by_zone_id: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct RawPrices {
    #[serde(rename = "_meta")]
    meta: RawPriceMeta,
    prices: BTreeMap<String, RawPrice>,
}

#[derive(Deserialize)]
struct RawPriceMeta {
    region: String,
    #[serde(default)]
    sources: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct RawPrice {
    on_demand: Option<f64>,
    /// zone ID -> observed $/h
    #[serde(default)]
    spot: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct RawAdvisor {
    source: Option<String>,
    /// region -> type -> figures
    regions: BTreeMap<String, BTreeMap<String, RawAdvice>>,
}

#[derive(Deserialize)]
struct RawAdvice {
    savings_pct: f64,
    interruption_band: Option<u8>,
}

/// Reads one JSON file of the data folder; errors name the file and the JSON path.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, CatalogError> {
    let text = std::fs::read_to_string(path).map_err(|error| CatalogError::Read {
        path: path.display().to_string(),
        error,
    })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(de)
        .map_err(|e| bad_data(path, format!("field {}: {}", e.path(), e.inner())))
}

fn bad_data(path: &Path, message: String) -> CatalogError {
    CatalogError::Parse {
        path: path.display().to_string(),
        message,
    }
}

/// A price from the data: finite and positive, rounded to 6 decimals (a millionth of a dollar is
/// below any price difference EC2 publishes, and it keeps the JSON short).
fn checked_price(
    path: &Path,
    field: impl FnOnce() -> String,
    price: f64,
) -> Result<f64, CatalogError> {
    if !price.is_finite() || price <= 0.0 {
        return Err(bad_data(
            path,
            format!("{} is {price}, not a positive number", field()),
        ));
    }
    Ok(round6(price))
}

pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The Kubernetes architecture of an EC2 `SupportedArchitectures` list. Mac types (`arm64_mac`,
/// `x86_64_mac`) need dedicated hosts and macOS, and i386-only types cannot run a 64-bit kubelet,
/// so both are unsupported.
pub(crate) fn arch_of(archs: &[String]) -> Option<Arch> {
    if archs.iter().any(|a| a == "x86_64") {
        Some(Arch::Amd64)
    } else if archs.iter().any(|a| a == "arm64") {
        Some(Arch::Arm64)
    } else {
        None
    }
}

/// Builds the catalog of `region` from the data folder `data_dir`.
pub fn build_catalog(
    data_dir: &Path,
    region: &str,
) -> Result<(Catalog, BuildReport), CatalogError> {
    let types_path = data_dir.join("instance-types.json");
    let offerings_path = data_dir.join(format!("offerings-{region}.json"));
    let prices_path = data_dir.join(format!("prices-{region}.json"));
    let advisor_path = data_dir.join("spot-advisor.json");
    let raw_types: Vec<RawType> = read_json(&types_path)?;
    let offerings: RawOfferings = read_json(&offerings_path)?;
    let prices: RawPrices = read_json(&prices_path)?;
    let advisor: RawAdvisor = read_json(&advisor_path)?;

    // A file of another region under this region's name would silently misprice everything.
    for (path, field, found) in [
        (&offerings_path, "region", &offerings.region),
        (&prices_path, "_meta.region", &prices.meta.region),
    ] {
        if found != region {
            return Err(bad_data(
                path,
                format!("field {field} is {found:?}, expected {region:?}"),
            ));
        }
    }

    // Offerings are joined on zone ID and named with the DescribeAvailabilityZones map: the data
    // README warns that the map implied by moto's offering files disagrees with it for us-east-1.
    let mut zone_names = BTreeMap::new();
    for (name, id) in &offerings.zone_name_to_id_moto_describe_availability_zones {
        if let Some(other) = zone_names.insert(id.as_str(), name.as_str()) {
            let message = format!(
                "zone_name_to_id_moto_describe_availability_zones maps {other} and {name} to {id}"
            );
            return Err(bad_data(&offerings_path, message));
        }
    }
    let no_advice = BTreeMap::new();
    let pricing = Pricing {
        prices_path: &prices_path,
        advisor_path: &advisor_path,
        region,
        zone_names,
        advice: advisor.regions.get(region).unwrap_or(&no_advice),
    };

    let types: BTreeMap<&str, &RawType> = raw_types.iter().map(|t| (t.name.as_str(), t)).collect();
    let offered: BTreeSet<&str> = offerings
        .region_instance_types
        .iter()
        .chain(offerings.by_zone_id.keys())
        .map(String::as_str)
        .collect();
    let mut report = BuildReport {
        region: region.to_string(),
        types_offered: offered.len(),
        ..Default::default()
    };
    let mut kept = Vec::new();
    for name in offered {
        let Some(raw) = types.get(name) else {
            report.types_not_in_type_list += 1;
            continue;
        };
        // Architecture first: mac types also lack prices, and the report should say why they are
        // gone.
        let Some(arch) = arch_of(&raw.arch) else {
            report.types_unsupported_arch += 1;
            continue;
        };
        let Some((price, on_demand)) = prices
            .prices
            .get(name)
            .and_then(|p| Some((p, p.on_demand?)))
        else {
            report.types_without_on_demand_price += 1;
            continue;
        };
        let on_demand = checked_price(
            &prices_path,
            || format!("prices.{name}.on_demand"),
            on_demand,
        )?;
        let zone_ids = offerings
            .by_zone_id
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let offers = pricing.offerings(raw, price, on_demand, zone_ids, &mut report)?;
        if offers.is_empty() {
            report.types_without_offerings += 1;
            continue;
        }
        kept.push(build_type(raw, arch, offers));
    }
    report.types_kept = kept.len();
    report.offerings = kept.iter().map(|t| t.offerings.len()).sum();

    let provenance = provenance(data_dir, region, &offerings, &prices, &advisor, &report);
    let catalog = Catalog {
        region: region.to_string(),
        instance_types: kept,
        provenance: Some(provenance),
    };
    Ok((catalog, report))
}

/// What every type's offerings are named and priced from.
struct Pricing<'a> {
    prices_path: &'a Path,
    advisor_path: &'a Path,
    region: &'a str,
    /// zone ID -> zone name
    zone_names: BTreeMap<&'a str, &'a str>,
    /// type -> Spot Advisor figures for this region
    advice: &'a BTreeMap<String, RawAdvice>,
}

impl Pricing<'_> {
    /// One on-demand and one spot offering per named zone, as the usage classes allow, ordered by
    /// zone then capacity type.
    fn offerings(
        &self,
        raw: &RawType,
        price: &RawPrice,
        on_demand: f64,
        zone_ids: &[String],
        report: &mut BuildReport,
    ) -> Result<Vec<Offering>, CatalogError> {
        let name = &raw.name;
        let has = |class: &str| raw.sold_as(class);
        let advice = self.advice.get(name);
        if let Some(a) = advice {
            let at = |field: &str| format!("regions.{}.{name}.{field}", self.region);
            if !(0.0..100.0).contains(&a.savings_pct) {
                return Err(bad_data(
                    self.advisor_path,
                    format!("{} is {}, not in 0..100", at("savings_pct"), a.savings_pct),
                ));
            }
            if let Some(b) = a.interruption_band.filter(|b| *b >= INTERRUPTION_BANDS) {
                return Err(bad_data(
                    self.advisor_path,
                    format!("{} {b} is not a known band", at("interruption_band")),
                ));
            }
        }
        let band = advice.and_then(|a| a.interruption_band);
        let mut out = Vec::new();
        let mut zones = BTreeMap::new();
        for zone_id in zone_ids {
            match self.zone_names.get(zone_id.as_str()) {
                Some(zone) => _ = zones.insert(*zone, zone_id.as_str()),
                None => report.unnamed_zone_offerings += 1,
            }
        }
        for (zone, zone_id) in zones {
            let offering = |capacity_type, price, price_estimated| Offering {
                zone: zone.to_string(),
                capacity_type,
                price,
                available: true,
                price_estimated,
                interruption_band: if capacity_type == CapacityType::Spot {
                    band
                } else {
                    None
                },
            };
            if has("on-demand") {
                out.push(offering(CapacityType::OnDemand, on_demand, false));
                report.on_demand_offerings += 1;
            }
            if !has("spot") {
                continue;
            }
            if let Some(&observed) = price.spot.get(zone_id) {
                let p = checked_price(
                    self.prices_path,
                    || format!("prices.{name}.spot.{zone_id}"),
                    observed,
                )?;
                out.push(offering(CapacityType::Spot, p, false));
                report.spot_observed += 1;
            } else if let Some(a) = advice {
                // savings_pct lies in 0..100, so the estimate is positive.
                out.push(offering(
                    CapacityType::Spot,
                    round6(on_demand * (1.0 - a.savings_pct / 100.0)),
                    true,
                ));
                report.spot_estimated += 1;
            } else {
                report.spot_left_out += 1;
            }
        }
        Ok(out)
    }
}

/// The catalog entry of one type. `max_pods` is not written: the ENI formula derives it from
/// `max_enis` and `ipv4_per_eni`, and kubelet settings may override it.
///
/// `max_enis` is the default network card's ENI count, not the total over all cards: the VPC CNI
/// assigns pod IPs only through the default card, and Karpenter's `ENILimitedPods` uses
/// `NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces` for the same reason. The two
/// differ only on multi-card types (p5, trn1/trn2, c6in.32xlarge, ...), where the total would
/// overstate max pods.
pub(crate) fn build_type(raw: &RawType, arch: Arch, offerings: Vec<Offering>) -> InstanceType {
    let mut capacity = Resources::new().with(
        EPHEMERAL_STORAGE,
        Quantity::from_units(ROOT_VOLUME_GIB << 30),
    );
    if let Some(n) = raw.neuron.as_ref().filter(|n| n.count > 0) {
        capacity.set(NEURON_RESOURCE, Quantity::from_units(i64::from(n.count)));
    }
    InstanceType {
        name: raw.name.clone(),
        vcpu: raw.vcpu,
        memory_mib: raw.memory_mib,
        arch,
        max_pods: None,
        max_enis: raw.default_card_max_enis.filter(|n| *n > 0),
        ipv4_per_eni: raw.ipv4_per_eni.filter(|n| *n > 0),
        gpu: raw.gpu.clone().filter(|g| g.count > 0),
        capacity,
        labels: Default::default(),
        overhead: None,
        hypervisor: raw.hypervisor.clone().filter(|h| !h.is_empty()),
        cpu_manufacturer: raw.cpu_manufacturer.clone().filter(|m| !m.is_empty()),
        local_nvme_gb: raw.local_nvme_gb.filter(|n| *n > 0),
        // the data folder has neither: the attach limit is derived (`catalog::ebs`)
        local_nvme_disks: None,
        ebs: None,
        network_bandwidth_mbps: None,
        offerings,
    }
}

/// The extraction date the data README states ("extracted on YYYY-MM-DD"), if it can be read.
fn extraction_date(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data_dir.join("README.md")).ok()?;
    let date = text.split("extracted on ").nth(1)?.get(..10)?;
    let is_date = date.char_indices().all(|(i, c)| {
        if i == 4 || i == 7 {
            c == '-'
        } else {
            c.is_ascii_digit()
        }
    });
    is_date.then(|| date.to_string())
}

fn provenance(
    data_dir: &Path,
    region: &str,
    offerings: &RawOfferings,
    prices: &RawPrices,
    advisor: &RawAdvisor,
    report: &BuildReport,
) -> serde_json::Value {
    serde_json::json!({
        "built_by": format!("joiner catalog build --data <aws data folder> --region {region}"),
        "data_extracted": extraction_date(data_dir).unwrap_or_else(|| "unknown".into()),
        "sources": {
            "instance-types.json": "EC2 DescribeInstanceTypes records from moto 5.2.5 (PyPI; capture probably \
                Sep-Oct 2026), ENI branch limits from aws/karpenter-provider-aws zz_generated.vpclimits.go",
            format!("offerings-{region}.json"): offerings.source.as_deref().unwrap_or("moto 5.2.5 instance type offerings"),
            format!("prices-{region}.json"): {
                "on_demand": "aws/karpenter-provider-aws zz_generated.pricing_aws.go (us-east-1 only, generated \
                    2026-07-20) and skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv (a 52-53 type subset)",
                "spot": "skypilot-org/skypilot-catalog vms.csv SpotPrice: one snapshot per zone ID, capture date unknown",
                "files": &prices.meta.sources,
            },
            "spot-advisor.json": advisor.source.as_deref().unwrap_or("AWS Spot Instance Advisor feed via alexei-led/spotinfo"),
        },
        "zones": "offerings joined on zone ID (by_zone_id) and named with moto's DescribeAvailabilityZones map",
        "max_enis": "ENIs of the default network card (default_card_max_enis), as Karpenter's ENI-limited max pods uses",
        "capacity": "ephemeral-storage 20Gi on every type (Karpenter's default root volume); aws.amazon.com/neuron = Neuron devices",
        "spot_estimate_rule": "where no spot price was observed for a zone ID: on_demand * (1 - savings_pct/100) from \
            Spot Advisor for the region, marked price_estimated; without Spot Advisor data there is no spot offering",
        "interruption_bands": ["<5%", "5-10%", "10-15%", "15-20%", ">20%"],
        "left_out": "types without an on-demand price, mac and i386-only types",
        "counts": report,
    })
}

/// Catalog JSON with one instance type per line, types sorted by name and offerings by zone then
/// capacity type, so a rebuild from changed data gives a small, readable diff.
pub fn to_pretty_json(c: &Catalog) -> Result<String, CatalogError> {
    let ser =
        |e: serde_json::Error| CatalogError::Build(format!("cannot serialise the catalog: {e}"));
    let mut types: Vec<&InstanceType> = c.instance_types.iter().collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = format!(
        "{{\n\"region\": {},\n",
        serde_json::to_string(&c.region).map_err(ser)?
    );
    if let Some(p) = &c.provenance {
        out += &format!(
            "\"provenance\": {},\n",
            serde_json::to_string_pretty(p).map_err(ser)?
        );
    }
    out += "\"instance_types\": [\n";
    for (i, it) in types.iter().enumerate() {
        out += &type_line(it).map_err(ser)?;
        out += if i + 1 < types.len() { ",\n" } else { "\n" };
    }
    out += "]\n}\n";
    Ok(out)
}

/// Field order of a type's line: identity and size first, offerings (last) are not listed.
#[rustfmt::skip]
const FIELD_ORDER: &[&str] = &[
    "name", "vcpu", "memory_mib", "arch", "max_pods", "max_enis", "ipv4_per_eni", "gpu", "capacity", "labels",
    "overhead", "hypervisor", "cpu_manufacturer", "local_nvme_gb", "local_nvme_disks", "ebs",
    "network_bandwidth_mbps",
];

fn type_line(it: &InstanceType) -> Result<String, serde_json::Error> {
    let mut offerings: Vec<&Offering> = it.offerings.iter().collect();
    offerings.sort_by(|a, b| {
        (a.zone.as_str(), a.capacity_type).cmp(&(b.zone.as_str(), b.capacity_type))
    });
    // serde_json's map is sorted by key (no preserve_order feature), so FIELD_ORDER imposes the
    // order.
    let serde_json::Value::Object(fields) = serde_json::to_value(it)? else {
        return serde_json::to_string(it);
    };
    let rank = |k: &str| match k {
        "offerings" => usize::MAX,
        _ => FIELD_ORDER
            .iter()
            .position(|f| *f == k)
            .unwrap_or(usize::MAX - 1),
    };
    let mut keys: Vec<&String> = fields.keys().collect();
    keys.sort_by_key(|k| (rank(k), k.as_str()));
    let mut parts = Vec::with_capacity(keys.len());
    for k in keys {
        let value = match k.as_str() {
            // Struct order (zone, capacity_type, price, ...) reads better than the sorted map.
            "offerings" => serde_json::to_string(&offerings)?,
            "gpu" => serde_json::to_string(&it.gpu)?,
            "capacity" => resources_text(&it.capacity)?,
            "overhead" => resources_text(it.overhead.as_ref().unwrap_or(&Resources::new()))?,
            _ => serde_json::to_string(&fields[k])?,
        };
        parts.push(format!("{}:{value}", serde_json::to_string(k)?));
    }
    Ok(format!("{{{}}}", parts.join(",")))
}

/// Resources with byte amounts as `20Gi` rather than `21474836480`; both read back the same.
fn resources_text(r: &Resources) -> Result<String, serde_json::Error> {
    let text = |name: &str, q: Quantity| {
        let bytes = name == "memory" || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-");
        if bytes {
            q.to_binary()
        } else {
            q.to_canonical()
        }
    };
    serde_json::to_string(
        &r.iter()
            .map(|(name, q)| (name, text(name, q)))
            .collect::<BTreeMap<_, _>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An `instance-types.json` record: an m5.large-like default with `extra` fields replaced.
    fn ty(name: &str, arch: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut t = serde_json::json!({"name": name, "vcpu": 2, "memory_mib": 8192, "arch": [arch],
            "cpu_manufacturer": "Intel", "gpu": null, "neuron": null, "local_nvme_gb": 0, "max_enis": 3,
            "default_card_max_enis": 3, "ipv4_per_eni": 10, "hypervisor": "nitro",
            "supported_usage_classes": ["on-demand", "spot"]});
        for (k, v) in extra.as_object().into_iter().flatten() {
            t[k] = v.clone();
        }
        t
    }

    /// A synthetic data folder in a fresh temp dir. Zone names and IDs are deliberately crossed
    /// (test-1a = t1-az2) so that a join on names instead of IDs would misplace prices.
    fn write_data(prices: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "joiner-build-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let none = serde_json::json!({});
        let types = [
            ty("m5.large", "x86_64", none.clone()),
            ty("m6g.large", "arm64", none.clone()),
            ty("r9g.large", "arm64", none.clone()),
            ty("mac2.metal", "arm64_mac", none.clone()),
            ty("t1.micro", "i386", none),
            ty(
                "p5.48xlarge",
                "x86_64",
                serde_json::json!({"local_nvme_gb": 30400, "max_enis": 64,
                "gpu": {"count": 8, "manufacturer": "NVIDIA", "name": "H100", "memory_mib": 81920},
                "default_card_max_enis": 2, "supported_usage_classes": ["on-demand", "capacity-block"]}),
            ),
            ty(
                "inf2.xlarge",
                "x86_64",
                serde_json::json!({"neuron": {"count": 1, "name": "Inferentia2"}}),
            ),
        ];
        let files = [
            ("instance-types.json", serde_json::to_string(&types).unwrap()),
            ("offerings-test-1.json", r#"{"region":"test-1","zone_name_to_id_moto_describe_availability_zones":{"test-1a":"t1-az2","test-1b":"t1-az1"},
"region_instance_types":["m5.large","m6g.large","r9g.large","mac2.metal","t1.micro","p5.48xlarge","inf2.xlarge"],
"by_zone_id":{"m5.large":["t1-az1","t1-az2"],"m6g.large":["t1-az1"],"r9g.large":["t1-az1"],"mac2.metal":["t1-az1"],"t1.micro":["t1-az2"],"p5.48xlarge":["t1-az2"],"inf2.xlarge":["t1-az1","t1-az9"]}}"#.into()),
            ("prices-test-1.json", prices.into()),
            ("spot-advisor.json", r#"{"source":"test","regions":{"test-1":{"m5.large":{"savings_pct":60,"interruption_band":2},"inf2.xlarge":{"savings_pct":50,"interruption_band":0}}}}"#.into()),
            ("README.md", "It was extracted on 2026-11-29, the date.\n".into()),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    fn build() -> (Catalog, BuildReport) {
        let dir = write_data(
            r#"{"_meta":{"region":"test-1"},"prices":{"m5.large":{"on_demand":0.1,"spot":{"t1-az1":0.03}},
"m6g.large":{"on_demand":0.08},"p5.48xlarge":{"on_demand":55.04},"inf2.xlarge":{"on_demand":0.7582}}}"#,
        );
        let built = build_catalog(&dir, "test-1").expect("builds");
        let _ = std::fs::remove_dir_all(&dir);
        built
    }

    fn find<'a>(c: &'a Catalog, name: &str) -> &'a InstanceType {
        c.instance_types
            .iter()
            .find(|t| t.name == name)
            .expect("type kept")
    }

    fn offer<'a>(c: &'a Catalog, name: &str, zone: &str, ct: CapacityType) -> Option<&'a Offering> {
        find(c, name)
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
    }

    #[test]
    fn zone_ids_are_joined_observed_spot_used_and_missing_spot_estimated() {
        let (c, report) = build();
        // t1-az1 is test-1b: the observed price for t1-az1 must land on test-1b.
        let observed = offer(&c, "m5.large", "test-1b", CapacityType::Spot).unwrap();
        assert_eq!(
            (
                observed.price,
                observed.price_estimated,
                observed.interruption_band
            ),
            (0.03, false, Some(2))
        );
        // test-1a (t1-az2) has no observed price: 0.1 * (1 - 60/100), flagged as an estimate.
        let estimated = offer(&c, "m5.large", "test-1a", CapacityType::Spot).unwrap();
        assert_eq!(
            (
                estimated.price,
                estimated.price_estimated,
                estimated.interruption_band
            ),
            (0.04, true, Some(2))
        );
        assert_eq!(
            offer(&c, "m5.large", "test-1a", CapacityType::OnDemand)
                .unwrap()
                .price,
            0.1
        );
        // m6g has neither an observed spot price nor advisor data: on-demand in test-1b only.
        let m6g = &find(&c, "m6g.large").offerings;
        assert_eq!(
            (m6g.len(), m6g[0].zone.as_str(), m6g[0].available),
            (1, "test-1b", true)
        );
        assert_eq!(
            (
                report.spot_observed,
                report.spot_estimated,
                report.spot_left_out
            ),
            (1, 2, 1)
        );
        assert_eq!(report.unnamed_zone_offerings, 1); // inf2's t1-az9
    }

    #[test]
    fn unpriced_and_unsupported_types_are_left_out_and_counted() {
        let (c, report) = build();
        let names: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["inf2.xlarge", "m5.large", "m6g.large", "p5.48xlarge"]
        );
        assert_eq!((report.types_offered, report.types_kept), (7, 4));
        assert_eq!(report.types_without_on_demand_price, 1); // r9g.large
        assert_eq!(report.types_unsupported_arch, 2); // mac2.metal, t1.micro
        assert_eq!(report.offerings, 4 + 1 + 1 + 2);
        assert!(
            report.to_string().contains("1 without an on-demand price"),
            "{report}"
        );
    }

    #[test]
    fn hardware_fields_follow_the_data() {
        let (c, _) = build();
        let p5 = find(&c, "p5.48xlarge");
        assert_eq!((p5.max_enis, p5.max_pods), (Some(2), None)); // default card, not the 64 over all cards
        assert_eq!(
            p5.gpu.as_ref().map(|g| (g.count, g.memory_mib)),
            Some((8, 81920))
        );
        assert_eq!(p5.local_nvme_gb, Some(30400));
        assert_eq!(
            p5.capacity.get(EPHEMERAL_STORAGE),
            Quantity::from_units(20 << 30)
        );
        assert!(p5
            .offerings
            .iter()
            .all(|o| o.capacity_type == CapacityType::OnDemand)); // no spot class
        let inf2 = find(&c, "inf2.xlarge");
        assert_eq!(
            (inf2.capacity.get(NEURON_RESOURCE), inf2.local_nvme_gb),
            (Quantity::from_units(1), None)
        );
        assert_eq!(find(&c, "m6g.large").arch, Arch::Arm64);
    }

    #[test]
    fn pretty_json_is_line_per_type_deterministic_and_reads_back() {
        let (c, report) = build();
        let mut shuffled = c.clone();
        shuffled.instance_types.reverse();
        shuffled
            .instance_types
            .iter_mut()
            .for_each(|t| t.offerings.reverse());
        let text = to_pretty_json(&c).unwrap();
        assert_eq!(text, to_pretty_json(&shuffled).unwrap());
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("{\"name\""))
            .collect();
        assert_eq!(lines.len(), 4);
        for part in [
            r#"{"name":"m5.large","vcpu":2,"#,
            r#""capacity":{"ephemeral-storage":"20Gi"}"#,
            r#""offerings":[{"zone":"test-1a","capacity_type":"on-demand""#,
        ] {
            assert!(lines[1].contains(part), "{}", lines[1]);
        }
        let back = Catalog::from_json(&text, "test").unwrap();
        assert_eq!(back.instance_types, c.instance_types);
        let prov = back.provenance.unwrap();
        assert_eq!(
            (&prov["data_extracted"], &prov["counts"]["types_kept"]),
            (&"2026-11-29".into(), &report.types_kept.into())
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let dir =
            write_data(r#"{"_meta":{"region":"test-1"},"prices":{"m5.large":{"on_demand":-1}}}"#);
        let err = build_catalog(&dir, "test-1").unwrap_err().to_string();
        assert!(
            err.contains("prices-test-1.json") && err.contains("prices.m5.large.on_demand"),
            "{err}"
        );
        let err = build_catalog(&dir, "test-2").unwrap_err().to_string();
        assert!(err.contains("offerings-test-2.json"), "{err}");
        let bad = r#"{"_meta":{"region":"test-1"},"prices":{"m5.large":{"on_demand":"x"}}}"#;
        std::fs::write(dir.join("prices-test-1.json"), bad).unwrap();
        let err = build_catalog(&dir, "test-1").unwrap_err().to_string();
        assert!(err.contains("prices.m5.large.on_demand"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
