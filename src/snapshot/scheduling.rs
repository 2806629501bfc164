//! The scheduling constraints of a pod spec: nodeSelector, node affinity, tolerations, topology
//! spread and pod (anti-)affinity, converted to domain predicates.

use k8s_openapi::api::core::v1 as core;

use crate::domain::{
    Labels, NodeInclusionPolicy, NodeSelector, PodAffinityTerm, PodConstraints, Requirement,
    Toleration, TopologySpread, Weighted, WhenUnsatisfiable, HOSTNAME,
};

use super::convert::{
    label_requirement, label_selector, never_requirement, require_label, requirement, FieldError,
    FieldResult,
};

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// Fills the scheduling fields of `c` (whose namespace and labels are already set) from `spec`.
pub(crate) fn apply(c: &mut PodConstraints, spec: &core::PodSpec, path: &str) -> FieldResult<()> {
    for (key, value) in spec.node_selector.iter().flatten() {
        c.node_selector.push(requirement(
            key,
            "In",
            vec![value.clone()],
            None,
            &format!("{path}.nodeSelector.{key}"),
        )?);
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        c.tolerations
            .push(toleration(t, &format!("{path}.tolerations[{i}]"))?);
    }
    for (i, s) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        c.spread.push(spread(
            s,
            &c.labels,
            &format!("{path}.topologySpreadConstraints[{i}]"),
        )?);
    }
    let Some(affinity) = &spec.affinity else {
        return Ok(());
    };
    if let Some(na) = &affinity.node_affinity {
        let p = format!("{path}.affinity.nodeAffinity");
        if let Some(required) = &na.required_during_scheduling_ignored_during_execution {
            c.node_affinity = node_selector(required, &format!("{p}.{REQUIRED}"))?;
        }
        for (i, pref) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let term = node_selector_term(
                &pref.preference,
                &format!("{p}.{PREFERRED}[{i}].preference"),
            )?;
            // The scheduler skips zero weights and empty preferences: neither ever scores.
            if pref.weight != 0 && !term.is_empty() {
                c.preferred_node_affinity.push(Weighted {
                    weight: pref.weight,
                    term,
                });
            }
        }
    }
    if let Some(pa) = &affinity.pod_affinity {
        let p = format!("{path}.affinity.podAffinity");
        let required = pa
            .required_during_scheduling_ignored_during_execution
            .as_deref();
        let preferred = pa
            .preferred_during_scheduling_ignored_during_execution
            .as_deref();
        c.pod_affinity = affinity_terms(required, &c.labels, &p)?;
        c.preferred_pod_affinity = weighted_affinity_terms(preferred, &c.labels, &p)?;
    }
    if let Some(pa) = &affinity.pod_anti_affinity {
        let p = format!("{path}.affinity.podAntiAffinity");
        let required = pa
            .required_during_scheduling_ignored_during_execution
            .as_deref();
        let preferred = pa
            .preferred_during_scheduling_ignored_during_execution
            .as_deref();
        c.pod_anti_affinity = affinity_terms(required, &c.labels, &p)?;
        c.preferred_pod_anti_affinity = weighted_affinity_terms(preferred, &c.labels, &p)?;
    }
    Ok(())
}

pub(crate) fn node_selector(sel: &core::NodeSelector, path: &str) -> FieldResult<NodeSelector> {
    let mut terms = Vec::new();
    for (i, t) in sel.node_selector_terms.iter().enumerate() {
        let mut term = node_selector_term(t, &format!("{path}.nodeSelectorTerms[{i}]"))?;
        // An empty term matches no node in Kubernetes, while an empty domain term matches every
        // node.
        if term.is_empty() {
            term.push(never_requirement());
        }
        terms.push(term);
    }
    if terms.is_empty() {
        // `nodeSelectorTerms: []` is rejected by the API server; treat it as matching nothing too.
        terms.push(vec![never_requirement()]);
    }
    Ok(NodeSelector { terms })
}

