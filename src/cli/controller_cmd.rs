//! `joiner controller`: the in-cluster autoscaler. Flags carry Karpenter's environment variable
//! names where Karpenter has the setting, so a Helm values file moves over unchanged; they are
//! validated here, once, into `operator::OperatorSettings`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use joiner::catalog::Catalog;
use joiner::cloud::aws::AwsSettings;
use joiner::controller::Settings;
use joiner::disruption::timing::{parse_go_duration, parse_timestamp};
use joiner::disruption::DisruptionStrategy;
use joiner::k8s::lifecycle::Timeouts;
use joiner::operator::decisions::LoopSettings;
use joiner::operator::{self, CloudChoice, LeaderElection, OperatorSettings};
use joiner::optimizer::Strategy;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// In-process simulated EC2: launches succeed at once; nodes join when something registers
    /// them.
    Sim,
    /// EC2 through the AWS APIs (credentials from the default chain: IRSA, Pod Identity, env).
    Aws,
}

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Kubeconfig file; in-cluster configuration (or ~/.kube/config) when omitted.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The cluster's name: in instance tags (`kubernetes.io/cluster/<name>: owned`), launch
    /// template and instance profile names, and user data.
    #[arg(long, env = "CLUSTER_NAME")]
    cluster_name: String,
    /// joiner's namespace: its cost-weight ConfigMap and leader Lease live here.
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    namespace: String,
    /// This replica's identity in the Lease and in Events (the pod name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Run without a Lease; only with a single replica.
    #[arg(long, env = "DISABLE_LEADER_ELECTION")]
    disable_leader_election: bool,
    /// The leader-election Lease in --namespace.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "joiner-leader-election"
    )]
    lease_name: String,
    /// An API request (never a watch) not answered within this long fails, and the step that made
    /// it retries on a later pass; without it one hung answer would stall every decision. 0s: none.
    #[arg(long, env = "JOINER_API_TIMEOUT", default_value = "30s")]
    api_timeout: String,
    /// How long a Lease is valid without renewal.
    #[arg(long, env = "JOINER_LEASE_DURATION", default_value = "15s")]
    lease_duration: String,
    /// The leader gives up (exits) if it cannot renew its Lease within this.
    #[arg(long, env = "JOINER_RENEW_DEADLINE", default_value = "10s")]
    renew_deadline: String,
    /// How often the Lease is tried and renewed; retry period < renew deadline < lease duration.
    #[arg(long, env = "JOINER_RETRY_PERIOD", default_value = "2s")]
    retry_period: String,
    /// A provisioning batch closes after this long without a new pending pod.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s")]
    batch_idle_duration: String,
    /// ...and never stays open longer than this.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s")]
    batch_max_duration: String,
    /// Provisioning method.
    #[arg(long, env = "JOINER_STRATEGY", value_enum, default_value = "milp")]
    strategy: Strategy,
    /// Disruption method.
    #[arg(
        long,
        env = "JOINER_DISRUPTION_STRATEGY",
        value_enum,
        default_value = "milp"
    )]
    disruption_strategy: DisruptionStrategy,
    /// Time limit of a provisioning solve.
    #[arg(long, env = "JOINER_SOLVER_TIME_LIMIT", default_value = "5s")]
    solver_time_limit: String,
    /// Time limit of a disruption decision.
    #[arg(long, env = "JOINER_DISRUPTION_TIME_LIMIT", default_value = "10s")]
    disruption_time_limit: String,
    /// Relative optimality gap at which a solve stops.
    #[arg(long, env = "JOINER_SOLVER_GAP", default_value_t = 0.01)]
    solver_gap: f64,
    /// No consolidation, emptiness, drift or expiry; interruption handling and termination of
    /// deleted nodes still run.
    #[arg(long, env = "JOINER_DISABLE_DISRUPTION")]
    disable_disruption: bool,
    /// Makes every HiGHS solve fail (`error`) or every model infeasible (`infeasible`), for fault
    /// drills: decisions fall back to Karpenter's rules, flagged in the solver metrics and in a
    /// Warning Event on every NodePool. Not for normal operation.
    #[arg(long, hide = true, value_enum)]
    inject_solver_fault: Option<joiner::optimizer::SolverFault>,
    /// How often the disruption decision runs when nothing is in flight and no pod waits.
    #[arg(long, env = "JOINER_DISRUPTION_INTERVAL", default_value = "10s")]
    disruption_interval: String,
    /// How long a disruption command waits before it is re-validated.
    #[arg(long, env = "JOINER_VALIDATION_DELAY", default_value = "15s")]
    validation_delay: String,
    /// A disruption command whose replacements have not initialized, or whose nodes have not
    /// drained, this long after its validation is rolled back (Karpenter's orchestration timeout).
    #[arg(long, env = "JOINER_DISRUPTION_COMMAND_TIMEOUT", default_value = "10m")]
    disruption_command_timeout: String,
    /// How long an offering that answered with insufficient capacity is kept out of solves
    /// (Karpenter's unavailable-offerings cache).
    #[arg(long, env = "JOINER_INSUFFICIENT_CAPACITY_TTL", default_value = "3m")]
    insufficient_capacity_ttl: String,
    /// A pending pod no offering can hold (none fits it, or every one that would is out of
    /// capacity) waits this long before it is solved again.
    #[arg(long, env = "JOINER_UNSCHEDULABLE_POD_RETRY", default_value = "1m")]
    unschedulable_pod_retry: String,
    /// A NodeClaim not launched within this is given up: its instance is terminated and its pods
    /// solved again.
    #[arg(long, env = "JOINER_LAUNCH_TIMEOUT", default_value = "5m")]
    launch_timeout: String,
    /// A launched NodeClaim whose Node has not registered within this is given up likewise.
    #[arg(long, env = "JOINER_REGISTRATION_TIMEOUT", default_value = "15m")]
    registration_timeout: String,
    /// Port of the Prometheus `/metrics` endpoint; 0 picks a free port.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    metrics_port: u16,
    /// Port of `/healthz` and `/readyz`; 0 picks a free port.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    health_probe_port: u16,
    /// Address both ports listen on.
    #[arg(long, env = "JOINER_BIND_ADDRESS", default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// Catalog JSON file (docs/catalog.md); the bundled catalog of --region when omitted.
    #[arg(long, env = "JOINER_CATALOG")]
    catalog: Option<PathBuf>,
    /// The cluster's region: the bundled catalog's, and with `--cloud-provider aws` that of every
    /// EC2, SSM and SQS call.
    #[arg(long, env = "AWS_REGION", default_value = "us-east-1")]
    region: String,
    /// Where nodes come from: `aws` (EC2) or `sim` (an in-process simulated EC2, for tests).
    /// Required: there is no default.
    #[arg(long, env = "JOINER_CLOUD_PROVIDER", value_enum)]
    cloud_provider: Provider,
    /// Seed of the simulated cloud (`--cloud-provider sim` only).
    #[arg(long, env = "JOINER_SIM_SEED", default_value_t = 1)]
    sim_seed: u64,
    /// The API server URL nodes join (written into user data). With `--cloud-provider aws` and
    /// none given, it is read from the kubeconfig in ConfigMap kube-system/kube-proxy.
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    cluster_endpoint: Option<String>,
    /// Karpenter's feature gates, `Name=true|false,...`: joiner acts on SpotToSpotConsolidation
    /// (consolidation may replace spot nodes with spot capacity) and ignores Karpenter's others.
    #[arg(
        long,
        env = "FEATURE_GATES",
        default_value = "SpotToSpotConsolidation=false"
    )]
    feature_gates: String,
    /// Base64 PEM of the cluster CA, written into user data.
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    cluster_ca_bundle: Option<String>,
    /// The cluster's Service CIDR (AL2023 nodes derive their DNS address from it).
    #[arg(long, env = "CLUSTER_CIDR")]
    cluster_cidr: Option<String>,
    /// SQS queue of interruption events; none disables interruption handling.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    interruption_queue: Option<String>,
    /// No route to the Pricing API: prices come only from the catalog.
    #[arg(long, env = "ISOLATED_VPC")]
    isolated_vpc: bool,
    /// One endpoint for every AWS API (an emulator or a proxy).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    aws_endpoint_url: Option<String>,
    /// Attempts per AWS call, retries included.
    #[arg(long, env = "AWS_MAX_ATTEMPTS", default_value_t = 5)]
    aws_max_attempts: u32,
    /// Kubernetes minor version for AMI aliases (`1.33`); read from the API server when omitted.
    #[arg(long, env = "KUBERNETES_VERSION")]
    kubernetes_version: Option<String>,
    /// How long an instance tagged for the cluster may run without a NodeClaim before it is
    /// terminated.
    #[arg(long, env = "JOINER_INSTANCE_GC_GRACE", default_value = "30s")]
    instance_gc_grace: String,
    /// How often the garbage collector compares the cluster's instances with its NodeClaims.
    #[arg(long, env = "JOINER_INSTANCE_GC_INTERVAL", default_value = "2m")]
    instance_gc_interval: String,
}

