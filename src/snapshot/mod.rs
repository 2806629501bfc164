//! Reads cluster snapshots into domain types. A snapshot is what `kubectl get ... -o yaml` prints:
//! a multi-document YAML stream, a `kind: List` (or any `*List` with `items`), or both mixed. Data
//! flows text → one `serde_yaml_ng::Value` per document → dispatch on (apiVersion, kind) → a typed
//! API object (k8s-openapi for core kinds, the structs of `karpenter.rs` for Karpenter's CRDs),
//! deserialized with `serde_path_to_error` so failures name the field → a conversion to domain
//! types (`pod.rs`, `node.rs`, `nodepool.rs`, `karpenter.rs`, `policy.rs`) that validates what the
//! API server would and names the field path of anything it rejects. Kinds joiner does not use are
//! skipped with a warning; a second object of the same kind and name is an error; nothing is
//! guessed silently. The controller's caches hold typed objects already and convert each one as it
//! changes ([`live`]), through the same conversions. See docs/snapshot.md.

mod convert;
mod karpenter;
pub mod live;
mod node;
mod nodepool;
mod pod;
mod policy;
mod scheduling;
mod storage;
mod wide;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::domain::weights::CONFIGMAP_NAME;
use crate::domain::ClusterSnapshot;

use convert::{typed, FieldResult};

/// Label key of the requirement joiner uses for selectors that match nothing (an absent
/// labelSelector, an empty node selector term). No object carries it.
pub const NEVER_MATCH_KEY: &str = "joiner.internal/never";

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The OS error is part of the message and deliberately not a `source`: `main` prints the
    /// source chain too (`{e:#}`), which would repeat it.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The text is not YAML; `message` carries serde_yaml_ng's line and column.
    #[error("{origin}: document {document}: malformed yaml: {message}")]
    Yaml {
        origin: String,
        document: usize,
        message: String,
    },
    /// A document that is YAML but not a Kubernetes object (no apiVersion/kind, not a mapping).
    #[error("{origin}: document {document}: {message}")]
    Document {
        origin: String,
        document: usize,
        message: String,
    },
    /// An object joiner reads but cannot accept: `Pod default/web-1: spec.containers[0]...: ...`.
    #[error("{kind} {object}: {path}: {message}")]
    Object {
        kind: String,
        object: String,
        path: String,
        message: String,
    },
}

/// Reads a snapshot file.
pub fn load_snapshot(path: &Path) -> Result<ClusterSnapshot, SnapshotError> {
    let text = std::fs::read_to_string(path).map_err(|error| SnapshotError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse_snapshot(&text, &path.display().to_string())
}

/// Reads a snapshot from YAML text; `origin` names the source in error messages.
pub fn parse_snapshot(text: &str, origin: &str) -> Result<ClusterSnapshot, SnapshotError> {
    let mut reader = Reader::new(origin);
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        reader.document = i + 1;
        let document = reader.document;
        let value = Value::deserialize(doc).map_err(|e| {
            wide::locate(text, document, &e).unwrap_or_else(|| SnapshotError::Yaml {
                origin: origin.to_string(),
                document,
                message: e.to_string(),
            })
        })?;
        reader.read_value(value, "")?;
    }
    reader.snapshot.resolve_volumes();
    Ok(reader.snapshot)
}

/// Builds a snapshot from live objects (the controller's caches), each a YAML value with apiVersion
/// and kind. An object that cannot be read is left out and its error returned beside the snapshot:
/// one bad object never stops decisions about the rest.
pub fn from_values(
    values: impl IntoIterator<Item = Value>,
    origin: &str,
) -> (ClusterSnapshot, Vec<SnapshotError>) {
    let mut reader = Reader::new(origin);
    let mut errors = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        reader.document = i + 1;
        if let Err(e) = reader.read_value(value, "") {
            errors.push(e);
        }
    }
    reader.snapshot.resolve_volumes();
    (reader.snapshot, errors)
}

