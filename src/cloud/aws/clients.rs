//! The SDK clients the provider uses and the settings they are built from. Production builds them
//! from the default credential chain (environment, web identity for IRSA, the EKS Pod Identity and
//! ECS container endpoints, instance metadata); tests hand in an [`aws_config::SdkConfig`] with
//! static credentials and the emulator's endpoint.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use super::AwsError;

/// How the provider talks to AWS; validated once by the CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsSettings {
    pub region: String,
    pub cluster_name: String,
    /// The API server URL nodes join (user data); discovered by the CLI when not given.
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64 PEM, written into user data.
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's Service CIDR, for the DNS address AL2023 nodes are given.
    pub cluster_cidr: Option<String>,
    /// One endpoint for every AWS service (an emulator, a VPC endpoint proxy); None uses AWS's.
    pub endpoint_url: Option<String>,
    /// Attempts per call, retries included, with the SDK's adaptive (client-side rate limited)
    /// mode.
    pub max_attempts: u32,
    /// SQS queue of interruption events (Karpenter's `INTERRUPTION_QUEUE`); None disables it.
    pub interruption_queue: Option<String>,
    /// No route to the Pricing API: prices come from the bundled catalog only.
    pub isolated_vpc: bool,
    /// How long an instance tagged for this cluster may run without a NodeClaim before the garbage
    /// collector terminates it.
    pub gc_grace: Duration,
    /// How often the garbage collector looks for instances no NodeClaim owns and NodeClaims whose
    /// instance is gone.
    pub gc_interval: Duration,
}

impl AwsSettings {
    pub fn new(region: &str, cluster_name: &str, cluster_endpoint: &str) -> AwsSettings {
        AwsSettings {
            region: region.to_string(),
            cluster_name: cluster_name.to_string(),
            cluster_endpoint: cluster_endpoint.to_string(),
            cluster_ca_bundle: None,
            cluster_cidr: None,
            endpoint_url: None,
            max_attempts: 5,
            interruption_queue: None,
            isolated_vpc: false,
            gc_grace: Duration::from_secs(30),
            gc_interval: Duration::from_secs(120),
        }
    }
}

/// The region whose Pricing API endpoint serves `region`'s prices: the Pricing API runs only in
/// us-east-1, eu-central-1, ap-south-1 and cn-northwest-1, and Karpenter asks the nearest.
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The clients one provider holds. Cloning is cheap (the SDK clients share their connection pools).
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub pricing: aws_sdk_pricing::Client,
    /// Instance profiles for EC2NodeClasses that name a role.
    pub iam: aws_sdk_iam::Client,
}

impl AwsClients {
    /// Clients for `settings` with credentials from the default chain.
    pub async fn load(settings: &AwsSettings) -> Result<AwsClients, AwsError> {
        if settings.max_attempts == 0 {
            return Err(AwsError::Settings("max attempts must be at least 1".into()));
        }
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .http_client(http)
            .retry_config(retry(settings))
            .timeout_config(timeouts());
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url.clone());
        }
        Ok(AwsClients::from_config(&loader.load().await, settings))
    }

    /// Clients from an SDK configuration built elsewhere (tests: static credentials, an emulator's
    /// endpoint). The Pricing client is pointed at the pricing region of `settings.region`.
    pub fn from_config(config: &SdkConfig, settings: &AwsSettings) -> AwsClients {
        let pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(Region::new(pricing_region(&settings.region)))
            .build();
        AwsClients {
            ec2: aws_sdk_ec2::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            iam: aws_sdk_iam::Client::new(config),
        }
    }
}

/// Adaptive retries: the SDK backs off on throttling codes (`RequestLimitExceeded`, 503s) and
/// rate-limits itself while throttled, so a burst of launches slows down instead of failing.
pub fn retry(settings: &AwsSettings) -> RetryConfig {
    RetryConfig::adaptive()
        .with_max_attempts(settings.max_attempts)
        .with_initial_backoff(Duration::from_millis(200))
}

/// A call that hangs is abandoned rather than blocking a decision step.
pub fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(20))
        .operation_timeout(Duration::from_secs(60))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_asked_of_the_pricing_region_that_serves_the_region() {
        assert_eq!(pricing_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_region("sa-east-1"), "us-east-1");
        assert_eq!(pricing_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(pricing_region("cn-north-1"), "cn-northwest-1");
    }
}
