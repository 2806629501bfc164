//! Storage in scenario files: StorageClasses in a short form (`storageClasses`), and a
//! StatefulSet's `volumeClaimTemplates`. Both are checked against the cluster and the catalog when
//! the scenario is read, so a class that does not exist, a zone no offering is in, or a size that
//! is not a quantity is reported with its field rather than leaving pods pending for the whole run.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::catalog::Catalog;
use crate::domain::labels::{NodeSelector, Requirement, ZONE};
use crate::domain::volume::{attach_driver, BindingMode, PodVolume, StorageClass, EBS_CSI_DRIVER};
use crate::domain::{ClusterSnapshot, Quantity};

use super::bad;
use crate::sim::SimError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct StorageClassFile {
    name: String,
    #[serde(default = "ebs")]
    provisioner: String,
    /// `Immediate` (Kubernetes' default) or `WaitForFirstConsumer`.
    #[serde(default)]
    volume_binding_mode: Option<String>,
    /// `allowedTopologies` by zone: volumes of the class are made only in these zones.
    #[serde(default)]
    allowed_zones: Vec<String>,
    /// The cluster's default class, for claim templates that name none.
    #[serde(default)]
    default: bool,
}

fn ebs() -> String {
    EBS_CSI_DRIVER.into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ClaimTemplateFile {
    name: String,
    #[serde(default)]
    storage_class_name: Option<String>,
    /// The requested size (`10Gi`).
    storage: String,
}

/// One of a StatefulSet's `volumeClaimTemplates`: its pod `<sts>-<i>` mounts the claim
/// `<name>-<sts>-<i>`, made from this template the first time that pod is created.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimTemplate {
    pub name: String,
    /// The class, resolved (the default class when the template names none).
    pub storage_class: String,
    pub storage: Quantity,
}

impl ClaimTemplate {
    /// The claim this template makes for the pod named `pod`, as Kubernetes names it.
    pub fn claim_for(&self, pod: &str) -> String {
        format!("{}-{pod}", self.name)
    }

    /// The volume the pod `pod` mounts from this template.
    pub fn volume_for(&self, pod: &str) -> PodVolume {
        PodVolume {
            name: self.name.clone(),
            claim: self.claim_for(pod),
            ephemeral: None,
        }
    }
}

/// Zones some offering of the catalog is in, sorted.
pub fn catalog_zones(catalog: &Catalog) -> Vec<String> {
    let zones: BTreeSet<&str> = catalog
        .instance_types
        .iter()
        .flat_map(|t| t.offerings.iter().map(|o| o.zone.as_str()))
        .collect();
    zones.into_iter().map(String::from).collect()
}

/// Adds the short-form classes to the cluster's storage. A name already used (here or by a
/// StorageClass manifest), an unknown binding mode, or a zone the catalog has no offering in is an
/// error naming the field.
pub(super) fn add_classes(
    files: &[StorageClassFile],
    catalog: &Catalog,
    cluster: &mut ClusterSnapshot,
    origin: &str,
) -> Result<(), SimError> {
    let zones = catalog_zones(catalog);
    for (i, f) in files.iter().enumerate() {
        let field = format!("storageClasses[{i}]");
        if f.name.is_empty() {
            return Err(bad(origin, &format!("{field}.name"), "must not be empty"));
        }
        if cluster.storage.classes.contains_key(&f.name) {
            return Err(bad(
                origin,
                &format!("{field}.name"),
                format!("StorageClass {} is defined twice", f.name),
            ));
        }
        let binding_mode = match f.volume_binding_mode.as_deref() {
            None | Some("Immediate") => BindingMode::Immediate,
            Some("WaitForFirstConsumer") => BindingMode::WaitForFirstConsumer,
            Some(other) => {
                return Err(bad(
                    origin,
                    &format!("{field}.volumeBindingMode"),
                    format!("unknown mode {other:?} (Immediate or WaitForFirstConsumer)"),
                ))
            }
        };
        for (j, z) in f.allowed_zones.iter().enumerate() {
            if !zones.contains(z) {
                return Err(bad(
                    origin,
                    &format!("{field}.allowedZones[{j}]"),
                    format!(
                        "zone {z:?} has no offering in the catalog (its zones: {})",
                        zones.join(", ")
                    ),
                ));
            }
        }
        let allowed_topologies = if f.allowed_zones.is_empty() {
            NodeSelector::default()
        } else {
            let zones: Vec<&str> = f.allowed_zones.iter().map(String::as_str).collect();
            NodeSelector {
                terms: vec![vec![Requirement::in_values(ZONE, &zones)]],
            }
        };
        cluster.storage.add_class(StorageClass {
            name: f.name.clone(),
            provisioner: f.provisioner.clone(),
            binding_mode,
            allowed_topologies,
            default: f.default,
        });
    }
    Ok(())
}

