//! EBS volume attachments a new node of an instance type takes: the number the EBS CSI driver
//! publishes as its CSINode `allocatable.count`, which the scheduler then holds pods to.
//!
//! Rules, as the driver applies them (kubernetes-sigs/aws-ebs-csi-driver at commit
//! `429e202e589798e55c0f8ddcc81b2850b7f000d0`, 2026-08-19: `pkg/driver/node.go` `getVolumesLimit`
//! and `pkg/cloud/limits/volume_limits.go`; the per-type rules before that table existed are in
//! `pkg/cloud/volume_limits.go` at `d199c1a1053c0bfbd43b94bf1f3f1aaae525016e`):
//! - Xen types have 39 slots for EBS volumes alone.
//! - Nitro types mostly share 28 slots between EBS volumes, network interfaces, NVMe instance-store
//!   disks and accelerators. EC2's `EbsInfo.MaximumEbsAttachments` states what is left with only
//!   the primary interface attached (27 on a plain type, 26 on c5d.large with its one NVMe disk).
//! - Some Nitro types (m7i, c7a and later) have a dedicated EBS limit that nothing else uses.
//! - From that the driver takes one slot for the root volume, one per other EBS volume the node
//!   was launched with, and, on a shared limit, one per network interface beyond the primary.
//!   It never publishes less than 1.
//!
//! When a catalog entry carries EC2's figures (`ebs`), they are used as they are. Otherwise the
//! limit is derived from the hypervisor, the NVMe instance store and the accelerators, choosing
//! the lower value wherever a fact is missing:
//! - an unknown hypervisor counts as Nitro with a shared limit (28 slots, fewer than Xen's 39 or
//!   any dedicated limit, which is 32 or more), and so do bare-metal types;
//! - a dedicated limit is not assumed: the catalog data has no field that tells it;
//! - an unknown number of NVMe disks is taken as one per 300 GB of instance store (every
//!   multi-disk NVMe type in moto 5.2.5's DescribeInstanceTypes data has disks of 300 GB or
//!   more, so this never undercounts), at least one and at most 24 (d3en.12xlarge's count);
//! - each GPU or Neuron device is taken to hold two slots (in the same data g5.48xlarge's eight
//!   GPUs hold sixteen, the most per device).
//!
//! Checked against EbsInfo for all 1,395 types of that data with two interfaces attached, the
//! derived limit is never above the driver's except for dl2q.24xlarge and vt1.3xlarge/6xlarge,
//! whose accelerators the catalog does not record, and the mac types, which catalogs leave out.
//!
//! Network interfaces: the driver counts those attached when it starts, which is early in the
//! node's life, and the VPC CNI attaches more only as pods need addresses. joiner assumes two
//! (the primary one and the one the CNI adds once the first pods, the driver's own among them,
//! take addresses), or one on a type that allows only one. Counting every interface the type
//! allows would understate the published limit on large types by up to a dozen.

use super::InstanceType;
use crate::domain::NodeClass;

/// Shared slots of a Nitro instance for EBS volumes, interfaces and instance-store disks.
const NITRO_SHARED_SLOTS: u32 = 28;
/// EBS slots of a Xen instance.
const XEN_SLOTS: u32 = 39;
/// Network interfaces assumed attached when the driver starts (see the module comment).
const ENIS_AT_DRIVER_START: u32 = 2;
/// Instance-store bytes per NVMe disk that an unknown disk count is estimated with, in GB.
const GB_PER_NVME_DISK_ESTIMATE: u64 = 300;
/// The most NVMe disks any EC2 type has.
const MAX_NVME_DISKS: u32 = 24;
/// Attachment slots each GPU or Neuron device is assumed to take on a shared limit.
const SLOTS_PER_ACCELERATOR: u32 = 2;

/// Whether an EBS attachment limit is shared with other devices or for EBS volumes alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EbsLimitKind {
    Shared,
    Dedicated,
}

/// EC2's `EbsInfo` for a type: `MaximumEbsAttachments` and `AttachmentLimitType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EbsLimit {
    pub max_attachments: u32,
    pub limit: EbsLimitKind,
}

impl InstanceType {
    /// EBS volumes, beyond those the node class attaches at launch, that a new node of this type
    /// can attach, as its CSINode will report.
    pub fn ebs_attach_limit(&self, class: Option<&NodeClass>) -> u32 {
        // the root volume and the class's other launch volumes
        let launch_volumes = 1 + class.map_or(0, |c| c.launch_data_volumes);
        let enis = self
            .max_enis
            .map_or(ENIS_AT_DRIVER_START, |n| n.clamp(1, ENIS_AT_DRIVER_START));
        let is_xen = self
            .hypervisor
            .as_deref()
            .is_some_and(|h| h.eq_ignore_ascii_case("xen"));
        let available = if is_xen {
            XEN_SLOTS.saturating_sub(launch_volumes)
        } else if let Some(ebs) = self.ebs {
            let others = match ebs.limit {
                EbsLimitKind::Dedicated => 0,
                // EC2's figure already leaves out the primary interface
                EbsLimitKind::Shared => enis - 1,
            };
            ebs.max_attachments
                .saturating_sub(launch_volumes)
                .saturating_sub(others)
        } else {
            NITRO_SHARED_SLOTS
                .saturating_sub(enis)
                .saturating_sub(self.nvme_disks())
                .saturating_sub(self.accelerators().saturating_mul(SLOTS_PER_ACCELERATOR))
                .saturating_sub(launch_volumes)
        };
        // the driver publishes at least 1, as Kubernetes reads 0 as no limit
        available.max(1)
    }

