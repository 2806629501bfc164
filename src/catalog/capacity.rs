//! Capacity and allocatable room of an instance type, following Karpenter's AWS model: memory less
//! a 7.5% VM overhead, ENI-limited max pods, tiered kube-reserved CPU, `11 * pods + 255` MiB
//! kube-reserved memory and a 100Mi eviction threshold, each overridable by the EC2NodeClass
//! kubelet settings.

use crate::domain::resources::{AMD_GPU, CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS};
use crate::domain::{KubeletSettings, Quantity, Resources};

use super::InstanceType;

/// VM_MEMORY_OVERHEAD_PERCENT default, in thousandths.
const VM_OVERHEAD_PERMILLE: u64 = 75;
/// Pods when neither the catalog nor ENI data say (kubelet's default).
const DEFAULT_MAX_PODS: u32 = 110;

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

    /// What the node reports as capacity.
    pub fn capacity(&self, kubelet: Option<&KubeletSettings>) -> Resources {
        let mut cap = Resources::new()
            .with(CPU, Quantity::from_units(i64::from(self.vcpu)))
            .with(MEMORY, self.memory())
            .with(PODS, Quantity::from_units(i64::from(self.pods(kubelet))));
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
        cap
    }

    /// Room left for pods: capacity less kube-reserved, system-reserved and the eviction threshold,
    /// or less the catalog's explicit `overhead`.
    pub fn allocatable(&self, kubelet: Option<&KubeletSettings>) -> Resources {
        let cap = self.capacity(kubelet);
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
        // ephemeral storage is only modelled when the catalog states the root volume (bundled
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
    fn explicit_overhead_replaces_the_model() {
        let mut it = m5_large();
        it.overhead = Some(Resources::new().with(CPU, Quantity::from_milli(100)));
        assert_eq!(it.allocatable(None).get(CPU), Quantity::from_milli(1900));
        assert_eq!(it.allocatable(None).get(MEMORY), Quantity::from_mib(8192));
    }
}
