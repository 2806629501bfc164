//! The deployment artefacts against the code that runs under them:
//!
//! - the Helm chart, linted and rendered by the real Helm library and every manifest validated
//!   against the Kubernetes schemas (`scripts/chart_check.py`, with helm-python-sdk and
//!   kubernetes-validate from the venv of `scripts/setup.sh`);
//! - the chart's RBAC rules against every request the real `joiner controller` makes while it
//!   provisions, drains (through evictions, then forced past a terminationGracePeriod), consolidates
//!   and handles an interruption against the in-process API
//!   server and moto: every request allowed, every granted permission used;
//! - the IAM policy of docs/iam against the AWS actions the code names and the ones it was seen
//!   calling through the proxy;
//! - the Dockerfile's runtime image against the shared libraries the binary links.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/faultproxy.rs"]
mod faultproxy;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/moto.rs"]
mod moto;
#[path = "support/rbac.rs"]
mod rbac;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use joiner::k8s::caches::karpenter_resource;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use apiserver::{ApiServer, RequestMatch};
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};
use moto::{Account, Moto};
use rbac::Rbac;

const NS: &str = "default";
const REGION: &str = "us-east-1";
const CHART: &str = "charts/joiner";
const POLICY: &str = "docs/iam/joiner-controller-policy.json";
/// The API server URL in the kube-proxy ConfigMap's kubeconfig, which the controller discovers
/// when no cluster endpoint is set.
const DISCOVERED_ENDPOINT: &str = "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("JOINER_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.current_dir(root()).output().unwrap_or_else(|e| {
        panic!(
            "cannot run {what} with {} ({e}); run scripts/setup.sh or set JOINER_PYTHON",
            python()
        )
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
fn the_chart_lints_renders_and_validates_and_its_crds_are_joiners() {
    let out = tempdir::Dir::new("chart");
    let text = run(
        Command::new(python())
            .args([
                "scripts/chart_check.py",
                "--chart",
                CHART,
                "--joiner",
                env!("CARGO_BIN_EXE_joiner"),
                "--out",
            ])
            .arg(out.path()),
        "scripts/chart_check.py",
    );
    println!("{text}");
    let default =
        std::fs::read_to_string(out.path().join("default.json")).expect("default variant written");
    let objects: Vec<Value> = serde_json::from_str(&default).expect("rendered objects");
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(kind), "no {kind} rendered: {kinds:?}");
    }
}

/// The chart rendered by the real Helm library into `namespace` (the release's), as objects.
fn render(namespace: &str) -> Vec<Value> {
    let script = "import json, sys, helm_python as helm\n\
        chart = helm.Chart.load(sys.argv[1])\n\
        print(json.dumps(chart.render(json.loads(sys.argv[2]), name='joiner', namespace=sys.argv[3])))";
    let values = json!({"settings": {"clusterName": "e2e", "interruptionQueue": "joiner-rbac", "kubernetesVersion": "1.33"}}).to_string();
    let text = run(
        Command::new(python()).args(["-c", script, CHART, &values, namespace]),
        "the chart render",
    );
    let files: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&text).expect("rendered files");
    let mut objects = vec![];
    for (name, yaml) in files.iter().filter(|(n, _)| n.ends_with(".yaml")) {
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let v: Value =
                serde::Deserialize::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
            if !v.is_null() {
                objects.push(v);
            }
        }
    }
    objects
}

async fn install(client: &Client) {
    let api =
        |kind: &str| Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource(kind));
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiFamily": "AL2023", "role": "KarpenterNodeRole-e2e",
                 "amiSelectorTerms": [{"ssmParameter": "/joiner/test/ami"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}]},
    }))
    .expect("EC2NodeClass");
    api("EC2NodeClass")
        .create(&PostParams::default(), &class)
        .await
        .expect("ec2nodeclass created");
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "terminationGracePeriod": "5s",
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
        },
    }))
    .expect("NodePool");
    api("NodePool")
        .create(&PostParams::default(), &pool)
        .await
        .expect("nodepool created");
    let ns = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}}),
    )
    .expect("namespace");
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
    // what EKS and kubeadm write for kube-proxy: a kubeconfig naming the API server nodes reach
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default\n  cluster:\n    \
         certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n    \
         server: {DISCOVERED_ENDPOINT}\ncontexts:\n- name: default\n  context:\n    \
         cluster: default\n    namespace: default\n    user: default\ncurrent-context: default\n"
    );
    let proxy: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "kube-proxy"}, "data": {"kubeconfig": kubeconfig}}),
    )
    .expect("kube-proxy configmap");
    Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &proxy)
        .await
        .expect("kube-proxy configmap created");
    let weights: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "joiner-cost-weights"}, "data": {"unschedulablePod": "500", "settleMinutes": "0"}}),
    )
    .expect("configmap");
    Api::<ConfigMap>::namespaced(client.clone(), SYSTEM_NS)
        .create(&PostParams::default(), &weights)
        .await
        .expect("cost weights created");
}

