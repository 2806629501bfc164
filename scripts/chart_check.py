#!/usr/bin/env python3
"""Checks the Helm chart charts/joiner offline: lint, render, Kubernetes schemas, CRDs, security.

    chart_check.py --chart charts/joiner --joiner JOINER_BINARY [--out DIR]
                   [--extra-env-names-from src/cli/controller_cmd.rs]

Prints one line per check (`ok` or `FAIL` with the variant, object and field) and exits 0 only when
every check passes. With --out, writes each variant's rendered objects to DIR/<variant>.json (release
namespace kube-system) and DIR/<variant>.karpenter.json (namespace karpenter).
Needs only the standard library, helm_python (helm-python-sdk), kubernetes_validate and yaml.
"""

import argparse
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import yaml

# The chart's minimum (Chart.yaml kubeVersion), the version k8s-openapi is built for, the newest.
KUBE_VERSIONS = ["1.29.0", "1.33.0", "1.37.0"]
NAMESPACES = ["kube-system", "karpenter"]
RELEASE = "joiner"
REQUIRED = {"settings": {"clusterName": "test-cluster", "clusterEndpoint": "https://ABCDEF0123.gr7.us-east-1.eks.amazonaws.com"}}
COST_WEIGHT_KEYS = {"preferredNodeAffinity", "preferredPodAffinity", "preferredPodAntiAffinity", "scheduleAnywaySkew",
                    "preferNoSchedule", "spotInterruptionBand", "unschedulablePod", "podEviction", "nodeDisruption", "minSavings"}
DOWNWARD_ENV = {"POD_NAME": "metadata.name", "SYSTEM_NAMESPACE": "metadata.namespace"}
# A value different from the chart default for every setting (the all-settings variant).
ALL_SETTINGS = {
    "clusterName": "prod-cluster", "clusterEndpoint": "https://A1B2C3.yl4.eu-west-1.eks.amazonaws.com",
    "clusterCABundle": "LS0tLS1CRUdJTi==", "clusterCIDR": "10.100.0.0/16", "cloudProvider": "sim", "region": "eu-west-1",
    "interruptionQueue": "prod-cluster-interruptions", "isolatedVPC": True, "awsEndpointUrl": "http://localhost:4566",
    "awsMaxAttempts": 7, "kubernetesVersion": "1.33", "catalog": "/etc/joiner/catalog.json", "instanceGCGrace": "1m",
    "strategy": "greedy", "disruptionStrategy": "baseline", "solverTimeLimit": "2500ms", "disruptionTimeLimit": "20s",
    "solverGap": 0.05, "disableDisruption": True, "disruptionInterval": "30s", "validationDelay": "0", "launchTimeout": "10m",
    "registrationTimeout": "20m", "batchIdleDuration": "2s", "batchMaxDuration": "15s", "apiTimeout": "45s", "disableLeaderElection": True,
    "leaderElectionName": "joiner-prod", "leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s",
    "metricsPort": 9090, "healthProbePort": 9091, "bindAddress": "::", "simSeed": 42, "logLevel": "info",
    "featureGates": {"spotToSpotConsolidation": True}, "logFormat": "text",
    "instanceGCInterval": "5m", "disruptionCommandTimeout": "15m", "insufficientCapacityTTL": "2m",
    "unschedulablePodRetry": "30s",
}


def merged(*parts):
    out = {}
    for part in parts:
        for key, value in part.items():
            out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


