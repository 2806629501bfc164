//! Karpenter's v1 custom resources as typed Rust objects: `karpenter.sh/v1` NodePool and NodeClaim
//! and `karpenter.k8s.aws/v1` EC2NodeClass. The in-cluster controller reads and writes these
//! through `kube::Api<NodePool>` etc.; `joiner crds` prints their CustomResourceDefinitions
//! (`NodePool::crd()`), whose schemas carry Karpenter's defaults and validation (patterns, ranges
//! and CEL rules), so joiner can be installed in place of Karpenter and existing manifests keep
//! working. This module only describes the objects; converting them into the decision core's
//! `domain` types is done elsewhere. It also holds the well-known label, annotation, taint and
//! finalizer names the controller puts on NodeClaims and Nodes, and the condition types.

mod common;
mod ec2nodeclass;
mod nodeclaim;
mod nodepool;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

#[cfg(feature = "cluster")]
pub(crate) use common::deserialize_conditions;
pub use common::{
    find_condition, parse_duration, parse_nillable_duration, set_condition, DurationError,
    HasConditions, NodeClassReference, NodeSelectorRequirementWithMinValues, RequirementOperator,
    DURATION_PATTERN, NEVER, NILLABLE_DURATION_PATTERN,
};
pub use ec2nodeclass::*;
pub use nodeclaim::*;
pub use nodepool::*;

pub use crate::domain::labels::{CAPACITY_TYPE as CAPACITY_TYPE_LABEL, NODEPOOL as NODEPOOL_LABEL};

/// Condition on every kind: the object is fully usable (for a NodeClaim: Launched, Registered and
/// Initialized; for a NodePool: ValidationSucceeded and NodeClassReady; for an EC2NodeClass: every
/// `*Ready` condition).
pub const READY: &str = "Ready";

/// Group of NodePool and NodeClaim.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// Group of EC2NodeClass.
pub const KARPENTER_AWS_GROUP: &str = "karpenter.k8s.aws";

/// Finalizer on NodeClaims and Nodes: the instance is terminated and the node drained before the
/// object goes away.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Node label set to `true` once the Node of a NodeClaim has registered.
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Node label set to `true` once the node is initialized (ready, startup taints removed).
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// Node label naming the EC2NodeClass the node was launched from.
pub const EC2NODECLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Annotation on a NodePool and its NodeClaims with the hash of the NodePool template, for drift.
/// (`snapshot::karpenter` has a crate-private copy of the same string.)
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// Annotation with the version of the hashing scheme behind `NODEPOOL_HASH`.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// Annotation on pods and nodes that blocks voluntary disruption.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// Key of the taint a node carries until it registers with its NodeClaim (effect `NoExecute`).
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
/// Effect of the unregistered taint.
pub const UNREGISTERED_TAINT_EFFECT: &str = "NoExecute";
/// Key of the taint put on a node being disrupted so nothing new lands there (effect `NoSchedule`).
pub use crate::domain::DISRUPTED_TAINT;
/// Effect of the disrupted taint.
pub const DISRUPTED_TAINT_EFFECT: &str = "NoSchedule";

/// The taint a new node carries until it registers.
pub fn unregistered_taint() -> k8s_openapi::api::core::v1::Taint {
    taint(UNREGISTERED_TAINT, UNREGISTERED_TAINT_EFFECT)
}

/// The taint put on nodes being disrupted.
pub fn disrupted_taint() -> k8s_openapi::api::core::v1::Taint {
    taint(DISRUPTED_TAINT, DISRUPTED_TAINT_EFFECT)
}

fn taint(key: &str, effect: &str) -> k8s_openapi::api::core::v1::Taint {
    k8s_openapi::api::core::v1::Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        ..Default::default()
    }
}

/// The three CustomResourceDefinitions, in the order `joiner crds` prints them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![NodePool::crd(), NodeClaim::crd(), EC2NodeClass::crd()]
}

/// The CRDs as one YAML stream, each document starting with `---`, as `joiner crds` prints it.
pub fn crds_yaml() -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_taints_have_karpenters_effects() {
        let (u, d) = (unregistered_taint(), disrupted_taint());
        assert_eq!(
            (u.key.as_str(), u.effect.as_str()),
            ("karpenter.sh/unregistered", "NoExecute")
        );
        assert_eq!(
            (d.key.as_str(), d.effect.as_str()),
            ("karpenter.sh/disrupted", "NoSchedule")
        );
    }

    #[test]
    fn crds_yaml_is_a_three_document_stream() {
        let text = crds_yaml().expect("crds render");
        assert!(text.starts_with("---\n"));
        assert_eq!(text.matches("\n---\n").count(), 2);
        let names: Vec<String> = crds()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            [
                "nodepools.karpenter.sh",
                "nodeclaims.karpenter.sh",
                "ec2nodeclasses.karpenter.k8s.aws"
            ]
        );
    }
}
