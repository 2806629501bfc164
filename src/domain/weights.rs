//! joiner's cost weights: how many dollars per hour a broken preference, an unplaced pod or a risky
//! spot offering is worth in the objective. Read from the `joiner-cost-weights` ConfigMap; every
//! key is optional and documented in docs/plan.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The shortest `paybackHours` accepted: 36 seconds.
pub const MIN_PAYBACK_HOURS: f64 = 0.01;

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
    /// Disruption: $ an evicted pod costs, once (scaled by pod deletion cost and priority); a
    /// consolidation pays it back over `payback_hours`.
    pub pod_eviction: f64,
    /// Disruption: $ a disrupted node costs, once, paid back over `payback_hours`.
    pub node_disruption: f64,
    /// Disruption: the least saving in $/h for which an action is taken.
    pub min_savings: f64,
    /// $ a launched node costs, once, beyond its hourly price: billing while it boots and its
    /// DaemonSets start, and the consolidation that a node sized for one moment later needs.
    /// Provisioning charges it over `payback_hours` per new node, so fewer, larger nodes win
    /// where prices tie; a consolidation's replacements pay it too.
    pub node_launch: f64,
    /// Hours over which one-off costs (evictions, disruptions, launches) are paid back: a
    /// consolidation is taken only when its savings over this time exceed them. Positive.
    pub payback_hours: f64,
    /// Disruption: the longest time, in hours, over which a node's disruption cost is paid back.
    /// A node that has run unchanged for longer than `payback_hours` is expected to stay so about
    /// as long again if it is left alone, so its savings are counted over that time, capped here;
    /// a value at or below `payback_hours` turns this off.
    pub payback_max_hours: f64,
    /// Minutes after its launch during which consolidation leaves a node with pods alone, so that
    /// a node sized for a rising demand is not replaced before that demand arrives.
    pub settle_minutes: f64,
    /// Provisioning: room bought ahead for a growing workload, as a fraction of the pods it
    /// gained within the last `trend_minutes` (0 turns it off).
    pub trend_headroom: f64,
    /// Provisioning: how far back a workload's growth is counted, minutes.
    pub trend_minutes: f64,
    /// Disruption: minutes over which a workload that fell and rose again is expected to return
    /// to its peak; consolidation keeps room for the replicas it is short of that peak (0 turns
    /// it off).
    pub recall_minutes: f64,
    /// Provisioning: how much over the fair price of its room (the cheapest offering's price for
    /// the share of a node it takes) a replica's room is worth buying ahead.
    pub headroom_price: f64,
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
            pod_eviction: 0.03,
            node_disruption: 0.01,
            min_savings: 0.01,
            node_launch: 0.0,
            payback_hours: 2.0,
            payback_max_hours: 0.0,
            settle_minutes: 20.0,
            trend_headroom: 0.5,
            trend_minutes: 15.0,
            recall_minutes: 120.0,
            headroom_price: 1.2,
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
    #[error("key {0:?}: must be at least 0.01 (hours)")]
    NotPositive(String),
}

impl CostWeights {
    /// A one-off cost of `dollars` as $/h over the payback time, the unit the objectives use.
    pub fn per_hour(&self, dollars: f64) -> f64 {
        dollars / self.payback_hours
    }

    /// The hours over which disrupting a node that has run unchanged for `steady` pays back: that
    /// time (a node that has stayed as it is for a day is likely to stay so about as long again),
    /// at least `payback_hours` and at most `payback_max_hours`. Unknown times get
    /// `payback_hours`.
    pub fn payback_horizon(&self, steady: Option<std::time::Duration>) -> f64 {
        let hours = steady.map_or(0.0, |a| a.as_secs_f64() / 3600.0);
        hours.min(self.payback_max_hours).max(self.payback_hours)
    }

    /// Applies the ConfigMap's `data` over the defaults. Unknown keys and negative or non-numeric
    /// values are errors, so a typo never silently keeps a default.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, WeightsError> {
        let mut w = CostWeights::default();
        w.apply(data)?;
        Ok(w)
    }

    /// Applies ConfigMap-style `data` over these weights (`joiner simulate --weight`), with the
    /// checks of [`CostWeights::from_data`].
    pub fn apply(&mut self, data: &BTreeMap<String, String>) -> Result<(), WeightsError> {
        let mut w = self.clone();
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
                "nodeLaunch" => &mut w.node_launch,
                "paybackHours" => &mut w.payback_hours,
                "paybackMaxHours" => &mut w.payback_max_hours,
                "settleMinutes" => &mut w.settle_minutes,
                "trendHeadroom" => &mut w.trend_headroom,
                "trendMinutes" => &mut w.trend_minutes,
                "recallMinutes" => &mut w.recall_minutes,
                "headroomPrice" => &mut w.headroom_price,
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
        // a payback time of a few seconds would turn any one-off cost into an unbounded hourly one
        if w.payback_hours < MIN_PAYBACK_HOURS {
            return Err(WeightsError::NotPositive("paybackHours".into()));
        }
        *self = w;
        Ok(())
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
        let zero: BTreeMap<String, String> = [("paybackHours".to_string(), "0".to_string())].into();
        assert_eq!(
            CostWeights::from_data(&zero),
            Err(WeightsError::NotPositive("paybackHours".into()))
        );
    }

    #[test]
    fn one_off_costs_come_per_hour_over_the_payback_time() {
        let w = CostWeights {
            payback_hours: 4.0,
            ..CostWeights::default()
        };
        assert_eq!(w.per_hour(0.2), 0.05);
    }

    #[test]
    fn a_node_pays_back_over_its_age_between_the_two_bounds() {
        let w = CostWeights {
            payback_hours: 2.0,
            payback_max_hours: 12.0,
            ..CostWeights::default()
        };
        let h = |hours: f64| Some(std::time::Duration::from_secs_f64(hours * 3600.0));
        assert_eq!(w.payback_horizon(None), 2.0);
        assert_eq!(w.payback_horizon(h(0.5)), 2.0);
        assert_eq!(w.payback_horizon(h(5.0)), 5.0);
        assert_eq!(w.payback_horizon(h(30.0)), 12.0);
        let off = CostWeights {
            payback_max_hours: 0.0,
            ..w
        };
        assert_eq!(off.payback_horizon(h(30.0)), 2.0);
    }
}