/// matchExpressions as written; matchFields on `metadata.name` become requirements on the hostname
/// label, which Kubernetes and Karpenter set to the node name.
fn node_selector_term(t: &core::NodeSelectorTerm, path: &str) -> FieldResult<Vec<Requirement>> {
    let mut out = Vec::new();
    for (i, e) in t.match_expressions.iter().flatten().enumerate() {
        let values = e.values.clone().unwrap_or_default();
        out.push(requirement(
            &e.key,
            &e.operator,
            values,
            None,
            &format!("{path}.matchExpressions[{i}]"),
        )?);
    }
    for (i, f) in t.match_fields.iter().flatten().enumerate() {
        let p = format!("{path}.matchFields[{i}]");
        if f.key != "metadata.name" {
            return Err(FieldError::new(
                format!("{p}.key"),
                format!("unsupported field {:?}", f.key),
            ));
        }
        out.push(requirement(
            HOSTNAME,
            &f.operator,
            f.values.clone().unwrap_or_default(),
            None,
            &p,
        )?);
    }
    Ok(out)
}

fn toleration(t: &core::Toleration, path: &str) -> FieldResult<Toleration> {
    let exists = match t.operator.as_deref() {
        None | Some("") | Some("Equal") => false,
        Some("Exists") => true,
        Some(other) => {
            return Err(FieldError::new(
                format!("{path}.operator"),
                format!("unknown toleration operator {other:?}"),
            ))
        }
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(crate::domain::TaintEffect::parse(e).ok_or_else(|| {
            FieldError::new(
                format!("{path}.effect"),
                format!("unknown taint effect {e:?}"),
            )
        })?),
    };
    Ok(Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        exists,
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

fn spread(
    s: &core::TopologySpreadConstraint,
    labels: &Labels,
    path: &str,
) -> FieldResult<TopologySpread> {
    let max_skew = u32::try_from(s.max_skew)
        .ok()
        .filter(|&m| m > 0)
        .ok_or_else(|| {
            FieldError::new(
                format!("{path}.maxSkew"),
                format!("maxSkew {} must be at least 1", s.max_skew),
            )
        })?;
    let when_unsatisfiable = match s.when_unsatisfiable.as_str() {
        "" | "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(FieldError::new(
                format!("{path}.whenUnsatisfiable"),
                format!("unknown value {other:?}"),
            ))
        }
    };
    let min_domains = match s.min_domains {
        None => None,
        Some(m) => Some(u32::try_from(m).ok().filter(|&m| m > 0).ok_or_else(|| {
            FieldError::new(
                format!("{path}.minDomains"),
                format!("minDomains {m} must be at least 1"),
            )
        })?),
    };
    let mut selector = label_selector(s.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    // matchLabelKeys narrows the selector to pods sharing this pod's values (e.g.
    // pod-template-hash); keys the pod does not carry are ignored, as in the scheduler.
    if s.label_selector.is_some() {
        for key in s.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                require_label(&mut selector, key, v);
            }
        }
    }
    Ok(TopologySpread {
        max_skew,
        topology_key: s.topology_key.clone(),
        when_unsatisfiable,
        selector,
        min_domains,
        node_affinity_policy: inclusion_policy(
            s.node_affinity_policy.as_deref(),
            NodeInclusionPolicy::affinity_default(),
            &format!("{path}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            s.node_taints_policy.as_deref(),
            NodeInclusionPolicy::taints_default(),
            &format!("{path}.nodeTaintsPolicy"),
        )?,
    })
}

/// `nodeAffinityPolicy` or `nodeTaintsPolicy`: `Honor` or `Ignore`, `default` when unset.
fn inclusion_policy(
    value: Option<&str>,
    default: NodeInclusionPolicy,
    path: &str,
) -> FieldResult<NodeInclusionPolicy> {
    match value {
        None => Ok(default),
        Some("Honor") => Ok(NodeInclusionPolicy::Honor),
        Some("Ignore") => Ok(NodeInclusionPolicy::Ignore),
        Some(other) => Err(FieldError::new(
            path.to_string(),
            format!("unknown value {other:?} (Honor or Ignore)"),
        )),
    }
}

