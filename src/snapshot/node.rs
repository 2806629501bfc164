//! v1 Nodes: labels, taints, capacity and allocatable, cordon and readiness.

use k8s_openapi::api::core::v1 as core;

use crate::domain::Node;

use super::convert::{api_resources, taint, FieldError, FieldResult};

pub(crate) fn convert_node(node: core::Node) -> FieldResult<Node> {
    let meta = &node.metadata;
    let name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(taint(
            &t.key,
            t.value.as_deref(),
            &t.effect,
            &format!("spec.taints[{i}]"),
        )?);
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    Ok(Node {
        name,
        labels: meta.labels.clone().unwrap_or_default(),
        taints,
        capacity: api_resources(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?,
        allocatable: api_resources(
            status.and_then(|s| s.allocatable.as_ref()),
            "status.allocatable",
        )?,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready,
        provider_id: spec
            .and_then(|s| s.provider_id.clone())
            .filter(|p| !p.is_empty()),
        created: meta.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        annotations: meta.annotations.clone().unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Quantity, TaintEffect};
    use crate::snapshot::convert::typed;

    fn node(yaml: &str) -> FieldResult<Node> {
        convert_node(typed(serde_yaml_ng::from_str(yaml).unwrap())?)
    }

    #[test]
    fn reads_node_fields() {
        let n = node(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {a: b}\n  creationTimestamp: \"2024-05-01T10:00:00Z\"\n\
             spec:\n  providerID: aws:///us-east-1a/i-1\n  unschedulable: true\n  taints:\n  - {key: k, value: v, effect: NoSchedule}\n\
             status:\n  capacity: {cpu: \"4\", memory: 16Gi, pods: \"110\"}\n  allocatable: {cpu: 3920m}\n  \
             conditions:\n  - {type: Ready, status: \"True\"}\n",
        )
        .unwrap();
        assert_eq!(n.name, "n1");
        assert!(n.unschedulable && n.ready);
        assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(n.capacity.get("pods"), Quantity::from_units(110));
        assert_eq!(n.allocatable.get("cpu"), Quantity::from_milli(3920));
        assert_eq!(n.provider_id.as_deref(), Some("aws:///us-east-1a/i-1"));
        assert_eq!(n.created.as_deref(), Some("2024-05-01T10:00:00Z"));
    }

    #[test]
    fn not_ready_without_condition_and_bad_effect_fails() {
        assert!(
            !node("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
                .unwrap()
                .ready
        );
        let e =
            node("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints: [{key: k, effect: Sometimes}]\n")
                .unwrap_err();
        assert_eq!(e.path, "spec.taints[0].effect");
        assert_eq!(e.message, "unknown taint effect \"Sometimes\"");
    }
}