VARIANTS = {
    "default": REQUIRED,
    "features": merged(REQUIRED, {
        "serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prometheus"}, "interval": "30s"},
        "serviceAccount": {"iamRoleArn": "arn:aws:iam::111122223333:role/joiner-controller"},
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        "settings": {"interruptionQueue": "test-cluster-interruptions", "region": "us-west-2"},
        "costWeights": {"unschedulablePod": 500, "preferNoSchedule": 0.1, "minSavings": 0.02},
        "extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}],
        "nodeSelector": {"kubernetes.io/os": "linux", "node-role": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
        "podAnnotations": {"example.com/team": "platform"}, "podLabels": {"team": "platform"},
    }),
    "all-settings": {"replicas": 1, "settings": ALL_SETTINGS},
}
INVALID = {
    "strategy not in its enum": {"settings": {"strategy": "simplex"}},
    "cloudProvider not in its enum": {"settings": {"cloudProvider": "gcp"}},
    "disruptionStrategy not in its enum": {"settings": {"disruptionStrategy": "greedy"}},
    "negative replicas": {"replicas": -1},
    "unknown top-level key": {"replicaCount": 3},
    "unknown settings key": {"settings": {"clusterNmae": "x"}},
    "malformed duration": {"settings": {"solverTimeLimit": "5 seconds"}},
    "zero duration the binary rejects": {"settings": {"batchIdleDuration": "0s"}},
    "solverGap of 1": {"settings": {"solverGap": 1}},
    "unknown cost weight": {"costWeights": {"unschedulablePods": 500}},
    "negative cost weight": {"costWeights": {"minSavings": -1}},
    "leader election off with 2 replicas": {"settings": {"disableLeaderElection": True}},
    "unknown feature gate": {"settings": {"featureGates": {"spotToSpot": True}}},
    "unknown controller key": {"controller": {"extraVolumeMount": []}},
}


class Failures(Exception):
    """Problems one check found."""


def expect(problems, condition, message):
    if not condition:
        problems.append(message)


def render(chart, values, namespace):
    """The rendered objects of a release, in template order."""
    objects = []
    for path, text in sorted(chart.render(values, name=RELEASE, namespace=namespace).items()):
        if path.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def find(objects, kind, name=None):
    hits = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    if len(hits) != 1:
        raise Failures([f"expected one {kind} {name or ''}, found {len(hits)}"])
    return hits[0]


def check_lint(chart_dir, values, namespace):
    report = helm.lint(chart_dir, values, strict=True, namespace=namespace, kube_version="v" + KUBE_VERSIONS[1])
    bad = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2] + report.get("errors", [])
    if bad:
        raise Failures(bad)


def check_kubernetes_schemas(objects):
    problems = []
    for obj in objects:
        what = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        if obj.get("kind") == "ServiceMonitor":
            expect(problems, obj.get("apiVersion") == "monitoring.coreos.com/v1", f"{what}: apiVersion")
            expect(problems, isinstance(obj.get("metadata", {}).get("name"), str), f"{what}: metadata.name")
            spec = obj.get("spec", {})
            expect(problems, isinstance(spec.get("selector", {}).get("matchLabels"), dict), f"{what}: spec.selector.matchLabels")
            endpoints = spec.get("endpoints") or [{}]
            expect(problems, all(isinstance(e.get("port"), str) for e in endpoints), f"{what}: spec.endpoints[].port")
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append(f"{what} (Kubernetes {version}): {'.'.join(map(str, e.path))}: {e.message}")
            except Exception as e:  # noqa: BLE001 - schema missing etc.
                problems.append(f"{what} (Kubernetes {version}): {type(e).__name__}: {e}")
    if problems:
        raise Failures(problems)


