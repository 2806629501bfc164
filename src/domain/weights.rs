//! joiner's cost weights: how many dollars per hour a broken preference, an unplaced pod or a risky
//! spot offering is worth in the objective. Read from the `joiner-cost-weights` ConfigMap; every
//! key is optional and documented in docs/plan.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Name of the ConfigMap that holds the weights.
pub const CONFIGMAP_NAME: &str = "joiner-cost-weights";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostWeights {
    /// $/h per unit of preferred node-affinity weight left unsatisfied, per pod.
    pub preferred_node_affinity: f64,
    /// $/h per unit of preferred pod-affinity weight left unsatisfied, per pod.
    pub preferred_pod_affinity: f64,
    /// $/h per unit of preferred pod-anti-affinity weight violated, per pod.
    pub preferred_pod_anti_affinity: f64,
    /// $/h per pod placed beyond a ScheduleAnyway spread's maxSkew.
    pub schedule_anyway_skew: f64,
    /// $/h per pod placed on a node with a PreferNoSchedule taint it does not tolerate.
    pub prefer_no_schedule: f64,
    /// Fraction of a spot offering's price added per Spot Advisor interruption band (0 = `<5%`).
    pub spot_interruption_band: f64,
    /// $/h charged for each pod left unplaced; larger than any node so that pods are placed first.
    pub unschedulable_pod: f64,
    /// Disruption: $/h-equivalent per evicted pod (scaled by pod deletion cost and priority).
    pub pod_eviction: f64,
    /// Disruption: $/h-equivalent per disrupted node.
    pub node_disruption: f64,
    /// Disruption: the least saving in $/h for which an action is taken.
    pub min_savings: f64,
}

impl Default for CostWeights {
    fn default() -> Self {
        CostWeights {
            preferred_node_affinity: 0.001,
            preferred_pod_affinity: 0.001,
            preferred_pod_anti_affinity: 0.001,
            schedule_anyway_skew: 0.05,
            prefer_no_schedule: 0.05,
            spot_interruption_band: 0.01,
            unschedulable_pod: 1000.0,
            pod_eviction: 0.0005,
            node_disruption: 0.001,
            min_savings: 0.01,
        }
    }
}

/// A bad entry in the cost-weight ConfigMap.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WeightsError {
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    #[error("key {key:?}: {value:?} is not a non-negative number")]
    BadValue { key: String, value: String },
}

impl CostWeights {
    /// Applies the ConfigMap's `data` over the defaults. Unknown keys and negative or non-numeric
    /// values are errors, so a typo never silently keeps a default.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, WeightsError> {
        let mut w = CostWeights::default();
        for (key, value) in data {
            let slot = match key.as_str() {
                "preferredNodeAffinity" => &mut w.preferred_node_affinity,
                "preferredPodAffinity" => &mut w.preferred_pod_affinity,
                "preferredPodAntiAffinity" => &mut w.preferred_pod_anti_affinity,
                "scheduleAnywaySkew" => &mut w.schedule_anyway_skew,
                "preferNoSchedule" => &mut w.prefer_no_schedule,
                "spotInterruptionBand" => &mut w.spot_interruption_band,
                "unschedulablePod" => &mut w.unschedulable_pod,
                "podEviction" => &mut w.pod_eviction,
                "nodeDisruption" => &mut w.node_disruption,
                "minSavings" => &mut w.min_savings,
                _ => return Err(WeightsError::UnknownKey(key.clone())),
            };
            let v: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| WeightsError::BadValue {
                    key: key.clone(),
                    value: value.clone(),
                })?;
            *slot = v;
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_and_typos_fail() {
        let data: BTreeMap<String, String> =
            [("preferNoSchedule".to_string(), "0.5".to_string())].into();
        assert_eq!(
            CostWeights::from_data(&data).unwrap().prefer_no_schedule,
            0.5
        );
        let typo: BTreeMap<String, String> =
            [("preferNoSchedul".to_string(), "0.5".to_string())].into();
        assert!(matches!(
            CostWeights::from_data(&typo),
            Err(WeightsError::UnknownKey(_))
        ));
        let neg: BTreeMap<String, String> = [("minSavings".to_string(), "-1".to_string())].into();
        assert!(matches!(
            CostWeights::from_data(&neg),
            Err(WeightsError::BadValue { .. })
        ));
    }
}