fn unknown_instance_warning() -> String {
    let instance = "i-00000000000000000";
    json!({
        "version": "0", "id": "rbac-1", "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": "123456789012", "time": "2026-11-30T10:15:00Z", "region": REGION, "resources": [format!("arn:aws:ec2:{REGION}:123456789012:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"},
    })
    .to_string()
}

/// Permissions the chart grants that this scenario does not reach, each with why it is needed.
const GRANTS_NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    // kube-runtime's Recorder patches an Event that repeats within its series window instead of
    // creating another; this scenario's Events are all distinct
    ("events.k8s.io", "events", "patch", "a repeated Event"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_rbac_and_the_iam_policy_allow_every_call_the_controller_makes_and_no_more() {
    let moto = Moto::start();
    let aws = moto.clients(REGION, "e2e");
    Account::create(&aws, "e2e").await;
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    aws.iam
        .create_role()
        .role_name("KarpenterNodeRole-e2e")
        .assume_role_policy_document(trust)
        .send()
        .await
        .expect("node role");
    let proxy = faultproxy::FaultProxy::start(&moto.endpoint).await;
    let queue = aws
        .sqs
        .create_queue()
        .queue_name("joiner-rbac")
        .send()
        .await
        .expect("queue")
        .queue_url
        .expect("queue url");
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("rbac");
    // leader election on: the Lease calls are part of what the chart must allow; no cluster
    // endpoint: it is discovered, through the chart's kube-system Role
    let args = [
        "--cloud-provider",
        "aws",
        "--aws-endpoint-url",
        &proxy.endpoint,
        "--kubernetes-version",
        "1.33",
        "--interruption-queue",
        "joiner-rbac",
        "--instance-gc-grace",
        "0s",
    ];
    let creds = [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-rbac", &args, &creds);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 6,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    let settled = |pods: usize| {
        let client = client.clone();
        async move {
            eventually(
                Duration::from_secs(90),
                || async { census(&client, NS).await.expect("census") },
                |c| {
                    c.pods_running == pods
                        && c.pods_pending == 0
                        && c.claims == c.nodes
                        && c.claims > 0
                },
            )
            .await
        }
    };
    settled(6)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    check_discovered_endpoint(&aws).await;

    // `kubectl delete node`: drained through the eviction API, its instance terminated
    let nodes = Api::<Node>::all(client.clone());
    let victim = nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("node name");
    nodes
        .delete(&victim, &DeleteParams::default())
        .await
        .expect("node deleted");
    let replaced = eventually(
        Duration::from_secs(90),
        || async {
            (
                census(&client, NS).await.expect("census"),
                nodes.get_opt(&victim).await.expect("node").is_none(),
            )
        },
        |(c, gone)| *gone && c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes,
    )
    .await;
    replaced.unwrap_or_else(|c| panic!("deleted node not replaced: {c:?}\n{}", joiner.log()));

    // with a budget that allows no eviction, the drain is forced (pods deleted) after the NodePool's
    // terminationGracePeriod, which joiner copied into the claim
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .expect("pdb");
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("pdb created");
    let claims = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert!(
        claims
            .iter()
            .all(|c| c.data["spec"]["terminationGracePeriod"] == "5s"),
        "the NodePool's terminationGracePeriod is on every claim"
    );
    let held = nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("node name");
    nodes
        .delete(&held, &DeleteParams::default())
        .await
        .expect("node deleted");
    let forced = eventually(
        Duration::from_secs(90),
        || async {
            (
                census(&client, NS).await.expect("census"),
                nodes.get_opt(&held).await.expect("node").is_none(),
            )
        },
        |(c, gone)| *gone && c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes,
    )
    .await;
    forced.unwrap_or_else(|c| {
        panic!(
            "node held by a budget not drained after its grace period: {c:?}\n{}",
            joiner.log()
        )
    });
    let deletes = server
        .requests()
        .iter()
        .filter(|r| {
            RequestMatch::verb("delete", "pods").matches(r)
                && r.user.as_deref() == Some("joiner-rbac")
        })
        .count();
    assert!(
        deletes > 0,
        "the forced drain deleted pods\n{}",
        joiner.log()
    );

    aws.sqs
        .send_message()
        .queue_url(&queue)
        .message_body(unknown_instance_warning())
        .send()
        .await
        .expect("message sent");
    sim.scale(NS, "web", 0);
    let gone = eventually(
        Duration::from_secs(90),
        || async {
            nodeclaims(&client)
                .list(&ListParams::default())
                .await
                .expect("claims")
                .items
                .len()
        },
        |n| *n == 0,
    )
    .await;
    gone.unwrap_or_else(|n| panic!("{n} claims left after scale-down\n{}", joiner.log()));
    let handled = eventually(
        Duration::from_secs(30),
        || async {
            joiner::cloud::aws::interruption::approximate_depth(&aws, &queue)
                .await
                .expect("depth")
        },
        |d| *d == 0,
    )
    .await;
    handled.unwrap_or_else(|d| panic!("{d} interruption messages left\n{}", joiner.log()));
    sim.stop().await;

    let requests: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some("joiner-rbac"))
        .collect();
    assert!(
        requests.len() > 50,
        "the controller's requests are recorded under its token: {}",
        requests.len()
    );
    check_rbac(&render(SYSTEM_NS), &requests);
    let seen = proxy.faults().iam_actions.clone();
    check_iam(&seen);
    let kinds: BTreeSet<(String, String)> = requests
        .iter()
        .map(|r| (format!("{:?}", rbac::group_resource(r)), r.verb.clone()))
        .collect();
    println!(
        "{} Kubernetes requests of {} kinds, all allowed; {} AWS actions seen: {seen:?}",
        requests.len(),
        kinds.len(),
        seen.len()
    );
    drop(joiner);
}

/// Every launched instance's user data names the endpoint discovered from kube-proxy's kubeconfig.
async fn check_discovered_endpoint(aws: &joiner::cloud::aws::AwsClients) {
    let reservations = aws
        .ec2
        .describe_instances()
        .send()
        .await
        .expect("instances")
        .reservations
        .unwrap_or_default();
    let ids: Vec<String> = reservations
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(String::from))
        .collect();
    assert!(!ids.is_empty(), "instances launched");
    for id in ids {
        let text = moto::user_data(&aws.ec2, &id).await;
        assert!(
            text.contains(&format!("apiServerEndpoint: {DISCOVERED_ENDPOINT}")),
            "{id}: {text}"
        );
    }
}