def check_security(objects, namespace):
    problems = []
    dep = find(objects, "Deployment")
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    psc = spec.get("securityContext", {})
    expect(problems, psc.get("runAsNonRoot") is True, "Deployment spec.template.spec.securityContext.runAsNonRoot is not true")
    expect(problems, psc.get("runAsUser") == 65532 and psc.get("runAsGroup") == 65532, "pod securityContext runAsUser/runAsGroup is not 65532")
    expect(problems, psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "pod securityContext.seccompProfile.type is not RuntimeDefault")
    (c,) = spec["containers"]
    sc = c.get("securityContext", {})
    expect(problems, sc.get("runAsNonRoot") is True, "container securityContext.runAsNonRoot is not true")
    expect(problems, sc.get("readOnlyRootFilesystem") is True, "container securityContext.readOnlyRootFilesystem is not true")
    expect(problems, sc.get("allowPrivilegeEscalation") is False, "container securityContext.allowPrivilegeEscalation is not false")
    expect(problems, sc.get("capabilities", {}).get("drop") == ["ALL"], "container securityContext.capabilities.drop is not [ALL]")
    expect(problems, sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "container securityContext.seccompProfile.type is not RuntimeDefault")
    res = c.get("resources", {})
    expect(problems, res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory") and res.get("limits", {}).get("memory"),
           "container resources: requests.cpu, requests.memory and limits.memory must be set")
    expect(problems, c.get("args") == ["controller"] and c.get("command") == ["/usr/local/bin/joiner"], "container command/args is not joiner controller")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        expect(problems, get.get("path") == path and get.get("port") in ports, f"container {probe} is not httpGet {path} on a named port")
    expect(problems, any(m["mountPath"] == "/tmp" for m in c.get("volumeMounts", [])), "no writable /tmp volume")
    env = {e["name"]: e for e in c.get("env", [])}
    for name, field in DOWNWARD_ENV.items():
        expect(problems, env.get(name, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == field, f"env {name} is not the downward API {field}")
    settings = find(objects, "ConfigMap", f"{dep['metadata']['name']}-settings")
    expect(problems, c.get("envFrom") == [{"configMapRef": {"name": settings["metadata"]["name"]}}], "envFrom is not the settings ConfigMap")
    expect(problems, "checksum/settings" in (pod["metadata"].get("annotations") or {}), "no checksum/settings pod annotation")
    labels = pod["metadata"]["labels"]
    expect(problems, dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), "Deployment selector does not select its pods")
    spread = spec.get("topologySpreadConstraints", [])
    expect(problems, {t["topologyKey"] for t in spread} >= {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, "topologySpreadConstraints lack zone and hostname")
    expect(problems, all(t["labelSelector"]["matchLabels"].items() <= labels.items() for t in spread), "a topology spread does not select the pods")
    if dep["spec"]["replicas"] > 1:
        pdb = find(objects, "PodDisruptionBudget")
        expect(problems, pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(), "PodDisruptionBudget does not select the pods")
        expect(problems, pdb["spec"].get("maxUnavailable") == 1, "PodDisruptionBudget maxUnavailable is not 1")
        expect(problems, settings["data"].get("DISABLE_LEADER_ELECTION") == "false", "replicas > 1 without leader election")
    sa = spec["serviceAccountName"]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        subjects = find(objects, kind)["subjects"]
        expect(problems, subjects == [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}], f"{kind} subjects are not the ServiceAccount {namespace}/{sa}")
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            expect(problems, obj["metadata"].get("namespace") == namespace, f"{obj['kind']} {obj['metadata']['name']} is not in namespace {namespace}")
    weights = find(objects, "ConfigMap", "joiner-cost-weights")
    for key, value in (weights.get("data") or {}).items():
        expect(problems, key in COST_WEIGHT_KEYS, f"ConfigMap joiner-cost-weights: unknown key {key}")
        expect(problems, re.fullmatch(r"[0-9.]+([eE][-+]?[0-9]+)?", value) is not None, f"ConfigMap joiner-cost-weights: {key}: {value!r} is not a non-negative number")
    if problems:
        raise Failures(problems)


def check_env_names(objects, known):
    settings = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-settings"))
    unknown = sorted(set(settings.get("data", {})) - known)
    problems = [f"ConfigMap {settings['metadata']['name']}: data.{k} is not an environment variable joiner controller reads" for k in unknown]
    problems += [f"ConfigMap {settings['metadata']['name']}: data.{k} must come from the downward API" for k in DOWNWARD_ENV if k in settings.get("data", {})]
    if problems:
        raise Failures(problems)


def settings_data(chart, values):
    objects = render(chart, values, NAMESPACES[0])
    dep = find(objects, "Deployment")
    data = find(objects, "ConfigMap", f"{dep['metadata']['name']}-settings").get("data", {})
    return data, (dep["spec"]["template"]["metadata"].get("annotations") or {}).get("checksum/settings")


