//! The Helm chart's values against Karpenter's: a values file laid out as for Karpenter's chart
//! (charts/joiner/ci/karpenter-values.yaml, written from its documented keys) renders, every object
//! passes the Kubernetes schemas, and each Karpenter key lands where joiner reads it; `helm lint`
//! passes on the chart's defaults and on every `ci/` values file, as chart-testing runs it; the
//! aggregated ClusterRoles extend `view` and `edit`; the spot-to-spot feature gate reaches the
//! controller's environment and the binary; typos in joiner's keys are rejected. Rendering and
//! linting use the real Helm library (helm-python-sdk) from the venv of `scripts/setup.sh`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

const CHART: &str = "charts/joiner";
const KARPENTER_VALUES: &str = "charts/joiner/ci/karpenter-values.yaml";

/// `lint`: lints the defaults and each ci/*-values.yaml. `render VALUES NAMESPACE`: renders
/// (VALUES is JSON, or @file for YAML) and validates every object but the ServiceMonitor against
/// the Kubernetes 1.33 schemas. `reject CASES`: renders each JSON values case and names those that
/// were accepted.
const SCRIPT: &str = r#"
import glob, json, sys, yaml
import helm_python as helm, kubernetes_validate
chart_dir = sys.argv[1]
mode = sys.argv[2]
def values(arg):
    return yaml.safe_load(open(arg[1:])) if arg.startswith("@") else json.loads(arg)
if mode == "lint":
    out = {}
    for path in [None] + sorted(glob.glob(chart_dir + "/ci/*-values.yaml")):
        v = yaml.safe_load(open(path)) if path else {}
        for ns in ["kube-system", "karpenter"]:
            r = helm.lint(chart_dir, v, strict=True, namespace=ns, kube_version="v1.33.0")
            bad = [m["path"] + ": " + m["error"] for m in r["messages"] if m["severity"] >= 2]
            out[(path or "defaults") + " @ " + ns] = bad + r.get("errors", [])
    print(json.dumps(out))
