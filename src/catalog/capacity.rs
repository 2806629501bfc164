//! Capacity and allocatable room of an instance type, following Karpenter's AWS model: memory less
//! a 7.5% VM overhead, ENI-limited max pods, tiered kube-reserved CPU, `11 * pods + 255` MiB
//! kube-reserved memory and a 100Mi eviction threshold, each overridable by the EC2NodeClass
//! kubelet settings; ephemeral storage from the EC2NodeClass's volumes (the instance-store RAID0
//! array, else the volume it states for the root filesystem, else the catalog's figure, which
//! bundled catalogs set to Karpenter's default 20Gi) with 1Gi kube-reserved and 10% held for
//! eviction; and the EBS attachments the CSI driver will allow (`ebs`).

use crate::domain::resources::{AMD_GPU, CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS};
use crate::domain::volume::ebs_attach_resource;
use crate::domain::{KubeletSettings, NodeClass, Quantity, Resources};

use super::InstanceType;

/// VM_MEMORY_OVERHEAD_PERCENT default, in thousandths.
const VM_OVERHEAD_PERMILLE: u64 = 75;
/// Pods when neither the catalog nor ENI data say (kubelet's default).
const DEFAULT_MAX_PODS: u32 = 110;
/// Bytes in the GB that EC2 states instance-store sizes in.
const BYTES_PER_GB: i64 = 1_000_000_000;

/// The VPC CNI limit without prefix delegation.
pub fn eni_max_pods(max_enis: u32, ipv4_per_eni: u32) -> u32 {
    max_enis
        .saturating_mul(ipv4_per_eni.saturating_sub(1))
        .saturating_add(2)
}

/// kube-reserved CPU in millicores for `vcpu` cores: 6% of the first core, 1% of the second, 0.5%
/// of cores three and four, 0.25% of the rest; rounded up.
pub fn cpu_reserved_milli(vcpu: u32) -> i64 {
    let cores = i64::from(vcpu);
    // in micro-cores so the 0.25% tier stays exact
    let micro = 60_000 * cores.min(1)
        + 10_000 * (cores - 1).clamp(0, 1)
        + 5_000 * (cores - 2).clamp(0, 2)
        + 2_500 * (cores - 4).max(0);
    (micro + 999) / 1000
}

impl InstanceType {
    /// Max pods under the NodeClass's kubelet settings.
    pub fn pods(&self, kubelet: Option<&KubeletSettings>) -> u32 {
        let base = kubelet
            .and_then(|k| k.max_pods)
            .or(self.max_pods)
            .or_else(|| Some(eni_max_pods(self.max_enis?, self.ipv4_per_eni?)))
            .unwrap_or(DEFAULT_MAX_PODS);
        match kubelet.and_then(|k| k.pods_per_core).filter(|p| *p > 0) {
            Some(per_core) => base.min(per_core.saturating_mul(self.vcpu)),
            None => base,
        }
    }

    /// What the node reports as capacity under kubelet settings alone: no node class states its
    /// volumes, so ephemeral storage is the catalog's figure and only the root volume is attached.
    pub fn capacity(&self, kubelet: Option<&KubeletSettings>) -> Resources {
        self.capacity_in(kubelet, None)
    }

    /// Room left for pods under kubelet settings alone (see [`InstanceType::capacity`]).
    pub fn allocatable(&self, kubelet: Option<&KubeletSettings>) -> Resources {
        self.allocatable_in(kubelet, None)
    }

    /// What a node launched with `class` reports as capacity: its kubelet settings and volumes.
    pub fn node_capacity(&self, class: Option<&NodeClass>) -> Resources {
        self.capacity_in(class.map(|c| &c.kubelet), class)
    }

    /// Room left for pods on a node launched with `class`.
    pub fn node_allocatable(&self, class: Option<&NodeClass>) -> Resources {
        self.allocatable_in(class.map(|c| &c.kubelet), class)
    }

    fn capacity_in(
        &self,
        kubelet: Option<&KubeletSettings>,
        class: Option<&NodeClass>,
    ) -> Resources {
        let mut cap = Resources::new()
            .with(CPU, Quantity::from_units(i64::from(self.vcpu)))
            .with(MEMORY, self.memory())
            .with(PODS, Quantity::from_units(i64::from(self.pods(kubelet))))
            .with(
                &ebs_attach_resource(),
                Quantity::from_units(i64::from(self.ebs_attach_limit(class))),
            );
        if let Some(gpu) = self.gpu.as_ref().filter(|g| g.count > 0) {
            let name = if gpu.manufacturer.eq_ignore_ascii_case("amd") {
                AMD_GPU
            } else {
                NVIDIA_GPU
            };
            cap.set(name, Quantity::from_units(i64::from(gpu.count)));
        }
        for (name, q) in self.capacity.iter() {
            cap.set(name, q);
        }
        // what the class launches with is more specific than the catalog's per-type figure
        if let Some(storage) = self.ephemeral_storage(class) {
            cap.set(EPHEMERAL_STORAGE, storage);
        }
        cap
    }