/// A StatefulSet's claim templates, checked: unique names, a class that exists and whose volumes
/// the simulator can make (EBS), and a positive size.
pub(super) fn claim_templates(
    files: &[ClaimTemplateFile],
    cluster: &ClusterSnapshot,
    origin: &str,
    field: &str,
) -> Result<Vec<ClaimTemplate>, SimError> {
    let mut out: Vec<ClaimTemplate> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let at = |name: &str| format!("{field}.volumeClaimTemplates[{i}].{name}");
        if !is_dns_label(&f.name) {
            return Err(bad(
                origin,
                &at("name"),
                format!("{:?} is not a lowercase DNS label", f.name),
            ));
        }
        if out.iter().any(|t| t.name == f.name) {
            return Err(bad(
                origin,
                &at("name"),
                format!("{} is named twice", f.name),
            ));
        }
        let class = match f.storage_class_name.as_deref() {
            Some(name) => cluster.storage.classes.get(name).ok_or_else(|| {
                bad(
                    origin,
                    &at("storageClassName"),
                    format!("StorageClass {name} is not defined (storageClasses or manifests)"),
                )
            })?,
            None => cluster.storage.default_class().ok_or_else(|| {
                bad(
                    origin,
                    &at("storageClassName"),
                    "missing, and no StorageClass is the default",
                )
            })?,
        };
        if attach_driver(&class.provisioner) != EBS_CSI_DRIVER {
            return Err(bad(
                origin,
                &at("storageClassName"),
                format!(
                    "StorageClass {} has provisioner {}: the simulator makes EBS volumes \
                     ({EBS_CSI_DRIVER}) only",
                    class.name, class.provisioner
                ),
            ));
        }
        let storage = Quantity::parse(&f.storage).map_err(|e| bad(origin, &at("storage"), e))?;
        if storage.milli() <= 0 {
            return Err(bad(origin, &at("storage"), "must be positive"));
        }
        out.push(ClaimTemplate {
            name: f.name.clone(),
            storage_class: class.name.clone(),
            storage,
        });
    }
    Ok(out)
}

/// The template's own claims (ones made beforehand, listed in the manifests) are kept; generic
/// ephemeral volumes are refused, since the simulator makes no per-pod claims for them.
pub(super) fn template_volumes(
    volumes: &[PodVolume],
    cluster: &ClusterSnapshot,
    namespace: &str,
    origin: &str,
    field: &str,
) -> Result<Vec<PodVolume>, SimError> {
    for v in volumes {
        let at = format!("{field}.template.spec.volumes");
        if v.ephemeral.is_some() {
            return Err(bad(
                origin,
                &at,
                format!(
                    "volume {:?} is a generic ephemeral volume, which the simulator does not \
                     make; use a StatefulSet's volumeClaimTemplates",
                    v.name
                ),
            ));
        }
        let key = format!("{namespace}/{}", v.claim);
        if !cluster.storage.claims.contains_key(&key) {
            return Err(bad(
                origin,
                &at,
                format!(
                    "volume {:?} names PersistentVolumeClaim {key}, which is not in the cluster",
                    v.name
                ),
            ));
        }
    }
    Ok(volumes.to_vec())
}