fn check_rbac(objects: &[Value], requests: &[apiserver::RequestRecord]) {
    let account = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .expect("a ServiceAccount rendered");
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment rendered");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"].as_str(),
        Some(account),
        "the pods run as the chart's ServiceAccount"
    );
    let rbac = Rbac::bound(objects, account, SYSTEM_NS);
    assert!(!rbac.rules.is_empty(), "no rules bound to {account}");
    let denied: BTreeSet<String> = requests
        .iter()
        .filter(|r| !rbac.allows(r))
        .map(|r| {
            format!(
                "{} {:?} {:?} in {:?} named {:?}",
                r.verb, r.resource, r.subresource, r.namespace, r.name
            )
        })
        .collect();
    assert!(
        denied.is_empty(),
        "the chart's RBAC denies requests the controller makes:\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );
    let unused: Vec<String> = rbac
        .unused(requests)
        .into_iter()
        .filter(|g| {
            !GRANTS_NOT_EXERCISED
                .iter()
                .any(|(group, res, verb, _)| *group == g.1 && *res == g.2 && *verb == g.3)
        })
        .map(|g| format!("{} {}/{} {} name={}", g.0, g.1, g.2, g.3, g.4))
        .collect();
    assert!(
        unused.is_empty(),
        "the chart grants permissions the controller never used:\n{}",
        unused.join("\n")
    );
}