    /// NVMe instance-store disks: the catalog's count, or an estimate that does not undercount.
    fn nvme_disks(&self) -> u32 {
        let Some(gb) = self.local_nvme_gb.filter(|gb| *gb > 0) else {
            return 0;
        };
        if let Some(n) = self.local_nvme_disks {
            return n;
        }
        let estimate = gb / GB_PER_NVME_DISK_ESTIMATE;
        u32::try_from(estimate)
            .unwrap_or(MAX_NVME_DISKS)
            .clamp(1, MAX_NVME_DISKS)
    }

    /// GPUs and Neuron devices.
    fn accelerators(&self) -> u32 {
        let gpus = self.gpu.as_ref().map_or(0, |g| g.count);
        let neuron = self.capacity.get(super::build::NEURON_RESOURCE).milli() / 1000;
        gpus.saturating_add(u32::try_from(neuron.max(0)).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Arch, Gpu};
    use crate::domain::{Quantity, Resources};

    fn nitro(name: &str, enis: u32) -> InstanceType {
        InstanceType {
            max_enis: Some(enis),
            hypervisor: Some("nitro".into()),
            ..InstanceType::new(name, 2, 8192, Arch::Amd64)
        }
    }

    #[test]
    fn m5_large_shares_28_slots_with_two_interfaces_and_the_root_volume() {
        // 28 - 2 ENIs - 0 NVMe - 1 root = 25; the driver publishes 26 when it starts with one ENI
        assert_eq!(nitro("m5.large", 3).ebs_attach_limit(None), 25);
    }

    #[test]
    fn c5d_large_loses_a_slot_to_its_nvme_disk() {
        // 50 GB of NVMe: an estimate of one disk, as EC2 has; 28 - 2 - 1 - 1 = 24
        let c5d = InstanceType {
            local_nvme_gb: Some(50),
            ..nitro("c5d.large", 3)
        };
        assert_eq!(c5d.ebs_attach_limit(None), 24);
        // c5d.24xlarge: 3600 GB is estimated as 12 disks (EC2 has 4): 28 - 2 - 12 - 1 = 13
        let big = InstanceType {
            local_nvme_gb: Some(3600),
            ..nitro("c5d.24xlarge", 15)
        };
        assert_eq!(big.ebs_attach_limit(None), 13);
        // with the count stated: 28 - 2 - 4 - 1 = 21
        let stated = InstanceType {
            local_nvme_disks: Some(4),
            ..big
        };
        assert_eq!(stated.ebs_attach_limit(None), 21);
    }

    #[test]
    fn xen_m4_large_has_39_less_the_root() {
        let m4 = InstanceType {
            hypervisor: Some("xen".into()),
            ..nitro("m4.large", 2)
        };
        assert_eq!(m4.ebs_attach_limit(None), 38);
    }

    #[test]
    fn dedicated_limit_from_ec2_figures_ignores_interfaces() {
        // m7i.large: EbsInfo 32 dedicated -> 32 - 1 root = 31
        let m7i = InstanceType {
            ebs: Some(EbsLimit {
                max_attachments: 32,
                limit: EbsLimitKind::Dedicated,
            }),
            ..nitro("m7i.large", 3)
        };
        assert_eq!(m7i.ebs_attach_limit(None), 31);
        // without the figures it is taken as shared: 28 - 2 - 1 = 25
        assert_eq!(nitro("m7i.large", 3).ebs_attach_limit(None), 25);
        // m5.large with EC2's shared 27: 27 - 1 root - (2 - 1) ENIs = 25, as derived
        let m5 = InstanceType {
            ebs: Some(EbsLimit {
                max_attachments: 27,
                limit: EbsLimitKind::Shared,
            }),
            ..nitro("m5.large", 3)
        };
        assert_eq!(m5.ebs_attach_limit(None), 25);
    }

    #[test]
    fn launch_volumes_and_accelerators_take_slots() {
        let class = NodeClass {
            launch_data_volumes: 1,
            ..Default::default()
        };
        assert_eq!(nitro("m5.large", 3).ebs_attach_limit(Some(&class)), 24);
        // g5.xlarge: 1 GPU (2 slots) and a 250 GB NVMe disk: 28 - 2 - 1 - 2 - 1 = 22 (EC2: 25-1-1 = 23)
        let g5 = InstanceType {
            gpu: Some(Gpu {
                count: 1,
                manufacturer: "NVIDIA".into(),
                name: "A10G".into(),
                memory_mib: 22888,
            }),
            local_nvme_gb: Some(250),
            ..nitro("g5.xlarge", 4)
        };
        assert_eq!(g5.ebs_attach_limit(None), 22);
        // inf1.24xlarge: 16 Neuron devices leave nothing: the floor of 1
        let inf1 = InstanceType {
            capacity: Resources::new().with("aws.amazon.com/neuron", Quantity::from_units(16)),
            ..nitro("inf1.24xlarge", 11)
        };
        assert_eq!(inf1.ebs_attach_limit(None), 1);
    }

    #[test]
    fn unknown_hypervisor_and_interfaces_count_as_nitro_with_two() {
        let t = InstanceType::new("x.large", 2, 4096, Arch::Amd64);
        assert_eq!(t.ebs_attach_limit(None), 25);
        let one = nitro("t.nano", 1);
        assert_eq!(one.ebs_attach_limit(None), 26);
    }
}