    /// Ephemeral storage a node launched with `class` has, when the class decides it: the
    /// instance-store RAID0 array on a type that has NVMe instance store, else the volume the
    /// class states for the root filesystem.
    fn ephemeral_storage(&self, class: Option<&NodeClass>) -> Option<Quantity> {
        let class = class?;
        let raid = self
            .local_nvme_gb
            .filter(|gb| *gb > 0 && class.instance_store_raid0)
            .map(|gb| {
                Quantity::from_units(
                    i64::try_from(gb)
                        .unwrap_or(i64::MAX)
                        .saturating_mul(BYTES_PER_GB),
                )
            });
        raid.or(class.ephemeral_volume)
    }

    /// Room left for pods: capacity less kube-reserved, system-reserved and the eviction threshold,
    /// or less the catalog's explicit `overhead`.
    fn allocatable_in(
        &self,
        kubelet: Option<&KubeletSettings>,
        class: Option<&NodeClass>,
    ) -> Resources {
        let cap = self.capacity_in(kubelet, class);
        if let Some(overhead) = &self.overhead {
            return clamp_zero(cap.minus(overhead));
        }
        let mut alloc = cap.clone();
        let mib = self.memory_mib;
        let vm_overhead_mib = (mib * VM_OVERHEAD_PERMILLE).div_ceil(1000);
        alloc.set(
            MEMORY,
            Quantity::from_mib((mib - vm_overhead_mib.min(mib)) as i64),
        );
        let pods = i64::from(self.pods(kubelet));
        let mut kube_reserved = Resources::new()
            .with(CPU, Quantity::from_milli(cpu_reserved_milli(self.vcpu)))
            .with(MEMORY, Quantity::from_mib(11 * pods + 255));
        let mut eviction = Resources::new().with(MEMORY, Quantity::from_mib(100));
        // ephemeral storage is only modelled when the catalog or the node class states it (bundled
        // catalogs carry Karpenter's default 20Gi); then 1Gi is kube-reserved and 10% held for
        // eviction
        if cap.get(EPHEMERAL_STORAGE).milli() > 0 {
            kube_reserved.set(EPHEMERAL_STORAGE, Quantity::from_units(1 << 30));
            eviction.set(
                EPHEMERAL_STORAGE,
                percent_of(cap.get(EPHEMERAL_STORAGE), 10),
            );
        }
        if let Some(k) = kubelet {
            for (name, q) in k.kube_reserved.iter() {
                kube_reserved.set(name, q);
            }
            alloc.sub(&k.system_reserved);
            for (signal, resource) in [
                ("memory.available", MEMORY),
                ("nodefs.available", EPHEMERAL_STORAGE),
            ] {
                if let Some(v) = k.eviction_hard.get(signal) {
                    eviction.set(resource, eviction_amount(v, cap.get(resource)));
                }
            }
        }
        alloc.sub(&kube_reserved);
        alloc.sub(&eviction);
        clamp_zero(alloc)
    }
}

/// An `evictionHard` value: a percentage of capacity or a quantity. Malformed values were rejected
/// when the NodeClass was read; anything else here counts as zero.
fn eviction_amount(value: &str, capacity: Quantity) -> Quantity {
    match value.trim().strip_suffix('%') {
        Some(p) => p
            .trim()
            .parse::<f64>()
            .map(|p| percent_of_f(capacity, p))
            .unwrap_or_default(),
        None => Quantity::parse(value).unwrap_or_default(),
    }
}

fn percent_of(q: Quantity, percent: i64) -> Quantity {
    Quantity::from_milli((q.milli() * percent + 99) / 100)
}

fn percent_of_f(q: Quantity, percent: f64) -> Quantity {
    Quantity::from_milli((q.milli() as f64 * percent / 100.0).ceil() as i64)
}