/// RFC 1123 label: what a claim name's prefix must be for `<name>-<sts>-<i>` to be a valid name.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use crate::sim::Scenario;

    const HEAD: &str = "name: x\nduration: 1h\ncatalog: ../../catalogs/test-assorted.json\n\
        manifests:\n- {apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: p}, \
        spec: {template: {spec: {requirements: []}}}}\n";

    fn parse(tail: &str) -> Result<Scenario, String> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/volumes");
        Scenario::parse(&format!("{HEAD}{tail}"), "x.yaml", Some(&dir)).map_err(|e| e.to_string())
    }

    const STS: &str = "workloads:\n- name: db\n  kind: StatefulSet\n  \
        template: {spec: {containers: [{name: c}]}}\n  replicas: {constant: 2}\n";

    #[test]
    fn a_statefulset_reads_its_claim_templates_and_classes() {
        let sc = parse(&format!(
            "storageClasses:\n- {{name: gp3, volumeBindingMode: WaitForFirstConsumer, \
             allowedZones: [test-zone-1, test-zone-2], default: true}}\n{STS}  \
             volumeClaimTemplates: [{{name: data, storage: 10Gi}}]\n"
        ))
        .unwrap();
        let class = &sc.cluster.storage.classes["gp3"];
        assert_eq!(
            class.binding_mode,
            crate::domain::volume::BindingMode::WaitForFirstConsumer
        );
        assert_eq!(class.allowed_topologies.terms[0][0].values.len(), 2);
        let crate::sim::scenario::WorkloadKind::StatefulSet { claims, .. } = &sc.workloads[0].kind
        else {
            panic!("{:?}", sc.workloads[0].kind)
        };
        assert_eq!(claims[0].storage_class, "gp3", "the default class");
        assert_eq!(claims[0].claim_for("db-1"), "data-db-1");
    }

    #[test]
    fn bad_storage_is_named_by_field() {
        let cases = [
            (
                format!("{STS}  volumeClaimTemplates: [{{name: data, storageClassName: nope, storage: 1Gi}}]\n"),
                "workloads[0].volumeClaimTemplates[0].storageClassName: StorageClass nope",
            ),
            (
                format!("{STS}  volumeClaimTemplates: [{{name: data, storage: 1Gi}}]\n"),
                "workloads[0].volumeClaimTemplates[0].storageClassName: missing",
            ),
            (
                format!("storageClasses: [{{name: s}}]\n{STS}  volumeClaimTemplates: [{{name: data, storageClassName: s, storage: lots}}]\n"),
                "workloads[0].volumeClaimTemplates[0].storage",
            ),
            (
                format!("storageClasses: [{{name: s}}]\n{STS}  volumeClaimTemplates: [{{name: Data, storageClassName: s, storage: 1Gi}}]\n"),
                "workloads[0].volumeClaimTemplates[0].name",
            ),
            (
                "storageClasses: [{name: s, volumeBindingMode: Later}]\n".to_string(),
                "storageClasses[0].volumeBindingMode: unknown mode",
            ),
            (
                "storageClasses: [{name: s, allowedZones: [us-east-1a]}]\n".to_string(),
                "storageClasses[0].allowedZones[0]: zone \"us-east-1a\"",
            ),
            (
                "storageClasses: [{name: s}, {name: s}]\n".to_string(),
                "storageClasses[1].name: StorageClass s is defined twice",
            ),
            (
                format!("storageClasses: [{{name: s, provisioner: efs.csi.aws.com}}]\n{STS}  volumeClaimTemplates: [{{name: data, storageClassName: s, storage: 1Gi}}]\n"),
                "workloads[0].volumeClaimTemplates[0].storageClassName: StorageClass s has \
                 provisioner efs.csi.aws.com",
            ),
            (
                "storageClasses: [{name: s}]\nworkloads:\n- name: w\n  template: {spec: {containers: [{name: c}]}}\n  replicas: {constant: 1}\n  volumeClaimTemplates: [{name: data, storageClassName: s, storage: 1Gi}]\n".to_string(),
                "workloads[0].volumeClaimTemplates: only a StatefulSet",
            ),
            (
                "workloads:\n- name: w\n  template: {spec: {containers: [{name: c}], volumes: [{name: v, persistentVolumeClaim: {claimName: gone}}]}}\n  replicas: {constant: 1}\n".to_string(),
                "workloads[0].template.spec.volumes: volume \"v\" names PersistentVolumeClaim default/gone",
            ),
        ];
        for (tail, want) in cases {
            let err = parse(&tail).unwrap_err();
            assert!(err.contains(&format!("x.yaml: {want}")), "{want}: {err}");
        }
    }
}
