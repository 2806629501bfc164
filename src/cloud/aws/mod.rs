//! The AWS provider: [`AwsCloud`] implements [`CloudProvider`](super::CloudProvider) on EC2, and
//! the modules around it do the AWS-specific work Karpenter's AWS provider does.
//!
//! Data flow: `clients` builds the SDK clients once (region, retries, timeouts, endpoint overrides,
//! credentials from the default chain). `discovery` and `pricing` turn DescribeInstanceTypes,
//! DescribeInstanceTypeOfferings, DescribeSpotPriceHistory and the Pricing API into the same
//! [`Catalog`](crate::catalog::Catalog) the bundled files produce. `nodeclass` resolves each
//! EC2NodeClass's selectors (subnets, security groups, AMIs) into a [`ResolvedNodeClass`] and the
//! status conditions the operator writes back; `profile` keeps the instance profile of a class that
//! names a role. A launch goes through `launch`: a launch template keyed by the hash of its
//! resolved options (user data from `userdata`), then CreateFleet `instant` with the plan's
//! offering first and its fallbacks as overrides; insufficient-capacity errors come back as
//! offerings to mark unavailable. `instances` lists, describes and terminates instances by the
//! cluster's tags; `gc` terminates instances no NodeClaim owns; `interruption` reads the SQS queue
//! of spot interruption warnings, rebalance recommendations, state changes and scheduled events.
//!
//! Every SDK call runs on the tokio runtime handle the provider was built with, so the synchronous
//! decision thread can block on the provider's futures without a runtime of its own.

pub mod clients;
pub mod discovery;
pub mod gc;
pub mod instances;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod pricing;
pub mod profile;
pub mod userdata;

mod provider;

pub use clients::{AwsClients, AwsSettings};
pub use nodeclass::ResolvedNodeClass;
pub use provider::AwsCloud;

/// Tag every instance, launch template and fleet joiner creates carries: the cluster it belongs to
/// (Karpenter's `kubernetes.io/cluster/<name>: owned`).
pub fn cluster_tag_key(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}
/// Tag naming the NodePool an instance was launched for.
pub const NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
/// Tag naming the NodeClaim an instance was launched for.
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
/// Tag naming the EC2NodeClass an instance was launched from.
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Tag holding the capacity type joiner asked the fleet for (`spot`, `on-demand`).
pub const CAPACITY_TYPE_TAG: &str = "karpenter.sh/capacity-type";
/// Tag holding the cluster name (Karpenter's `eks:eks-cluster-name`).
pub const CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

/// What went wrong talking to AWS or resolving what to ask it for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AwsError {
    /// An API call failed; `code` is the AWS error code when the service sent one.
    #[error("{call}: {}{message}", code.as_deref().map(|c| format!("{c}: ")).unwrap_or_default())]
    Api {
        call: &'static str,
        code: Option<String>,
        message: String,
    },
    /// An EC2NodeClass cannot be used as written or resolved.
    #[error("ec2nodeclass {name}: {message}")]
    NodeClass { name: String, message: String },
    /// An EC2NodeClass's user data cannot be built.
    #[error("ec2nodeclass {name}: {source}")]
    UserData {
        name: String,
        #[source]
        source: userdata::UserDataError,
    },
    /// A launch request cannot be turned into an EC2 call.
    #[error("launch for claim {claim}: {message}")]
    Launch { claim: String, message: String },
    /// An answer from AWS lacks a field joiner needs.
    #[error("{call}: response {message}")]
    Response { call: &'static str, message: String },
    #[error("aws settings: {0}")]
    Settings(String),
}

impl AwsError {
    /// The AWS error code of a failed call, if any.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Api { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// Converts an SDK error, keeping the service's code and message.
    pub fn from_sdk<E, R>(call: &'static str, err: aws_sdk_ec2::error::SdkError<E, R>) -> AwsError
    where
        E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        use aws_sdk_ec2::error::ProvideErrorMetadata;
        let code = err.code().map(str::to_string);
        let message = match err.message() {
            Some(m) => m.to_string(),
            None => aws_sdk_ec2::error::DisplayErrorContext(&err).to_string(),
        };
        AwsError::Api {
            call,
            code,
            message,
        }
    }
}

impl From<AwsError> for super::CloudError {
    fn from(e: AwsError) -> super::CloudError {
        super::CloudError::Provider(e.to_string())
    }
}
