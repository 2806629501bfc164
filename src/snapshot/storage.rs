//! PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes, and the claims a pod's
//! volumes name. What they demand of a node is worked out later, once every object is read
//! (`ClusterSnapshot::resolve_volumes`), since a pod and its claim may come in either order.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;

use crate::domain::labels::{NodeSelector, Operator, Requirement, HOSTNAME};
use crate::domain::volume::{
    BindingMode, ClaimPhase, PersistentVolume, PersistentVolumeClaim, PodVolume, StorageClass,
    DEFAULT_CLASS_ANNOTATION, IN_TREE_EBS,
};

use super::convert::{FieldError, FieldResult};
use super::pod::namespace_of;
use super::scheduling::node_selector;

fn name_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> FieldResult<String> {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "missing"))
}

pub(crate) fn convert_storage_class(sc: storage::StorageClass) -> FieldResult<StorageClass> {
    let name = name_of(&sc.metadata)?;
    let binding_mode = match sc.volume_binding_mode.as_deref() {
        None | Some("Immediate") => BindingMode::Immediate,
        Some("WaitForFirstConsumer") => BindingMode::WaitForFirstConsumer,
        Some(other) => {
            return Err(FieldError::new(
                "volumeBindingMode",
                format!("unsupported value {other:?} (Immediate or WaitForFirstConsumer)"),
            ))
        }
    };
    let mut terms = Vec::new();
    for (i, term) in sc.allowed_topologies.iter().flatten().enumerate() {
        let mut reqs = Vec::new();
        for (j, e) in term.match_label_expressions.iter().flatten().enumerate() {
            if e.values.is_empty() {
                let path = format!("allowedTopologies[{i}].matchLabelExpressions[{j}].values");
                return Err(FieldError::new(path, "must not be empty"));
            }
            reqs.push(Requirement {
                key: e.key.clone(),
                operator: Operator::In,
                values: e.values.clone(),
                min_values: None,
            });
        }
        if !reqs.is_empty() {
            terms.push(reqs);
        }
    }
    let default = sc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true");
    Ok(StorageClass {
        name,
        provisioner: sc.provisioner,
        binding_mode,
        allowed_topologies: NodeSelector { terms },
        default,
    })
}

pub(crate) fn convert_volume(pv: core::PersistentVolume) -> FieldResult<PersistentVolume> {
    let name = name_of(&pv.metadata)?;
    let spec = pv.spec.unwrap_or_default();
    let driver = if let Some(csi) = &spec.csi {
        Some(csi.driver.clone())
    } else if spec.aws_elastic_block_store.is_some() {
        Some(IN_TREE_EBS.to_string())
    } else {
        None
    };
    let mut node_affinity = match spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
    {
        Some(sel) => node_selector(sel, "spec.nodeAffinity.required")?,
        None => NodeSelector::default(),
    };
    // A local or hostPath volume's hostname pin is not kept: its pod may be rescheduled to a new
    // node (with new, empty storage), as Karpenter and the local static provisioner allow.
    if spec.local.is_some() || spec.host_path.is_some() {
        for term in &mut node_affinity.terms {
            term.retain(|r| r.key != HOSTNAME);
        }
        if node_affinity.terms.iter().any(Vec::is_empty) {
            node_affinity.terms.clear();
        }
    }
    Ok(PersistentVolume {
        name,
        driver,
        node_affinity,
    })
}

pub(crate) fn convert_claim(
    pvc: core::PersistentVolumeClaim,
) -> FieldResult<PersistentVolumeClaim> {
    let name = name_of(&pvc.metadata)?;
    let namespace = namespace_of(&pvc.metadata);
    let spec = pvc.spec.unwrap_or_default();
    let phase = match pvc.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => ClaimPhase::Pending,
        Some("Bound") => ClaimPhase::Bound,
        Some("Lost") => ClaimPhase::Lost,
        Some(other) => {
            return Err(FieldError::new(
                "status.phase",
                format!("unknown phase {other:?} (Pending, Bound or Lost)"),
            ))
        }
    };
    Ok(PersistentVolumeClaim {
        namespace,
        name,
        volume_name: spec.volume_name.filter(|v| !v.is_empty()),
        storage_class: spec.storage_class_name,
        phase,
        deleting: pvc.metadata.deletion_timestamp.is_some(),
    })
}

/// A CSINode: its node's name and each driver's attach limit (`allocatable.count`), where stated.
pub(crate) fn convert_csi_node(
    csi: storage::CSINode,
) -> FieldResult<(String, std::collections::BTreeMap<String, u32>)> {
    let name = name_of(&csi.metadata)?;
    let mut limits = std::collections::BTreeMap::new();
    for (i, d) in csi.spec.drivers.iter().enumerate() {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            let count = u32::try_from(count).map_err(|_| {
                FieldError::new(
                    format!("spec.drivers[{i}].allocatable.count"),
                    format!("negative count {count}"),
                )
            })?;
            limits.insert(d.name.clone(), count);
        }
    }
    Ok((name, limits))
}

/// The volumes of a pod that go through a claim: `persistentVolumeClaim` sources and generic
/// ephemeral volumes (whose claim is named `<pod>-<volume>`).
pub(crate) fn pod_volumes(pod: &str, spec: &core::PodSpec) -> Vec<PodVolume> {
    let mut out = Vec::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(pvc) = &v.persistent_volume_claim {
            out.push(PodVolume {
                name: v.name.clone(),
                claim: pvc.claim_name.clone(),
                ephemeral: None,
            });
        } else if let Some(eph) = &v.ephemeral {
            let class = eph
                .volume_claim_template
                .as_ref()
                .and_then(|t| t.spec.storage_class_name.clone());
            out.push(PodVolume {
                name: v.name.clone(),
                claim: format!("{pod}-{}", v.name),
                ephemeral: Some(class),
            });
        }
    }
    out
}