def check_settings_mapping(chart):
    """Setting each key alone changes exactly one env var, a different one for every key; the checksum follows."""
    base, base_sum = settings_data(chart, REQUIRED)
    problems, owner = [], {}
    for key in sorted(chart.values["settings"]):
        if key not in ALL_SETTINGS:
            problems.append(f"settings.{key}: no test value in ALL_SETTINGS (scripts/chart_check.py)")
            continue
        extra = {"replicas": 1} if key == "disableLeaderElection" else {}
        if key == "cloudProvider":
            extra = {"settings": {"clusterEndpoint": ""}}
        data, checksum = settings_data(chart, merged(REQUIRED, extra, {"settings": {key: ALL_SETTINGS[key]}}))
        changed = sorted(k for k in set(base) | set(data) if base.get(k) != data.get(k) and not (key == "cloudProvider" and k == "CLUSTER_ENDPOINT"))
        if len(changed) != 1:
            problems.append(f"settings.{key}: changes env vars {changed}, expected exactly one (another key writing the same var?)")
            continue
        if changed[0] in owner:
            problems.append(f"settings.{key} and settings.{owner[changed[0]]} both set {changed[0]}")
        owner[changed[0]] = key
        expect(problems, base_sum and checksum != base_sum, f"settings.{key}: the checksum/settings annotation did not change")
    missing = set(ALL_SETTINGS) ^ set(chart.values["settings"])
    expect(problems, not missing, f"ALL_SETTINGS and values.yaml settings differ: {sorted(missing)}")
    if problems:
        raise Failures(problems)
    return owner


def check_defaults_match_binary(chart, help_text):
    """Each setting's default in values.yaml is the binary's default (on purpose not: cloudProvider aws,
    and logFormat json, for log shippers in a cluster)."""
    defaults = {}
    for block in re.split(r"\n\s*(?=--[a-z])", help_text):
        env, default = re.search(r"\[env: ([A-Z0-9_]+)=", block), re.search(r"\[default: ([^\]]*)\]", block)
        if env and default:
            defaults[env.group(1)] = default.group(1)
    data, _ = settings_data(chart, REQUIRED)
    problems = [f"{env}: chart default {data.get(env)!r}, binary default {value!r}" for env, value in sorted(defaults.items())
                if env not in ("JOINER_CLOUD_PROVIDER", "JOINER_LOG_FORMAT", "SYSTEM_NAMESPACE") and env in data and data[env] != value]
    if problems:
        raise Failures(problems)


def check_binary_accepts(objects, joiner):
    """`joiner controller` validates the rendered settings and gets as far as reading its kubeconfig.
    JOINER_CATALOG is dropped: it names a file mounted into the pod."""
    dep = find(objects, "Deployment")
    env = dict(find(objects, "ConfigMap", f"{dep['metadata']['name']}-settings").get("data") or {})
    env.pop("JOINER_CATALOG", None)
    env.update(POD_NAME=f"{dep['metadata']['name']}-0", SYSTEM_NAMESPACE=dep["metadata"]["namespace"], KUBECONFIG="/nonexistent/kubeconfig")
    proc = subprocess.run([joiner, "controller"], env=env, capture_output=True, text=True, timeout=60)
    if "/nonexistent/kubeconfig" not in proc.stderr:
        raise Failures([f"joiner controller rejected the settings (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"])


def check_invalid(chart):
    problems = []
    cases = dict(INVALID, **{"missing clusterName": {"settings": {"clusterEndpoint": REQUIRED["settings"]["clusterEndpoint"]}}})
    for name, values in cases.items():
        full = values if name == "missing clusterName" else merged(REQUIRED, values)
        try:
            render(chart, full, NAMESPACES[0])
            problems.append(f"{name}: values {json.dumps(values)} were accepted")
        except (helm.HelmValuesError, helm.HelmRenderError):
            pass
    if problems:
        raise Failures(problems)


def split_documents(text):
    docs = re.split(r"(?m)^---[ \t]*\n", text)
    return [d for d in docs if d.strip()]


