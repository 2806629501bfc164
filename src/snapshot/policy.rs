//! Policy objects: policy/v1 PodDisruptionBudgets and joiner's cost-weight ConfigMap.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use crate::domain::weights::WeightsError;
use crate::domain::{CostWeights, PodDisruptionBudget};

use super::convert::{label_selector, FieldError, FieldResult};
use super::karpenter::Text;
use super::pod::namespace_of;

pub(crate) fn convert_pdb(pdb: policy::PodDisruptionBudget) -> FieldResult<PodDisruptionBudget> {
    let name = pdb
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let spec = pdb.spec.unwrap_or_default();
    Ok(PodDisruptionBudget {
        namespace: namespace_of(&pdb.metadata),
        name,
        // policy/v1: an absent selector selects no pods, an empty one selects all in the namespace.
        selector: label_selector(spec.selector.as_ref(), "spec.selector")?,
        min_available: spec.min_available.map(int_or_string),
        max_unavailable: spec.max_unavailable.map(int_or_string),
        disruptions_allowed: pdb.status.map(|s| s.disruptions_allowed),
    })
}

fn int_or_string(v: IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s,
    }
}

/// The cost-weight ConfigMap; values may be YAML numbers when written by hand.
#[derive(Debug, Deserialize)]
pub(crate) struct WeightsConfigMap {
    pub data: Option<BTreeMap<String, Text>>,
}

pub(crate) fn convert_weights(cm: WeightsConfigMap) -> FieldResult<CostWeights> {
    let data: BTreeMap<String, String> = cm
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    CostWeights::from_data(&data).map_err(|e| {
        let key = match &e {
            WeightsError::UnknownKey(k) => k,
            WeightsError::BadValue { key, .. } => key,
            WeightsError::NotPositive(k) => k,
        };
        FieldError::new(format!("data.{key}"), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::convert::typed;

    fn yaml(s: &str) -> serde_yaml_ng::Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn pdb_fields() {
        let p = convert_pdb(
            typed(yaml(
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\n\
                 spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}\nstatus: {disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3}\n",
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("shop", "web"));
        assert_eq!(p.min_available.as_deref(), Some("2"));
        assert_eq!(p.max_unavailable, None);
        assert_eq!(p.disruptions_allowed, Some(1));
        assert_eq!(p.selector.match_labels["app"], "web");
    }

    #[test]
    fn pdb_without_selector_selects_nothing() {
        let p = convert_pdb(
            typed(yaml(
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {maxUnavailable: 10%}\n",
            ))
            .unwrap(),
        )
        .unwrap();
        assert!(!p.selector.matches(&Default::default()));
        assert_eq!(p.max_unavailable.as_deref(), Some("10%"));
        assert_eq!(p.disruptions_allowed, None);
    }

    #[test]
    fn weights_numbers_and_typos() {
        let w =
            convert_weights(typed(yaml("data: {minSavings: 0.5, podEviction: '0.1'}")).unwrap())
                .unwrap();
        assert_eq!((w.min_savings, w.pod_eviction), (0.5, 0.1));
        let e = convert_weights(typed(yaml("data: {minSaving: '1'}")).unwrap()).unwrap_err();
        assert_eq!(e.path, "data.minSaving");
    }
}
