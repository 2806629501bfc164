//! The instance catalog: EC2 instance types with their offerings (zone x capacity type, price,
//! availability), as read from a catalog JSON file (docs/catalog.md) or, later, from the EC2 APIs.
//!
//! A catalog file is read and validated once ([`Catalog::from_json`]); the optimizer then asks each
//! [`InstanceType`] for its capacity, its allocatable room under a NodeClass's kubelet settings
//! (`capacity` module, Karpenter's AWS model) and the well-known labels a node of it carries
//! (`labels`).

pub mod build;
mod capacity;
mod ebs;
mod labels;

use serde::{Deserialize, Serialize};

use crate::domain::{Quantity, Resources};

pub use capacity::{cpu_reserved_milli, eni_max_pods};
pub use ebs::{EbsLimit, EbsLimitKind};

/// Bounds a catalog entry must stay within (see `Catalog::validate`).
const MAX_VCPU: u64 = 1 << 16;
const MAX_MEMORY_MIB: u64 = 1 << 34;
/// Far above EC2's largest instance store (335,520 GB on d3en.12xlarge), and low enough that the
/// array's size in bytes stays exact in ephemeral-storage arithmetic.
const MAX_LOCAL_NVME_GB: u64 = 1 << 19;

/// `on-demand` or `spot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CapacityType {
    #[serde(rename = "on-demand")]
    OnDemand,
    #[serde(rename = "spot")]
    Spot,
}

impl CapacityType {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
        }
    }

    /// The value of the `karpenter.sh/capacity-type` label.
    pub fn parse(s: &str) -> Option<CapacityType> {
        match s {
            "on-demand" => Some(CapacityType::OnDemand),
            "spot" => Some(CapacityType::Spot),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Arch {
    #[serde(rename = "amd64")]
    Amd64,
    #[serde(rename = "arm64")]
    Arm64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub count: u32,
    pub manufacturer: String,
    pub name: String,
    pub memory_mib: u64,
}

/// One place and way to buy an instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    /// US dollars per instance-hour.
    pub price: f64,
    #[serde(default = "yes")]
    pub available: bool,
    /// The price is an estimate (Spot Advisor savings), not an observed price.
    #[serde(default, skip_serializing_if = "is_false")]
    pub price_estimated: bool,
    /// Spot Advisor interruption band (0 `<5%` .. 4 `>20%`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_band: Option<u8>,
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    pub vcpu: u32,
    pub memory_mib: u64,
    pub arch: Arch,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_enis: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_per_eni: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Gpu>,
    /// Extra capacity: extended resources, or `ephemeral-storage`.
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub capacity: Resources,
    /// Extra node labels, added to the derived well-known ones.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::domain::Labels,
    /// When given, allocatable = capacity - overhead and the AWS model is not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_manufacturer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_nvme_gb: Option<u64>,
    /// How many disks the NVMe instance store has; each takes an EBS attachment slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_nvme_disks: Option<u32>,
    /// EC2's EBS attachment figures, when known; without them the limit is derived (`ebs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<EbsLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_bandwidth_mbps: Option<u64>,
    pub offerings: Vec<Offering>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub region: String,
    pub instance_types: Vec<InstanceType>,
    /// Where the data came from; free text kept with bundled catalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<serde_json::Value>,
}

/// A catalog file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The OS error is in the message, not a `source` (which `main` would print again).
    #[error("catalog {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("catalog: {path}: {message}")]
    Parse { path: String, message: String },
    #[error("catalog: instance type {name:?}: {message}")]
    Invalid { name: String, message: String },
    #[error(
        "catalog: no bundled catalog for region {0:?} (bundled: us-east-1, us-west-2, eu-west-1)"
    )]
    UnknownRegion(String),
    #[error("catalog build: {0}")]
    Build(String),
}