fn affinity_terms(
    terms: Option<&[core::PodAffinityTerm]>,
    labels: &Labels,
    path: &str,
) -> FieldResult<Vec<PodAffinityTerm>> {
    let mut out = Vec::new();
    for (i, t) in terms.unwrap_or_default().iter().enumerate() {
        out.push(affinity_term(
            t,
            labels,
            &format!("{path}.{REQUIRED}[{i}]"),
        )?);
    }
    Ok(out)
}

fn weighted_affinity_terms(
    terms: Option<&[core::WeightedPodAffinityTerm]>,
    labels: &Labels,
    path: &str,
) -> FieldResult<Vec<Weighted<PodAffinityTerm>>> {
    let mut out = Vec::new();
    for (i, t) in terms.unwrap_or_default().iter().enumerate() {
        let term = affinity_term(
            &t.pod_affinity_term,
            labels,
            &format!("{path}.{PREFERRED}[{i}].podAffinityTerm"),
        )?;
        if t.weight != 0 {
            out.push(Weighted {
                weight: t.weight,
                term,
            });
        }
    }
    Ok(out)
}

/// One pod affinity term. Any namespaceSelector is read as "all namespaces": snapshots carry no
/// Namespace objects to evaluate it against, so a non-empty selector is over-approximated.
fn affinity_term(
    t: &core::PodAffinityTerm,
    labels: &Labels,
    path: &str,
) -> FieldResult<PodAffinityTerm> {
    let mut selector = label_selector(t.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    if t.label_selector.is_some() {
        for key in t.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                require_label(&mut selector, key, v);
            }
        }
        for (i, key) in t.mismatch_label_keys.iter().flatten().enumerate() {
            if let Some(v) = labels.get(key) {
                let p = format!("{path}.mismatchLabelKeys[{i}]");
                selector.match_expressions.push(label_requirement(
                    key,
                    "NotIn",
                    vec![v.clone()],
                    &p,
                )?);
            }
        }
    }
    Ok(PodAffinityTerm {
        selector,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        all_namespaces: t.namespace_selector.is_some(),
        topology_key: t.topology_key.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constraint(affinity: Option<&str>, taints: Option<&str>) -> core::TopologySpreadConstraint {
        core::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            node_affinity_policy: affinity.map(str::to_string),
            node_taints_policy: taints.map(str::to_string),
            ..Default::default()
        }
    }

    fn policies(s: &TopologySpread) -> (NodeInclusionPolicy, NodeInclusionPolicy) {
        (s.node_affinity_policy, s.node_taints_policy)
    }

    #[test]
    fn unset_policies_take_kubernetes_defaults() {
        let s = spread(&constraint(None, None), &Labels::new(), "spec.x").expect("converts");
        use NodeInclusionPolicy::*;
        assert_eq!(policies(&s), (Honor, Ignore));
    }

    #[test]
    fn written_policies_are_kept() {
        let c = constraint(Some("Ignore"), Some("Honor"));
        let s = spread(&c, &Labels::new(), "spec.x").expect("converts");
        use NodeInclusionPolicy::*;
        assert_eq!(policies(&s), (Ignore, Honor));
    }

    #[test]
    fn an_unknown_policy_names_its_field() {
        for (c, field) in [
            (constraint(Some("honor"), None), "nodeAffinityPolicy"),
            (constraint(None, Some("")), "nodeTaintsPolicy"),
        ] {
            let err = spread(&c, &Labels::new(), "spec.topologySpreadConstraints[2]")
                .expect_err("not a policy");
            assert_eq!(
                err.path,
                format!("spec.topologySpreadConstraints[2].{field}")
            );
        }
    }
}