/// The AWS actions the code names in its errors (`AwsError::from_sdk("ec2:CreateFleet", ..)`):
/// every call it makes is wrapped that way.
fn actions_in_code() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let dir = root().join("src/cloud/aws");
    for entry in std::fs::read_dir(&dir).expect("src/cloud/aws") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        for piece in text.split('"').skip(1).step_by(2) {
            if let Some((svc, action)) = piece.split_once(':') {
                if ["ec2", "ssm", "sqs", "pricing", "iam"].contains(&svc)
                    && !action.is_empty()
                    && action.chars().all(|c| c.is_ascii_alphabetic())
                    && action.starts_with(|c: char| c.is_ascii_uppercase())
                {
                    out.insert(piece.to_string());
                }
            }
        }
    }
    out
}

/// Actions AWS authorizes on top of the ones called: CreateFleet launches through RunInstances
/// and tags at creation, and a launch passes the node role through its instance profile.
const IMPLIED: &[&str] = &[
    "ec2:RunInstances",
    "ec2:CreateTags",
    "iam:PassRole",
    "iam:TagInstanceProfile",
];

fn policy_actions(path: &Path) -> BTreeSet<String> {
    let policy: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("IAM policy"))
        .expect("IAM policy is JSON");
    assert_eq!(policy["Version"], "2012-10-17");
    let mut out = BTreeSet::new();
    for s in policy["Statement"].as_array().expect("statements") {
        assert_eq!(s["Effect"], "Allow", "{s}");
        assert!(s["Sid"].is_string(), "every statement has a Sid: {s}");
        match &s["Action"] {
            Value::String(a) => {
                out.insert(a.clone());
            }
            Value::Array(a) => out.extend(a.iter().filter_map(|x| x.as_str().map(String::from))),
            other => panic!("statement without actions: {other}"),
        }
    }
    assert!(
        out.iter().all(|a| !a.contains('*')),
        "no wildcard actions: {out:?}"
    );
    out
}

fn check_iam(seen: &BTreeSet<String>) {
    let code = actions_in_code();
    assert!(code.len() >= 20, "actions found in src/cloud/aws: {code:?}");
    let policy = policy_actions(&root().join(POLICY));
    let missing: Vec<_> = code.difference(&policy).collect();
    assert!(
        missing.is_empty(),
        "{POLICY} lacks actions the code calls: {missing:?}"
    );
    let extra: Vec<_> = policy
        .iter()
        .filter(|a| !code.contains(*a) && !IMPLIED.contains(&a.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "{POLICY} allows actions the code never calls: {extra:?}"
    );
    let unnamed: Vec<_> = seen.iter().filter(|a| !code.contains(*a)).collect();
    assert!(
        unnamed.is_empty(),
        "calls seen at the proxy that the code does not name: {unnamed:?} (seen {seen:?})"
    );
    for must in [
        "ec2:CreateFleet",
        "ec2:TerminateInstances",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "ssm:GetParameter",
    ] {
        assert!(seen.contains(must), "{must} not seen: {seen:?}");
    }
}

/// The libraries the runtime image of the Dockerfile provides (gcr.io/distroless/cc-debian12:
/// glibc, libgcc_s and libstdc++).
const RUNTIME_LIBRARIES: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "ld-linux-x86-64.so.2",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

#[test]
fn the_runtime_image_provides_every_library_the_binary_links() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    let runtime = dockerfile
        .lines()
        .rfind(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "))
        .expect("a FROM line")
        .to_string();
    assert!(
        runtime.contains("gcr.io/distroless/cc-debian12"),
        "the runtime stage is distroless/cc: {runtime}"
    );
    assert!(
        dockerfile
            .lines()
            .any(|l| l.trim_start().starts_with("USER ")
                && (l.contains("65532") || l.contains("nonroot"))),
        "the image runs as non-root"
    );
    let out = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_joiner")])
        .output()
        .expect("readelf (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(
        !needed.is_empty(),
        "readelf found no NEEDED entries:\n{text}"
    );
    let foreign: Vec<&&str> = needed
        .iter()
        .filter(|n| !RUNTIME_LIBRARIES.contains(n))
        .collect();
    assert!(
        foreign.is_empty(),
        "the binary links libraries the runtime image lacks: {foreign:?}"
    );
}