impl Catalog {
    /// Parses and validates catalog JSON; errors name the JSON path or the instance type.
    pub fn from_json(text: &str, origin: &str) -> Result<Catalog, CatalogError> {
        // serde_json reads a derived struct from an array too (fields by position), so a catalog
        // that is an array would fail on its first element with a message about a field type.
        // Leading whitespace is all JSON allows before the top-level value.
        if text
            .trim_start_matches([' ', '\t', '\n', '\r'])
            .starts_with('[')
        {
            return Err(CatalogError::Parse {
                path: origin.to_string(),
                message:
                    "invalid type: sequence, expected a catalog object (region, instance_types)"
                        .into(),
            });
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        let catalog: Catalog =
            serde_path_to_error::deserialize(de).map_err(|e| CatalogError::Parse {
                path: origin.to_string(),
                message: format!("field {}: {}", e.path(), e.inner()),
            })?;
        catalog.validate()?;
        Ok(catalog)
    }

    pub fn from_file(path: &std::path::Path) -> Result<Catalog, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|error| CatalogError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Catalog::from_json(&text, &path.display().to_string())
    }

    /// The catalog bundled for `region`, compiled into the binary.
    pub fn bundled(region: &str) -> Result<Catalog, CatalogError> {
        let text = match region {
            "us-east-1" => include_str!("../../fixtures/catalogs/us-east-1.json"),
            "us-west-2" => include_str!("../../fixtures/catalogs/us-west-2.json"),
            "eu-west-1" => include_str!("../../fixtures/catalogs/eu-west-1.json"),
            other => return Err(CatalogError::UnknownRegion(other.to_string())),
        };
        Catalog::from_json(text, &format!("bundled {region}"))
    }

    fn validate(&self) -> Result<(), CatalogError> {
        let mut seen = std::collections::BTreeSet::new();
        for it in &self.instance_types {
            let bad = |message: String| CatalogError::Invalid {
                name: it.name.clone(),
                message,
            };
            if !seen.insert(&it.name) {
                return Err(bad("listed twice".into()));
            }
            if it.vcpu == 0 || it.memory_mib == 0 {
                return Err(bad("vcpu and memory_mib must be positive".into()));
            }
            // far above any machine (EC2's largest has 24 TiB and 896 vCPUs), and low enough that
            // capacity arithmetic in millicores and bytes cannot overflow
            if u64::from(it.vcpu) > MAX_VCPU {
                return Err(bad(format!("vcpu {} is beyond {MAX_VCPU}", it.vcpu)));
            }
            if it.memory_mib > MAX_MEMORY_MIB {
                return Err(bad(format!(
                    "memory_mib {} is beyond {MAX_MEMORY_MIB}",
                    it.memory_mib
                )));
            }
            if let Some(gb) = it.local_nvme_gb.filter(|gb| *gb > MAX_LOCAL_NVME_GB) {
                return Err(bad(format!(
                    "local_nvme_gb {gb} is beyond {MAX_LOCAL_NVME_GB}"
                )));
            }
            if let Some(r) = it.capacity.first_negative() {
                return Err(bad(format!("capacity.{r} is negative")));
            }
            if let Some(r) = it.overhead.as_ref().and_then(|o| o.first_negative()) {
                return Err(bad(format!("overhead.{r} is negative")));
            }
            for (i, o) in it.offerings.iter().enumerate() {
                if !o.price.is_finite() || o.price < 0.0 {
                    return Err(bad(format!(
                        "offerings[{i}].price {} is not a non-negative number",
                        o.price
                    )));
                }
                if o.zone.is_empty() {
                    return Err(bad(format!("offerings[{i}].zone is empty")));
                }
            }
        }
        Ok(())
    }
}

impl InstanceType {
    /// A type with only its name, size and architecture set (no extras, no offerings), for
    /// building catalogs in code.
    pub fn new(name: &str, vcpu: u32, memory_mib: u64, arch: Arch) -> InstanceType {
        InstanceType {
            name: name.to_string(),
            vcpu,
            memory_mib,
            arch,
            max_pods: None,
            max_enis: None,
            ipv4_per_eni: None,
            gpu: None,
            capacity: Resources::new(),
            labels: Default::default(),
            overhead: None,
            hypervisor: None,
            cpu_manufacturer: None,
            local_nvme_gb: None,
            local_nvme_disks: None,
            ebs: None,
            network_bandwidth_mbps: None,
            offerings: vec![],
        }
    }

    /// Total memory as a quantity.
    pub fn memory(&self) -> Quantity {
        Quantity::from_mib(self.memory_mib as i64)
    }
}
