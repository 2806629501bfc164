//! The labels a node of an instance type carries: Kubernetes' and Karpenter's well-known labels
//! derived from the type's name and hardware, plus the catalog's extra labels. Zone, capacity type
//! and NodePool labels depend on the offering and are added by the optimizer.

use crate::domain::labels::{ARCH, INSTANCE_TYPE, OS, REGION};
use crate::domain::Labels;

use super::InstanceType;

const K: &str = "karpenter.k8s.aws/";

impl InstanceType {
    /// Well-known labels of this type in `region`.
    pub fn labels(&self, region: &str) -> Labels {
        let mut l = Labels::new();
        let mut put = |k: &str, v: String| {
            l.insert(k.to_string(), v);
        };
        put(INSTANCE_TYPE, self.name.clone());
        put(OS, "linux".into());
        put(ARCH, self.arch.as_str().into());
        if !region.is_empty() {
            put(REGION, region.into());
        }
        put(&format!("{K}instance-cpu"), self.vcpu.to_string());
        put(&format!("{K}instance-memory"), self.memory_mib.to_string());
        if let Some((family, size)) = self.name.split_once('.') {
            let category: String = family
                .chars()
                .take_while(|c| c.is_ascii_lowercase())
                .collect();
            let generation: String = family[category.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            put(&format!("{K}instance-family"), family.into());
            put(&format!("{K}instance-category"), category);
            if !generation.is_empty() {
                put(&format!("{K}instance-generation"), generation);
            }
            put(&format!("{K}instance-size"), size.into());
        }
        if let Some(g) = self.gpu.as_ref().filter(|g| g.count > 0) {
            put(&format!("{K}instance-gpu-count"), g.count.to_string());
            put(&format!("{K}instance-gpu-name"), g.name.to_lowercase());
            put(
                &format!("{K}instance-gpu-manufacturer"),
                g.manufacturer.to_lowercase(),
            );
            put(&format!("{K}instance-gpu-memory"), g.memory_mib.to_string());
        }
        if let Some(h) = &self.hypervisor {
            put(&format!("{K}instance-hypervisor"), h.clone());
        }
        if let Some(m) = &self.cpu_manufacturer {
            put(&format!("{K}instance-cpu-manufacturer"), m.to_lowercase());
        }
        if let Some(n) = self.local_nvme_gb.filter(|n| *n > 0) {
            put(&format!("{K}instance-local-nvme"), n.to_string());
        }
        if let Some(b) = self.network_bandwidth_mbps {
            put(&format!("{K}instance-network-bandwidth"), b.to_string());
        }
        for (k, v) in &self.labels {
            l.insert(k.clone(), v.clone());
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::{Arch, InstanceType};

    #[test]
    fn derives_family_category_generation_size() {
        let it: InstanceType = serde_json::from_value(serde_json::json!({
            "name": "c7gd.16xlarge", "vcpu": 64, "memory_mib": 131072, "arch": "arm64", "offerings": []
        }))
        .unwrap();
        assert_eq!(it.arch, Arch::Arm64);
        let l = it.labels("us-east-1");
        assert_eq!(l["karpenter.k8s.aws/instance-family"], "c7gd");
        assert_eq!(l["karpenter.k8s.aws/instance-category"], "c");
        assert_eq!(l["karpenter.k8s.aws/instance-generation"], "7");
        assert_eq!(l["karpenter.k8s.aws/instance-size"], "16xlarge");
        assert_eq!(l["kubernetes.io/arch"], "arm64");
        assert_eq!(l["topology.kubernetes.io/region"], "us-east-1");
    }
}