def normalise(text):
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def check_crds(chart_dir, joiner):
    stream = subprocess.run([joiner, "crds"], check=True, capture_output=True, text=True).stdout
    problems, expected = [], set()
    for doc in split_documents(stream):
        crd = yaml.safe_load(doc)
        name = f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
        expected.add(name)
        path = Path(chart_dir, "crds", name)
        if not path.exists():
            problems.append(f"crds/{name} is missing")
            continue
        text = path.read_text()
        file_docs = split_documents(text)
        expect(problems, len(file_docs) == 1, f"crds/{name}: {len(file_docs)} documents, expected 1")
        expect(problems, yaml.safe_load(text) == crd, f"crds/{name}: differs from `joiner crds` as YAML objects")
        expect(problems, normalise(file_docs[0]) == normalise(doc), f"crds/{name}: differs from `joiner crds` as text")
    extra = {p.name for p in Path(chart_dir, "crds").iterdir()} - expected
    expect(problems, not extra, f"crds/ holds files `joiner crds` does not print: {sorted(extra)}")
    expect(problems, len(expected) == 3, f"`joiner crds` printed {len(expected)} CRDs, expected 3")
    if problems:
        raise Failures(problems)


def env_names(joiner, extra_file):
    help_text = subprocess.run([joiner, "controller", "--help"], check=True, capture_output=True, text=True).stdout
    names = set(re.findall(r"\[env: ([A-Z0-9_]+)=", help_text)) | set(DOWNWARD_ENV)
    if extra_file:
        names |= set(re.findall(r'env\s*=\s*"([A-Z0-9_]+)"', Path(extra_file).read_text()))
    return names, help_text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chart", required=True)
    ap.add_argument("--joiner", required=True, help="the joiner binary (for `crds` and `controller --help`)")
    ap.add_argument("--out", help="write each variant's rendered objects as JSON here")
    ap.add_argument("--extra-env-names-from", help="also accept env names declared (env = \"NAME\") in this Rust file")
    args = ap.parse_args()
    failed = []

    def run(name, fn, *a):
        try:
            result = fn(*a)
            print(f"ok   {name}")
            return result
        except Failures as e:
            failed.append(name)
            print(f"FAIL {name}")
            for problem in e.args[0]:
                print(f"       {problem}")
        except Exception as e:  # noqa: BLE001 - any error fails the check with its message
            failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}")

    known, help_text = env_names(args.joiner, args.extra_env_names_from)
    chart = helm.Chart.load(args.chart)
    run("crds/ equals `joiner crds`", check_crds, args.chart, args.joiner)
    for variant, values in VARIANTS.items():
        for namespace in NAMESPACES:
            where = f"[{variant} @ {namespace}]"
            run(f"{where} helm lint --strict", check_lint, args.chart, values, namespace)
            objects = run(f"{where} render", render, chart, values, namespace)
            if objects is None:
                continue
            run(f"{where} Kubernetes {'/'.join(KUBE_VERSIONS)} schemas (strict)", check_kubernetes_schemas, objects)
            run(f"{where} deployment security, wiring and RBAC subjects", check_security, objects, namespace)
            run(f"{where} settings env names known to the binary", check_env_names, objects, known)
            if namespace == NAMESPACES[0]:
                run(f"{where} joiner controller accepts the settings", check_binary_accepts, objects, args.joiner)
            if args.out:
                Path(args.out).mkdir(parents=True, exist_ok=True)
                suffix = "" if namespace == NAMESPACES[0] else f".{namespace}"
                Path(args.out, f"{variant}{suffix}.json").write_text(json.dumps(objects, indent=1) + "\n")
    run("each setting maps to exactly one env var; checksum/settings follows", check_settings_mapping, chart)
    run("setting defaults equal the binary's", check_defaults_match_binary, chart, help_text)
    run(f"invalid values rejected ({len(INVALID) + 1} cases)", check_invalid, chart)
    print(f"{'FAILED' if failed else 'PASSED'}: {len(failed)} check(s) failed" if failed else "PASSED: every check")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
