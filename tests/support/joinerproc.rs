//! The `joiner controller` binary as a child process of a test: started against a test API server
//! with a kubeconfig in a scratch directory, its log kept for failure messages, killed on drop.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::apiserver::ApiServer;

/// joiner's namespace in the tests (its ConfigMap and Lease).
pub const SYSTEM_NS: &str = "joiner";

/// The AWS emulator's credentials, as the controller's environment.
pub const MOTO_CREDS: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
];

/// `joiner controller` flags for the AWS provider against the emulator at `endpoint`, without
/// leader election, then `extra`.
pub fn aws_args<'a>(endpoint: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "--disable-leader-election",
        "--cloud-provider",
        "aws",
        "--cluster-endpoint",
        "https://e2e.example:443",
        "--aws-endpoint-url",
        endpoint,
        "--kubernetes-version",
        "1.33",
    ];
    base.iter().chain(extra).copied().collect()
}

/// A running `joiner controller`; killed on drop. Its log is kept for failure messages.
pub struct Joiner {
    child: Child,
    /// Read from the log once the controller serves: it binds port 0, so no other process can take
    /// a port between the test picking it and the controller binding it (CI once failed on
    /// "cannot listen on 127.0.0.1:41983: Address already in use").
    metrics_port: std::sync::OnceLock<u16>,
    log: PathBuf,
}

impl Joiner {
    pub fn start(server: &ApiServer, dir: &tempdir::Dir, identity: &str, extra: &[&str]) -> Joiner {
        Joiner::start_with_env(server, dir, identity, extra, &[])
    }

    /// As [`Joiner::start`], with extra environment variables (AWS credentials for an emulator).
    /// Timings are shortened so that tests run in seconds.
    pub fn start_with_env(
        server: &ApiServer,
        dir: &tempdir::Dir,
        identity: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Joiner {
        let fast = [
            "--batch-idle-duration",
            "300ms",
            "--batch-max-duration",
            "2s",
            "--solver-time-limit",
            "2s",
            "--disruption-time-limit",
            "3s",
            "--disruption-interval",
            "1s",
            "--validation-delay",
            "1s",
            "--lease-duration",
            "3s",
            "--renew-deadline",
            "2s",
            "--retry-period",
            "500ms",
        ];
        Joiner::start_with_defaults(server, dir, identity, &[&fast[..], extra].concat(), envs)
    }

    /// The controller with its own default timings (benchmarks measure what users run).
    pub fn start_with_defaults(
        server: &ApiServer,
        dir: &tempdir::Dir,
        identity: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Joiner {
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .write_kubeconfig_as(&kubeconfig, identity)
            .expect("kubeconfig written");
        let log = dir.path().join(format!("{identity}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let mut args: Vec<String> = [
            "controller",
            "--cluster-name",
            "e2e",
            "--namespace",
            SYSTEM_NS,
            "--identity",
            identity,
            "--bind-address",
            "127.0.0.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["--kubeconfig".into(), kubeconfig.display().to_string()]);
        // E2E_LOG=debug,kube=info,... shows the controller's decisions in failure messages
        args.extend([
            "--log-level".into(),
            std::env::var("E2E_LOG").unwrap_or_else(|_| "info,highs=error".into()),
        ]);
        args.extend(["--metrics-port", "0", "--health-probe-port", "0"].map(String::from));
        // the simulated cloud unless the test names one (--cloud-provider has no default)
        if !extra.contains(&"--cloud-provider") {
            args.extend(["--cloud-provider", "sim"].map(String::from));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_joiner"))
            .args(&args)
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("joiner starts");
        Joiner {
            child,
            metrics_port: std::sync::OnceLock::new(),
            log,
        }
    }

    /// The metrics port the controller bound, once its "serving" line is in the log.
    fn metrics_port(&self) -> Option<u16> {
        if let Some(&port) = self.metrics_port.get() {
            return Some(port);
        }
        let log = self.log();
        let port = log
            .lines()
            .filter(|l| l.contains(" serving "))
            .find_map(|l| {
                l.split_once("metrics=127.0.0.1:")
                    .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok())
            })?;
        Some(*self.metrics_port.get_or_init(|| port))
    }

    /// The /metrics text; empty until the controller serves. A failed or empty scrape is tried
    /// again (five times, 200 ms apart) so that it does not read as a page without samples.
    pub async fn metrics(&self) -> String {
        let Some(port) = self.metrics_port() else {
            return String::new();
        };
        for _ in 0..5 {
            match http_get(port, "/metrics").await {
                Ok(body) if !body.trim().is_empty() => return body,
                _ => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
            }
        }
        String::new()
    }

    /// The value of one sample line of /metrics (0 when absent).
    pub async fn metric(&self, name_and_labels: &str) -> f64 {
        sample(&self.metrics().await, name_and_labels)
    }

    /// Whether the process has ended (a bad flag, a crash).
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().map_or(true, |s| s.is_some())
    }

    /// The process id, for reading its memory from /proc.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Joiner {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scratch directory removed on drop (no extra crate for it).
pub mod tempdir {
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(name: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("joiner-e2e-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("scratch dir");
            Dir(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The value of one sample line of a /metrics text (0 when absent), for reading several series
/// from one scrape.
pub fn sample(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name_and_labels)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

pub async fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// Cost weights for tests that run joiner on a clock of seconds: new nodes may be consolidated at
/// once (`settleMinutes` 0, against 20 minutes by default), with `extra` keys on top. Written as
/// the ConfigMap the controller watches in [`SYSTEM_NS`].
pub async fn weights_for_a_seconds_clock(client: &kube::Client, extra: serde_json::Value) {
    use kube::api::{Api, Patch, PatchParams};
    let mut data = serde_json::json!({"settleMinutes": "0"});
    if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "joiner-cost-weights", "namespace": SYSTEM_NS},
        "data": data,
    });
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), SYSTEM_NS)
        .patch(
            "joiner-cost-weights",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&cm),
        )
        .await
        .expect("cost-weight configmap applied");
}

/// Requirements of the e2e NodePools: general-purpose (c and m) on-demand amd64 types, of a
/// generation above 4 when `current`.
pub fn general_purpose(current: bool) -> serde_json::Value {
    let mut reqs = vec![serde_json::json!(
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}
    )];
    if current {
        reqs.push(serde_json::json!(
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}
        ));
    }
    reqs.push(
        serde_json::json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}),
    );
    reqs.push(serde_json::json!(
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ));
    serde_json::Value::Array(reqs)
}