fn duration(name: &str, text: &str) -> anyhow::Result<Duration> {
    let d = parse_go_duration(text).with_context(|| format!("--{name}"))?;
    if d.is_zero() && !["validation-delay", "instance-gc-grace", "api-timeout"].contains(&name) {
        bail!("--{name}: must be positive");
    }
    Ok(d)
}

impl ControllerArgs {
    pub fn settings(&self) -> anyhow::Result<OperatorSettings> {
        if !(0.0..1.0).contains(&self.solver_gap) {
            bail!("--solver-gap: {} is not in [0, 1)", self.solver_gap);
        }
        let catalog = match &self.catalog {
            Some(path) => Catalog::from_file(path)?,
            None => Catalog::bundled(&self.region)?,
        };
        let leader_election = (!self.disable_leader_election)
            .then(|| -> anyhow::Result<LeaderElection> {
                let le = LeaderElection {
                    lease_name: self.lease_name.clone(),
                    lease_duration: duration("lease-duration", &self.lease_duration)?,
                    renew_deadline: duration("renew-deadline", &self.renew_deadline)?,
                    retry_period: duration("retry-period", &self.retry_period)?,
                };
                le.validate()?;
                Ok(le)
            })
            .transpose()?;
        let (gates, ignored) = operator::settings::FeatureGates::parse(&self.feature_gates)?;
        if !ignored.is_empty() {
            tracing::warn!(gates = ?ignored, "feature gates joiner does not implement are ignored");
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let controller = Settings {
            provisioning: self.strategy,
            disruption: self.disruption_strategy,
            batch_idle: duration("batch-idle-duration", &self.batch_idle_duration)?.as_secs_f64(),
            batch_max: duration("batch-max-duration", &self.batch_max_duration)?.as_secs_f64(),
            validation_delay: duration("validation-delay", &self.validation_delay)?.as_secs_f64(),
            solve_time_limit: duration("solver-time-limit", &self.solver_time_limit)?.as_secs_f64(),
            disruption_time_limit: duration("disruption-time-limit", &self.disruption_time_limit)?
                .as_secs_f64(),
            gap: self.solver_gap,
            // Karpenter looks again at an unchanged cluster after 5 minutes, for what it cannot see
            quiet_ttl: Some(300.0),
            disruption_bound: false,
            origin: parse_timestamp(&now)?,
            solver_fault: self.inject_solver_fault,
            spot_to_spot_consolidation: gates.spot_to_spot_consolidation,
            command_timeout: duration(
                "disruption-command-timeout",
                &self.disruption_command_timeout,
            )?
            .as_secs_f64(),
            unavailable_ttl: duration(
                "insufficient-capacity-ttl",
                &self.insufficient_capacity_ttl,
            )?
            .as_secs_f64(),
            unschedulable_retry: duration(
                "unschedulable-pod-retry",
                &self.unschedulable_pod_retry,
            )?
            .as_secs_f64(),
        };
        let decisions = LoopSettings {
            disruption_interval: duration("disruption-interval", &self.disruption_interval)?,
            disruption_enabled: !self.disable_disruption,
            timeouts: Timeouts {
                launch: duration("launch-timeout", &self.launch_timeout)?.as_secs_f64(),
                registration: duration("registration-timeout", &self.registration_timeout)?
                    .as_secs_f64(),
            },
            debounce: Duration::from_millis(100),
            resync: Duration::from_secs(5),
        };
        let identity = match &self.identity {
            Some(i) => i.clone(),
            None => std::env::var("HOSTNAME")
                .unwrap_or_else(|_| format!("joiner-{}", std::process::id())),
        };
        let cloud = self.cloud()?;
        Ok(OperatorSettings {
            kubeconfig: self.kubeconfig.clone(),
            api_timeout: Some(duration("api-timeout", &self.api_timeout)?).filter(|d| !d.is_zero()),
            cluster_name: self.cluster_name.clone(),
            namespace: self.namespace.clone(),
            identity,
            leader_election,
            controller,
            decisions,
            metrics_addr: SocketAddr::new(self.bind_address, self.metrics_port),
            health_addr: SocketAddr::new(self.bind_address, self.health_probe_port),
            catalog,
            cloud,
        })
    }

    fn cloud(&self) -> anyhow::Result<CloudChoice> {
        if self.cloud_provider == Provider::Sim {
            return Ok(CloudChoice::Sim {
                seed: self.sim_seed,
            });
        }
        // empty: discovered when the operator starts (operator::aws::discover_endpoint)
        let endpoint = self.cluster_endpoint.as_deref().unwrap_or_default();
        if self.aws_max_attempts == 0 {
            bail!("--aws-max-attempts must be at least 1");
        }
        let mut aws = AwsSettings::new(&self.region, &self.cluster_name, endpoint);
        aws.cluster_ca_bundle = self.cluster_ca_bundle.clone();
        aws.cluster_cidr = self.cluster_cidr.clone();
        aws.interruption_queue = self.interruption_queue.clone();
        aws.isolated_vpc = self.isolated_vpc;
        aws.endpoint_url = self.aws_endpoint_url.clone();
        aws.max_attempts = self.aws_max_attempts;
        aws.gc_grace = duration("instance-gc-grace", &self.instance_gc_grace)?;
        aws.gc_interval = duration("instance-gc-interval", &self.instance_gc_interval)?;
        Ok(CloudChoice::Aws {
            aws: Box::new(aws),
            kubernetes_version: self.kubernetes_version.clone(),
        })
    }
}

pub fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(operator::run(settings))?;
    Ok(ExitCode::SUCCESS)
}
