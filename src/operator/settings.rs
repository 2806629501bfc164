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