/// Creates EC2NodeClass `default` and NodePool `default` over it: `template` is the NodePool's
/// template spec (its nodeClassRef added), `spec` the rest of its spec (a `template.metadata` in it
/// is kept), consolidating as soon as a node is underused unless `spec` says otherwise.
pub async fn install_nodepool(
    client: &kube::Client,
    template: serde_json::Value,
    spec: serde_json::Value,
) {
    let class = serde_json::json!({
        "role": "KarpenterNodeRole-e2e", "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
    });
    install_class_and_pool(client, class, template, spec).await;
}

/// [`install_nodepool`] for the AWS provider against moto: the EC2NodeClass names the instance
/// profile and the SSM AMI parameter the moto account has, and the NodePool takes m5 and c5
/// on-demand.
pub async fn install_moto_nodepool(client: &kube::Client, spec: serde_json::Value) {
    let class = serde_json::json!({
        "amiFamily": "AL2023", "instanceProfile": "KarpenterNodeInstanceProfile-e2e",
        "amiSelectorTerms": [{"ssmParameter": "/joiner/test/ami"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
    });
    let template = serde_json::json!({"requirements": [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]});
    install_class_and_pool(client, class, template, spec).await;
}

async fn install_class_and_pool(
    client: &kube::Client,
    class: serde_json::Value,
    template: serde_json::Value,
    spec: serde_json::Value,
) {
    use joiner::k8s::caches::karpenter_resource;
    use kube::api::{Api, DynamicObject, PostParams};
    use serde_json::json;
    let classes: Api<DynamicObject> =
        Api::all_with(client.clone(), &karpenter_resource("EC2NodeClass"));
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": class,
    }))
    .expect("ec2nodeclass");
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("ec2nodeclass created");
    let mut template = template;
    template["nodeClassRef"] =
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"});
    let mut spec = spec;
    if spec.get("template").is_none() {
        spec["template"] = json!({});
    }
    spec["template"]["spec"] = template;
    if spec.get("disruption").is_none() {
        spec["disruption"] =
            json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"});
    }
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("nodepool");
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &karpenter_resource("NodePool"));
    pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("nodepool created");
}

/// Creates namespace `name` (already there is fine).
pub async fn namespace(client: &kube::Client, name: &str) {
    use kube::api::{Api, PostParams};
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .expect("namespace");
    let _ = api.create(&PostParams::default(), &ns).await;
}