elif mode == "render":
    chart = helm.Chart.load(chart_dir)
    files = chart.render(values(sys.argv[3]), name="karpenter", namespace=sys.argv[4])
    objects, invalid = [], []
    for name, text in sorted(files.items()):
        if name.endswith(".txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            objects.append(doc)
            if doc["kind"] == "ServiceMonitor":
                continue
            try:
                kubernetes_validate.validate(doc, "1.33.0", strict=True)
            except kubernetes_validate.ValidationError as e:
                where = ".".join(map(str, e.path))
                invalid.append(f"{doc['kind']} {doc['metadata']['name']}: {where}: {e.message}")
    notes = next((t for n, t in files.items() if n.endswith("NOTES.txt")), "")
    print(json.dumps({"objects": objects, "invalid": invalid, "notes": notes}))
elif mode == "reject":
    chart = helm.Chart.load(chart_dir)
    accepted = []
    for case in json.loads(sys.argv[3]):
        try:
            chart.render(case, name="karpenter", namespace="karpenter")
            accepted.append(case)
        except (helm.HelmValuesError, helm.HelmRenderError):
            pass
    print(json.dumps(accepted))
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn helm(args: &[&str]) -> Value {
    let python = std::env::var("JOINER_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(&python)
        .args(["-c", SCRIPT, CHART])
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {python} ({e}); run scripts/setup.sh or set JOINER_PYTHON")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helm script {args:?} failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

struct Rendered {
    objects: Vec<Value>,
    notes: String,
}

impl Rendered {
    fn of(values: &str, namespace: &str) -> Rendered {
        let out = helm(&["render", values, namespace]);
        let invalid = out["invalid"].as_array().expect("invalid list");
        assert!(
            invalid.is_empty(),
            "objects failing the Kubernetes schemas: {invalid:#?}"
        );
        Rendered {
            objects: out["objects"].as_array().expect("objects").clone(),
            notes: out["notes"].as_str().unwrap_or_default().to_string(),
        }
    }

    fn one(&self, kind: &str, name_ends: &str) -> &Value {
        let hits: Vec<&Value> = self
            .objects
            .iter()
            .filter(|o| {
                o["kind"] == kind
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(name_ends))
            })
            .collect();
        assert_eq!(hits.len(), 1, "one {kind} *{name_ends}: {hits:#?}");
        hits[0]
    }

    fn settings(&self) -> &serde_json::Map<String, Value> {
        self.one("ConfigMap", "-settings")["data"]
            .as_object()
            .expect("settings data")
    }
}

/// Runs `joiner controller` with `env` and a kubeconfig that does not exist: it validates its
/// settings first, so reaching the kubeconfig means it accepted them. Returns (accepted, stderr).
fn controller_accepts(env: &serde_json::Map<String, Value>) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_joiner"));
    cmd.arg("controller").env_clear();
    for (k, v) in env {
        // JOINER_CATALOG names a file mounted into the pod
        if k != "JOINER_CATALOG" {
            cmd.env(k, v.as_str().expect("env text"));
        }
    }
    let out = cmd
        .envs([
            ("POD_NAME", "karpenter-0"),
            ("SYSTEM_NAMESPACE", "karpenter"),
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
        ])
        .output()
        .expect("joiner runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (stderr.contains("/nonexistent/kubeconfig"), stderr)
}

#[test]
fn helm_lint_passes_on_the_defaults_and_every_ci_values_file() {
    let report = helm(&["lint"]);
    let report = report.as_object().expect("lint report");
    let files: BTreeSet<&str> = report
        .keys()
        .filter_map(|k| k.split(" @ ").next())
        .collect();
    for must in [
        "defaults",
        "charts/joiner/ci/default-values.yaml",
        KARPENTER_VALUES,
    ] {
        assert!(files.contains(must), "{must} linted: {files:?}");
    }
    let failed: Vec<_> = report
        .iter()
        .filter(|(_, bad)| !bad.as_array().expect("messages").is_empty())
        .collect();
    assert!(failed.is_empty(), "helm lint --strict failed: {failed:#?}");
}

#[test]
fn a_karpenter_values_file_renders_validates_and_lands_where_joiner_reads_it() {
    let r = Rendered::of(&format!("@{KARPENTER_VALUES}"), "karpenter");
    let deployment = r.one("Deployment", "joiner");
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 5);
    assert_eq!(
        deployment["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "karpenter");
    assert_eq!(pod["dnsConfig"]["options"][0]["name"], "ndots");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["securityContext"]["fsGroup"], 65532);
    assert_eq!(
        pod["securityContext"]["runAsNonRoot"], true,
        "Karpenter's podSecurityContext merges over joiner's"
    );
    assert!(
        pod.get("terminationGracePeriodSeconds").is_none(),
        "null leaves Kubernetes' default"
    );
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"], "karpenter",
        "a pod anti-affinity term without a selector selects the controller pods: {anti}"
    );
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["name"], "controller");
    assert_eq!(c["image"], "ghcr.io/joiner-autoscaler/joiner:0.1.0");
    assert_eq!(c["resources"]["requests"]["cpu"], 1);
    assert!(
        c["env"]
            .as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "AWS_REGION" && e["value"] == "eu-west-1"),
        "controller.env: {}",
        c["env"]
    );
    assert!(
        c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .any(|m| m["name"] == "aws-iam-token"),
        "controller.extraVolumeMounts: {}",
        c["volumeMounts"]
    );
    assert_eq!(
        r.one("PodDisruptionBudget", "karpenter")["spec"]["maxUnavailable"],
        1
    );
    let monitor = &r.one("ServiceMonitor", "joiner")["spec"]["endpoints"][0];
    assert_eq!(monitor["port"], "http-metrics");
    assert_eq!(monitor["interval"], "30s", "endpointConfig");
    assert_eq!(monitor["metricRelabelings"][0]["action"], "drop");

    let settings = r.settings();
    assert_eq!(settings["CLUSTER_NAME"], "prod");
    assert_eq!(settings["INTERRUPTION_QUEUE"], "prod");
    assert_eq!(settings["JOINER_LOG"], "info", "Karpenter's logLevel");
    assert!(
        !settings.contains_key("CLUSTER_ENDPOINT"),
        "an empty endpoint is discovered"
    );
    let gates = settings["FEATURE_GATES"].as_str().expect("FEATURE_GATES");
    assert!(
        gates.contains("SpotToSpotConsolidation=true") && gates.contains("ReservedCapacity=true"),
        "{gates}"
    );
    let discovery = r.one("Role", "-cluster-endpoint");
    assert_eq!(discovery["metadata"]["namespace"], "kube-system");
    assert_eq!(
        discovery["rules"][0]["resourceNames"],
        json!(["kube-proxy"])
    );
    for ignored in [
        "settings.vmMemoryOverheadPercent",
        "settings.featureGates.reservedCapacity",
        "logOutputPaths",
    ] {
        assert!(
            r.notes.contains(ignored),
            "NOTES names {ignored}:\n{}",
            r.notes
        );
    }
    let (accepted, stderr) = controller_accepts(settings);
    assert!(
        accepted,
        "joiner controller rejects the settings rendered from Karpenter's values:\n{stderr}"
    );
}