struct Reader<'a> {
    origin: &'a str,
    /// 1-based index of the document being read.
    document: usize,
    snapshot: ClusterSnapshot,
    /// The object the cost weights came from, to warn when a second one replaces them.
    weights_from: Option<String>,
    /// `Kind namespace/name` of every object read, with its document: a cluster holds one object
    /// per kind and name, so a second one means a hand-edited or merged dump, and neither copy can
    /// be preferred silently.
    read: HashMap<String, usize>,
}

/// The kinds joiner reads, for telling an unsupported version from an unused kind.
const KNOWN_KINDS: [(&str, &str); 12] = [
    ("v1", "Pod"),
    ("v1", "Node"),
    ("v1", "ConfigMap"),
    ("apps/v1", "DaemonSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.sh/v1", "NodeClaim"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    ("v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSINode"),
];

impl<'a> Reader<'a> {
    fn new(origin: &'a str) -> Self {
        Reader {
            origin,
            document: 0,
            snapshot: ClusterSnapshot::default(),
            weights_from: None,
            read: HashMap::new(),
        }
    }

    /// `at` locates the value inside its document (`items[3]`) for document-level errors.
    fn read_value(&mut self, value: Value, at: &str) -> Result<(), SnapshotError> {
        match value {
            // Empty documents (`---` twice, a trailing separator) carry nothing.
            Value::Null => Ok(()),
            Value::Mapping(_) => self.read_object(value, at),
            _ => Err(self.document_error(
                at,
                "not a kubernetes object (expected a mapping with apiVersion and kind)",
            )),
        }
    }

    fn read_object(&mut self, value: Value, at: &str) -> Result<(), SnapshotError> {
        let api_version = str_at(&value, &["apiVersion"])
            .unwrap_or_default()
            .to_string();
        let kind = str_at(&value, &["kind"]).unwrap_or_default().to_string();
        if api_version.is_empty() || kind.is_empty() {
            return Err(self.document_error(at, "object without apiVersion and kind"));
        }
        if kind.ends_with("List") && value.get("items").is_some() {
            return self.read_list(value, at);
        }
        let object = object_label(&value, &kind);
        // ConfigMaps are left out: only the cost weights are read, and a second one already warns.
        let tracked =
            kind != "ConfigMap" && KNOWN_KINDS.contains(&(api_version.as_str(), kind.as_str()));
        let key = tracked.then(|| format!("{kind} {object}"));
        if let Some(first) = key.as_ref().and_then(|k| self.read.get(k)) {
            let message = format!("duplicate object, first read from document {first}");
            return Err(SnapshotError::Object {
                kind,
                object,
                path: "metadata.name".into(),
                message,
            });
        }
        let result = match (api_version.as_str(), kind.as_str()) {
            ("v1", "Pod") => typed(value)
                .and_then(pod::convert_pod)
                .map(|p| self.snapshot.pods.push(std::sync::Arc::new(p))),
            ("v1", "Node") => typed(value)
                .and_then(node::convert_node)
                .map(|n| self.snapshot.nodes.push(n.into())),
            ("apps/v1", "DaemonSet") => typed(value)
                .and_then(pod::convert_daemonset)
                .map(|d| self.snapshot.daemonsets.push(d)),
            ("policy/v1", "PodDisruptionBudget") => typed(value)
                .and_then(policy::convert_pdb)
                .map(|p| self.snapshot.pdbs.push(p)),
            ("karpenter.sh/v1", "NodePool") => typed(value)
                .and_then(nodepool::convert_nodepool)
                .map(|p| self.snapshot.nodepools.push(p)),
            ("karpenter.sh/v1", "NodeClaim") => typed(value)
                .and_then(karpenter::convert_node_claim)
                .map(|c| self.snapshot.node_claims.push(c)),
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => typed(value)
                .and_then(karpenter::convert_node_class)
                .map(|c| self.snapshot.node_classes.push(c)),
            ("v1", "PersistentVolume") => typed(value)
                .and_then(storage::convert_volume)
                .map(|v| self.snapshot.storage.add_volume(v)),
            ("v1", "PersistentVolumeClaim") => typed(value)
                .and_then(storage::convert_claim)
                .map(|c| self.snapshot.storage.add_claim(c)),
            ("storage.k8s.io/v1", "StorageClass") => typed(value)
                .and_then(storage::convert_storage_class)
                .map(|c| self.snapshot.storage.add_class(c)),
            ("storage.k8s.io/v1", "CSINode") => typed(value)
                .and_then(storage::convert_csi_node)
                .map(|(node, limits)| self.snapshot.storage.add_attach_limits(node, limits)),
            ("v1", "ConfigMap") => self.read_config_map(value, &object),
            _ => {
                self.skip(&api_version, &kind, &object);
                Ok(())
            }
        };
        // recorded only once read: in `from_values` an object that failed leaves room for its twin
        if let (Some(key), true) = (key, result.is_ok()) {
            self.read.insert(key, self.document);
        }
        result.map_err(|e| SnapshotError::Object {
            kind,
            object,
            path: e.path,
            message: e.message,
        })
    }

    /// A `kind: List` or `PodList` and the like: its items are read as if they were documents.
    fn read_list(&mut self, value: Value, at: &str) -> Result<(), SnapshotError> {
        let items = match value {
            Value::Mapping(mut m) => m.remove("items"),
            _ => None,
        };
        let items = match items {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Sequence(items)) => items,
            Some(_) => return Err(self.document_error(at, "list whose items is not a sequence")),
        };
        for (i, item) in items.into_iter().enumerate() {
            self.read_value(item, &format!("{at}items[{i}]: "))?;
        }
        Ok(())
    }

    /// Only the cost-weight ConfigMap matters; other ConfigMaps are common in `-A` dumps and
    /// skipped quietly.
    fn read_config_map(&mut self, value: Value, object: &str) -> FieldResult<()> {
        if str_at(&value, &["metadata", "name"]) != Some(CONFIGMAP_NAME) {
            return Ok(());
        }
        let weights = typed(value).and_then(policy::convert_weights)?;
        if let Some(previous) = self.weights_from.replace(object.to_string()) {
            self.warn(format!(
                "ConfigMap {object} replaces the cost weights read from ConfigMap {previous}"
            ));
        }
        self.snapshot.weights = weights;
        Ok(())
    }

    fn skip(&mut self, api_version: &str, kind: &str, object: &str) {
        let reason = match KNOWN_KINDS.iter().find(|(_, k)| *k == kind) {
            Some((expected, _)) => {
                format!("apiVersion not supported (joiner reads {expected} {kind})")
            }
            None => "kind not used".to_string(),
        };
        self.warn(format!("skipped {api_version} {kind} {object}: {reason}"));
    }

    fn warn(&mut self, message: String) {
        tracing::warn!(origin = self.origin, document = self.document, "{message}");
        self.snapshot.warnings.push(message);
    }

    fn document_error(&self, at: &str, message: &str) -> SnapshotError {
        SnapshotError::Document {
            origin: self.origin.to_string(),
            document: self.document,
            message: format!("{at}{message}"),
        }
    }
}

/// A string at a path of mapping keys.
fn str_at<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v str> {
    keys.iter().try_fold(value, |v, k| v.get(*k))?.as_str()
}

/// `namespace/name` (namespaced kinds default to `default`), or `name` for cluster-scoped kinds.
fn object_label(value: &Value, kind: &str) -> String {
    label_of(
        str_at(value, &["metadata", "name"]),
        str_at(value, &["metadata", "namespace"]),
        kind,
    )
}

/// `namespace/name` (namespaced kinds default to `default`), or `name` for cluster-scoped kinds:
/// how errors name an object, whether it came from a dump or a watch.
fn label_of(name: Option<&str>, namespace: Option<&str>, kind: &str) -> String {
    let name = name.unwrap_or("<unnamed>");
    let namespaced = matches!(
        kind,
        "Pod" | "DaemonSet" | "PodDisruptionBudget" | "ConfigMap" | "PersistentVolumeClaim"
    );
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None if namespaced => format!("default/{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests;
