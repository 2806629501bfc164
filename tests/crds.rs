//! The typed Karpenter resources in `joiner::api` against the repository's manifests, and the CRDs
//! `joiner crds` prints: a golden of the output and spot checks that the defaults and CEL rules made
//! it into the schemas.

use std::path::{Path, PathBuf};
use std::process::Command;

use joiner::api::{EC2NodeClass, NodeClaim, NodePool};
use serde::Deserialize;
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures dir readable")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        // fixtures/bad-input/ is malformed on purpose (tests/bad_input.rs)
        if path.is_dir() && path.file_name().is_some_and(|n| n == "bad-input") {
            continue;
        }
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Every document of a manifest file, with `List` documents expanded into their items.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value =
            Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
        expand(value, &mut docs);
    }
    docs
}

fn expand(value: Value, out: &mut Vec<Value>) {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "List" || k.ends_with("List"));
    match (is_list, value.get("items").and_then(Value::as_array)) {
        (true, Some(items)) => items.iter().cloned().for_each(|item| expand(item, out)),
        _ => out.push(value),
    }
}

fn parse<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<(), String> {
    serde_path_to_error::deserialize::<_, T>(doc.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn every_fixture_karpenter_object_reads_as_typed_object() {
    let mut files = Vec::new();
    yaml_files(&fixtures_dir(), &mut files);
    let (mut counts, mut failures) = ([0usize; 3], Vec::new());
    for file in &files {
        for doc in documents(file) {
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            let result = match kind {
                "NodePool" => parse::<NodePool>(&doc).map(|_| counts[0] += 1),
                "NodeClaim" => parse::<NodeClaim>(&doc).map(|_| counts[1] += 1),
                "EC2NodeClass" => parse::<EC2NodeClass>(&doc).map(|_| counts[2] += 1),
                _ => continue,
            };
            if let Err(e) = result {
                let name = doc
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                failures.push(format!("{} {kind}/{name}: {e}", file.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} objects failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        counts.iter().all(|&c| c > 0),
        "expected every kind among the fixtures, got {counts:?}"
    );
}

fn joiner_crds(extra: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg("crds")
        .args(extra)
        .output()
        .expect("joiner runs");
    assert!(
        out.status.success(),
        "joiner crds failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn crds_output_matches_golden() {
    let out = joiner_crds(&[]);
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    assert_eq!(
        text.matches("\n---\n").count() + usize::from(text.starts_with("---\n")),
        3
    );
    insta::assert_snapshot!("joiner_crds", text);
}

#[test]
fn crds_out_writes_one_file_per_crd() {
    let dir = std::env::temp_dir().join(format!("joiner-crds-test-{}", std::process::id()));
    joiner_crds(&["--out", dir.to_str().expect("utf-8 temp path")]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("out dir exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "karpenter.k8s.aws_ec2nodeclasses.yaml",
            "karpenter.sh_nodeclaims.yaml",
            "karpenter.sh_nodepools.yaml"
        ]
    );
    let stream = joiner::api::crds_yaml().expect("crds render");
    let file =
        std::fs::read_to_string(dir.join("karpenter.sh_nodepools.yaml")).expect("file readable");
    assert!(
        stream.contains(&file),
        "the file holds the same document as the stream"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The `openAPIV3Schema` of a CRD as JSON.
fn schema(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    let version = &crd.spec.versions[0];
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("CRD has a schema");
    serde_json::to_value(schema).expect("schema serializes")
}

fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut node = schema;
    for key in path.split('.') {
        node = node
            .pointer(&format!("/properties/{key}"))
            .or_else(|| node.pointer(&format!("/items/properties/{key}")))
            .unwrap_or_else(|| panic!("no {key} in {path}"));
    }
    node
}

fn rules(node: &Value) -> Vec<String> {
    let list = node
        .get("x-kubernetes-validations")
        .or_else(|| node.pointer("/items/x-kubernetes-validations"));
    list.and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r.get("rule").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn nodepool_schema_carries_defaults_and_rules() {
    let crd = NodePool::crd_checked();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(
        crd.spec.names.categories.as_deref(),
        Some(&["karpenter".to_string()][..])
    );
    let s = schema(&crd);
    assert_eq!(at(&s, "spec.template.spec.expireAfter")["default"], "720h");
    assert_eq!(
        at(&s, "spec.template.spec.expireAfter")["pattern"],
        r"^(([0-9]+(s|m|h))+|Never)$"
    );
    let disruption = at(&s, "spec.disruption");
    assert_eq!(disruption["default"]["consolidateAfter"], "0s");
    assert_eq!(disruption["default"]["budgets"][0]["nodes"], "10%");
    assert_eq!(
        at(&s, "spec.disruption.consolidationPolicy")["default"],
        "WhenEmptyOrUnderutilized"
    );
    assert!(at(&s, "spec.disruption.consolidationPolicy")["enum"]
        .as_array()
        .is_some_and(|e| e.iter().any(|v| v == "Balanced")));
    assert!(rules(at(&s, "spec.disruption.consolidationThreshold"))
        .iter()
        .any(|r| r == "self > 0.0"));
    assert!(rules(disruption)
        .iter()
        .any(|r| r.contains("self.consolidationPolicy == 'Balanced'")));
    assert_eq!(
        at(&s, "spec.disruption.budgets")["maxItems"].as_f64(),
        Some(50.0)
    );
    assert!(rules(at(&s, "spec.disruption.budgets"))
        .iter()
        .any(|r| r.contains("has(b.schedule) == has(b.duration)")));
    assert_eq!(at(&s, "spec.weight")["minimum"].as_f64(), Some(1.0));
    assert_eq!(at(&s, "spec.weight")["maximum"].as_f64(), Some(100.0));
    let requirements = at(&s, "spec.template.spec.requirements");
    assert_eq!(requirements["maxItems"].as_f64(), Some(100.0));
    let list_rules = rules(requirements);
    assert!(
        list_rules
            .iter()
            .any(|r| r.contains(r#"r.key != "karpenter.sh/nodepool""#)),
        "{list_rules:?}"
    );
    assert!(list_rules
        .iter()
        .any(|r| r.contains("r.operator != 'In' || size(r.values) > 0")));
    let key = at(&s, "spec.template.spec.requirements.key");
    assert!(rules(key)
        .iter()
        .any(|r| r.contains("kubernetes.io/hostname")));
    assert_eq!(
        at(&s, "spec.template.spec.requirements.minValues")["maximum"].as_f64(),
        Some(50.0)
    );
    let limits = &at(&s, "spec.limits")["additionalProperties"];
    assert_eq!(limits["x-kubernetes-int-or-string"], true);
    assert!(
        limits.get("description").is_none(),
        "quantity maps are kept short"
    );
    assert!(rules(at(&s, "spec.template.spec.nodeClassRef"))
        .iter()
        .any(|r| r == "self.group == oldSelf.group"));
    assert!(s
        .pointer("/properties/status/properties/conditions/x-kubernetes-list-type")
        .is_some_and(|v| v == "map"));
}

#[test]
fn nodeclaim_schema_is_immutable_and_allows_the_nodepool_key() {
    let crd = NodeClaim::crd_checked();
    let s = schema(&crd);
    assert!(rules(at(&s, "spec")).iter().any(|r| r == "self == oldSelf"));
    assert_eq!(at(&s, "spec.expireAfter")["default"], "720h");
    let list_rules = rules(at(&s, "spec.requirements"));
    assert!(
        !list_rules
            .iter()
            .any(|r| r.contains("karpenter.sh/nodepool")),
        "{list_rules:?}"
    );
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .expect("printer columns");
    assert!(columns
        .iter()
        .any(|c| c.name == "Node" && c.json_path == ".status.nodeName"));
}

#[test]
fn ec2nodeclass_schema_carries_defaults_and_rules() {
    let crd = EC2NodeClass::crd_checked();
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["ec2nc".to_string(), "ec2ncs".to_string()][..])
    );
    let s = schema(&crd);
    let defaults = &at(&s, "spec.metadataOptions")["default"];
    assert_eq!(defaults["httpEndpoint"], "enabled");
    assert_eq!(defaults["httpProtocolIPv6"], "disabled");
    assert_eq!(defaults["httpPutResponseHopLimit"].as_f64(), Some(1.0));
    assert_eq!(defaults["httpTokens"], "required");
    let spec_rules = rules(at(&s, "spec"));
    assert!(
        spec_rules
            .iter()
            .any(|r| r == "has(self.role) != has(self.instanceProfile)"),
        "{spec_rules:?}"
    );
    assert!(rules(at(&s, "spec.amiSelectorTerms"))
        .iter()
        .any(|r| r.contains("self.size() == 1")));
    assert!(rules(at(&s, "spec.subnetSelectorTerms"))
        .iter()
        .any(|r| r.contains("has(t.tags) || has(t.id)")));
    assert!(rules(at(&s, "spec.securityGroupSelectorTerms"))
        .iter()
        .any(|r| r.contains("has(t.name)")));
    assert_eq!(
        at(&s, "spec.amiSelectorTerms")["minItems"].as_f64(),
        Some(1.0)
    );
    assert!(rules(at(&s, "spec.kubelet"))
        .iter()
        .any(|r| r.contains("imageGCHighThresholdPercent >")));
    assert!(rules(at(&s, "spec.amiSelectorTerms.alias"))
        .iter()
        .any(|r| r.contains("latest")));
}

/// `crd()` plus the structural checks the API server applies that are cheap to repeat here.
trait CrdChecked {
    fn crd_checked(
    ) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
}

impl<T: kube::CustomResourceExt> CrdChecked for T {
    fn crd_checked(
    ) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
    {
        let crd = T::crd();
        let s = schema(&crd);
        assert_no_unstructural_keywords(&s, "");
        crd
    }
}

/// Structural schemas (what `apiextensions.k8s.io/v1` requires) have no `$ref`, no `anyOf`/`oneOf`
/// carrying types, and a `type` on every node except int-or-string ones.
fn assert_no_unstructural_keywords(node: &Value, path: &str) {
    let Some(obj) = node.as_object() else { return };
    assert!(!obj.contains_key("$ref"), "$ref at {path}");
    let int_or_string = obj
        .get("x-kubernetes-int-or-string")
        .is_some_and(|v| v == true);
    let preserve = obj
        .get("x-kubernetes-preserve-unknown-fields")
        .is_some_and(|v| v == true);
    assert!(
        obj.contains_key("type") || int_or_string || preserve,
        "no type at {path}"
    );
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            assert_no_unstructural_keywords(v, &format!("{path}.{k}"));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = obj.get(key) {
            assert_no_unstructural_keywords(v, &format!("{path}[{key}]"));
        }
    }
}