#[test]
fn the_spot_to_spot_feature_gate_reaches_the_controller() {
    let base = json!({"settings": {"clusterName": "gate"}});
    let off = Rendered::of(&base.to_string(), "kube-system");
    assert_eq!(
        off.settings()["FEATURE_GATES"],
        "SpotToSpotConsolidation=false",
        "off by default, as in Karpenter"
    );
    let mut on = base.clone();
    on["settings"]["featureGates"] = json!({"spotToSpotConsolidation": true});
    let on = Rendered::of(&on.to_string(), "kube-system");
    let mut env = on.settings().clone();
    assert_eq!(env["FEATURE_GATES"], "SpotToSpotConsolidation=true");
    let (accepted, stderr) = controller_accepts(&env);
    assert!(accepted, "{stderr}");
    // the binary reads the variable: a gate it does not know stops it before the kubeconfig
    env.insert("FEATURE_GATES".into(), json!("SpotToSpot=true"));
    let (accepted, stderr) = controller_accepts(&env);
    assert!(
        !accepted && stderr.contains("unknown feature gate"),
        "{stderr}"
    );
}

#[test]
fn aggregated_cluster_roles_extend_view_and_edit() {
    let r = Rendered::of(
        &json!({"settings": {"clusterName": "roles"}}).to_string(),
        "karpenter",
    );
    let resources = |role: &Value| -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for rule in role["rules"].as_array().expect("rules") {
            for res in rule["resources"].as_array().expect("resources") {
                for verb in rule["verbs"].as_array().expect("verbs") {
                    out.insert((
                        res.as_str().unwrap_or_default().to_string(),
                        verb.as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
        }
        out
    };
    let view = r.one("ClusterRole", "-view");
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    let edit = r.one("ClusterRole", "-edit");
    assert_eq!(
        edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    let (view, edit) = (resources(view), resources(edit));
    for kind in ["nodepools", "nodeclaims", "ec2nodeclasses"] {
        for verb in ["get", "list", "watch"] {
            assert!(
                view.contains(&(kind.into(), verb.into())),
                "view {verb} {kind}"
            );
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(
                edit.contains(&(kind.into(), verb.into())),
                "edit {verb} {kind}"
            );
        }
    }
    assert!(
        view.iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str())),
        "view only reads: {view:?}"
    );
    assert!(
        edit.iter().all(|(res, _)| !res.ends_with("/status")),
        "users never write status: {edit:?}"
    );
    let bound: Vec<&Value> = r
        .objects
        .iter()
        .filter(|o| {
            o["kind"] == "ClusterRoleBinding"
                && o["roleRef"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-view") || n.ends_with("-edit"))
        })
        .collect();
    assert!(
        bound.is_empty(),
        "the aggregated roles are not the controller's: {bound:#?}"
    );
    let off = Rendered::of(
        &json!({"settings": {"clusterName": "roles"}, "aggregateClusterRoles": false}).to_string(),
        "karpenter",
    );
    assert_eq!(
        off.objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .count(),
        1,
        "only the controller's ClusterRole"
    );
}

#[test]
fn typos_in_joiners_keys_are_rejected() {
    let named = "typo";
    let cases = json!([
        {"settings": {"clusterName": named, "clusterNmae": "x"}},
        {"settings": {"clusterName": named, "featureGates": {"spotToSpot": true}}},
        {"settings": {"clusterName": named}, "controller": {"extraVolumeMount": []}},
        {"settings": {"clusterName": named}, "serviceMonitor": {"metricRelabeling": []}},
        {"settings": {"clusterName": named},
         "serviceMonitor": {"metricRelabelings": [{"sourceLabel": ["__name__"], "action": "drop"}]}},
        {"settings": {"clusterName": named},
         "serviceMonitor": {"endpointConfig": {"port": "other"}}},
        {"settings": {"clusterName": named}, "podDisruptionBudget": {"maxUnavailabe": 1}},
        {"settings": {"clusterName": named}, "replicaCount": 2},
        {"settings": {"clusterName": named}, "imagePullPolicy": "Sometimes"},
        {"settings": {}},
    ]);
    let accepted = helm(&["reject", &cases.to_string()]);
    assert_eq!(accepted, json!([]), "accepted despite a typo");
    // the same keys spelt right render (a control: the cases fail on the typo, not elsewhere)
    let right = json!([
        {"settings": {"clusterName": named, "featureGates": {"spotToSpotConsolidation": true}},
         "controller": {"extraVolumeMounts": []}, "replicas": 2, "imagePullPolicy": "Always",
         "podDisruptionBudget": {"maxUnavailable": 1},
         "serviceMonitor": {"metricRelabelings": [{"sourceLabels": ["__name__"], "action": "drop"}],
                            "endpointConfig": {"honorLabels": true}}},
    ]);
    assert_eq!(helm(&["reject", &right.to_string()]), right);
}

/// The variables `joiner controller --help` names (`[env: NAME=...]`).
fn controller_variables() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .args(["controller", "--help"])
        .output()
        .expect("joiner runs");
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    help.split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_string)
        .collect()
}

/// Every variable the controller reads reaches the pod from the chart: a `settings` key in
/// values.yaml maps to it (the settings ConfigMap's table in _helpers.tpl), or the Deployment sets
/// it; only `KUBECONFIG`, for running outside a cluster, has neither. A flag added without a chart
/// key fails here.
#[test]
fn every_controller_variable_has_a_chart_setting_or_comes_from_the_deployment() {
    let read = |path: &str| std::fs::read_to_string(root().join(CHART).join(path)).expect(path);
    let helpers = read("templates/_helpers.tpl");
    let table = helpers
        .split("define \"joiner.settingsEnv\"")
        .nth(1)
        .and_then(|t| t.split("{{- end }}").next())
        .expect("joiner.settingsEnv");
    let env_of: std::collections::BTreeMap<&str, &str> = table
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let values: serde_yaml_ng::Value = serde_yaml_ng::from_str(&read("values.yaml")).expect("yaml");
    let keys = values["settings"].as_mapping().expect("settings");
    let mut reached: BTreeSet<String> = keys
        .keys()
        .filter_map(|k| env_of.get(k.as_str()?))
        .map(|v| v.to_string())
        .collect();
    let deployment = read("templates/deployment.yaml");
    reached.extend(
        deployment
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- name: "))
            .filter(|n| n.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(str::to_string),
    );
    let read_by_controller = controller_variables();
    assert!(
        read_by_controller.len() > 40,
        "--help names {read_by_controller:?}"
    );
    let missing: Vec<&String> = read_by_controller
        .iter()
        .filter(|v| !reached.contains(*v) && *v != "KUBECONFIG")
        .collect();
    assert_eq!(
        missing,
        Vec::<&String>::new(),
        "variables without a chart key"
    );
}
