//! Typed settings of `joiner controller`, validated once from the command line (flags with
//! environment fallbacks, parsed by `cli::controller_cmd`) before anything starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::decisions::LoopSettings;
use crate::catalog::Catalog;
use crate::controller::Settings;

#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElection {
    pub lease_name: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// Where instances come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CloudChoice {
    /// Simulated: launches instantly and never runs out of capacity; nodes join when a kubelet (or
    /// a test's node simulator) registers them with the claim's providerID.
    Sim { seed: u64 },
    /// EC2. `kubernetes_version` picks AMI alias parameters; None reads it from the API server.
    Aws {
        aws: Box<crate::cloud::aws::AwsSettings>,
        kubernetes_version: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct OperatorSettings {
    pub kubeconfig: Option<PathBuf>,
    /// How long a request (not a watch) may wait for its answer; `None`: forever.
    pub api_timeout: Option<std::time::Duration>,
    pub cluster_name: String,
    /// joiner's own namespace: its cost-weight ConfigMap and its Lease live here.
    pub namespace: String,
    /// This replica's name in the Lease and in Events.
    pub identity: String,
    pub leader_election: Option<LeaderElection>,
    pub controller: Settings,
    pub decisions: LoopSettings,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub catalog: Catalog,
    pub cloud: CloudChoice,
}

impl LeaderElection {
    /// client-go's rule: retry period < renew deadline < lease duration.
    pub fn validate(&self) -> Result<(), super::OperatorError> {
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            return Err(super::OperatorError::Setting {
                name: "leader-election",
                message: format!(
                    "need retry period {:?} < renew deadline {:?} < lease duration {:?}",
                    self.retry_period, self.renew_deadline, self.lease_duration
                ),
            });
        }
        Ok(())
    }
}

/// Karpenter's feature gates (`FEATURE_GATES`, `Name=true,Name=false`). joiner acts on
/// SpotToSpotConsolidation; the other names Karpenter's chart writes are accepted so that its
/// values move over, and reported as not implemented; any other name is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureGates {
    /// Replace spot nodes with spot capacity when consolidating (Karpenter's default: off).
    pub spot_to_spot_consolidation: bool,
}

/// Gates Karpenter defines that joiner has no behaviour for.
const KARPENTER_ONLY_GATES: &[&str] = &[
    "Drift",
    "NodeRepair",
    "NodeOverlay",
    "ReservedCapacity",
    "StaticCapacity",
    "CapacityBuffer",
];

impl FeatureGates {
    /// Parses `text`; returns the gates and the Karpenter-only names that were set to true (joiner
    /// ignores them, and the caller says so).
    pub fn parse(text: &str) -> Result<(FeatureGates, Vec<String>), super::OperatorError> {
        let bad = |message: String| super::OperatorError::Setting {
            name: "feature-gates",
            message,
        };
        let mut gates = FeatureGates::default();
        let mut ignored = vec![];
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not Name=true|false")))?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                other => return Err(bad(format!("{name}: {other:?} is not true or false"))),
            };
            match name.trim() {
                "SpotToSpotConsolidation" => gates.spot_to_spot_consolidation = on,
                n if KARPENTER_ONLY_GATES.contains(&n) => {
                    if on {
                        ignored.push(n.to_string());
                    }
                }
                n => return Err(bad(format!("unknown feature gate {n:?}"))),
            }
        }
        Ok((gates, ignored))
    }
}

#[cfg(test)]
mod tests {
    use super::FeatureGates;

    #[test]
    fn feature_gates_parse_karpenters_format() {
        let (g, ignored) = FeatureGates::parse("").expect("empty");
        assert!(
            !g.spot_to_spot_consolidation,
            "off by default, as in Karpenter"
        );
        assert!(ignored.is_empty());
        let (g, ignored) = FeatureGates::parse(
            "ReservedCapacity=true,SpotToSpotConsolidation=true,NodeRepair=false",
        )
        .expect("chart's format");
        assert!(g.spot_to_spot_consolidation);
        assert_eq!(ignored, ["ReservedCapacity"]);
        assert!(FeatureGates::parse("SpotToSpotConsolidation=yes").is_err());
        assert!(FeatureGates::parse("SpotToSpot=true").is_err());
        assert!(FeatureGates::parse("SpotToSpotConsolidation").is_err());
    }
}