fn clamp_zero(r: Resources) -> Resources {
    r.iter()
        .map(|(k, v)| (k.to_string(), v.max(Quantity::ZERO)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Arch;

    fn m5_large() -> InstanceType {
        InstanceType {
            max_enis: Some(3),
            ipv4_per_eni: Some(10),
            ..InstanceType::new("m5.large", 2, 8192, Arch::Amd64)
        }
    }

    #[test]
    fn eni_formula_gives_max_pods() {
        assert_eq!(m5_large().pods(None), 29);
    }

    #[test]
    fn kube_reserved_cpu_tiers() {
        assert_eq!(cpu_reserved_milli(1), 60);
        assert_eq!(cpu_reserved_milli(2), 70);
        assert_eq!(cpu_reserved_milli(4), 80);
        assert_eq!(cpu_reserved_milli(8), 90);
        assert_eq!(cpu_reserved_milli(5), 83);
    }

    #[test]
    fn allocatable_matches_karpenter_for_m5_large() {
        let a = m5_large().allocatable(None);
        assert_eq!(a.get(CPU), Quantity::from_milli(1930));
        // 8192 - ceil(8192*0.075)=615 -> 7577; - (11*29+255)=574 -> 7003; - 100 eviction -> 6903
        assert_eq!(a.get(MEMORY), Quantity::from_mib(6903));
        assert_eq!(a.get(PODS), Quantity::from_units(29));
    }

    #[test]
    fn kubelet_settings_override_the_model() {
        let k = KubeletSettings {
            max_pods: Some(110),
            pods_per_core: Some(10),
            eviction_hard: [("memory.available".to_string(), "500Mi".to_string())].into(),
            system_reserved: Resources::new().with(CPU, Quantity::from_milli(100)),
            ..Default::default()
        };
        let it = m5_large();
        assert_eq!(it.pods(Some(&k)), 20);
        let a = it.allocatable(Some(&k));
        assert_eq!(a.get(CPU), Quantity::from_milli(1830));
        assert_eq!(
            a.get(MEMORY),
            Quantity::from_mib(7577 - (11 * 20 + 255) - 500)
        );
    }

    #[test]
    fn ephemeral_storage_follows_the_node_class() {
        let gib = |n: i64| Quantity::from_units(n << 30);
        let mut it = m5_large();
        it.capacity.set(EPHEMERAL_STORAGE, gib(20));
        // the catalog's 20Gi: 20 - 1 kube-reserved - 2 (10% eviction) = 17Gi
        assert_eq!(it.node_allocatable(None).get(EPHEMERAL_STORAGE), gib(17));
        let class = NodeClass {
            ephemeral_volume: Some(gib(100)),
            ..Default::default()
        };
        assert_eq!(
            it.node_capacity(Some(&class)).get(EPHEMERAL_STORAGE),
            gib(100)
        );
        // 100 - 1 - 10 = 89Gi
        assert_eq!(
            it.node_allocatable(Some(&class)).get(EPHEMERAL_STORAGE),
            gib(89)
        );
        // RAID0 on a type without instance store keeps the root volume
        let raid = NodeClass {
            instance_store_raid0: true,
            ..class.clone()
        };
        assert_eq!(
            it.node_capacity(Some(&raid)).get(EPHEMERAL_STORAGE),
            gib(100)
        );
        // c5d.large's 50 GB NVMe array: 50e9 - 1Gi - 5e9 bytes
        let c5d = InstanceType {
            local_nvme_gb: Some(50),
            ..InstanceType::new("c5d.large", 2, 4096, Arch::Amd64)
        };
        let cap = c5d.node_capacity(Some(&raid)).get(EPHEMERAL_STORAGE);
        assert_eq!(cap, Quantity::from_units(50_000_000_000));
        assert_eq!(
            c5d.node_allocatable(Some(&raid)).get(EPHEMERAL_STORAGE),
            Quantity::from_units(50_000_000_000 - (1 << 30) - 5_000_000_000)
        );
        // a class that states nothing leaves a catalog without the figure unmodelled
        let plain = NodeClass::default();
        assert_eq!(
            m5_large()
                .node_allocatable(Some(&plain))
                .get(EPHEMERAL_STORAGE),
            Quantity::ZERO
        );
    }

    #[test]
    fn capacity_carries_the_ebs_attach_limit() {
        let name = ebs_attach_resource();
        let it = InstanceType {
            hypervisor: Some("nitro".into()),
            ..m5_large()
        };
        assert_eq!(it.capacity(None).get(&name), Quantity::from_units(25));
        assert_eq!(it.allocatable(None).get(&name), Quantity::from_units(25));
        let class = NodeClass {
            launch_data_volumes: 2,
            ..Default::default()
        };
        assert_eq!(
            it.node_allocatable(Some(&class)).get(&name),
            Quantity::from_units(23)
        );
    }

    #[test]
    fn explicit_overhead_replaces_the_model() {
        let mut it = m5_large();
        it.overhead = Some(Resources::new().with(CPU, Quantity::from_milli(100)));
        assert_eq!(it.allocatable(None).get(CPU), Quantity::from_milli(1900));
        assert_eq!(it.allocatable(None).get(MEMORY), Quantity::from_mib(8192));
    }
}
