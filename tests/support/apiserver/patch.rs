//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), a strategic merge patch
//! subset, and a server-side-apply simplification. Each produces a full object that then goes
//! through the ordinary update path (resourceVersion check, status rules, finalizer rules).

use serde_json::{Map, Value};

use super::resources::ResourceInfo;
use super::status::{ApiError, ApiResult};
use super::store::{State, Target};

/// The four patch types the real server accepts, by Content-Type.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    /// Server-side apply; `force` and `field_manager` are accepted and not acted on (no managed
    /// fields, so no conflicts).
    Apply {
        field_manager: String,
        force: bool,
    },
}

impl PatchKind {
    /// From the request's Content-Type (parameters such as `; charset=utf-8` ignored).
    pub fn from_content_type(ct: &str, field_manager: Option<String>, force: bool) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply {
                field_manager: field_manager.unwrap_or_default(),
                force,
            }),
            _ => None,
        }
    }
}

/// Parses a patch body (YAML for apply, JSON otherwise).
pub fn parse_body(kind: &PatchKind, body: &[u8]) -> ApiResult<Value> {
    let parsed = match kind {
        PatchKind::Apply { .. } => {
            serde_yaml_ng::from_slice::<Value>(body).map_err(|e| e.to_string())
        }
        _ => serde_json::from_slice::<Value>(body).map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Applies a patch to `doc`. `field_manager` is required for apply, as on the real server.
pub fn apply(kind: &PatchKind, doc: &Value, patch: &Value) -> ApiResult<Value> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Merge => json_patch::merge(&mut out, patch),
        PatchKind::Json => json_patch_ops(&mut out, patch)?,
        PatchKind::Strategic => strategic_merge(&mut out, patch, ""),
        PatchKind::Apply { .. } => {
            require_manager(kind)?;
            json_patch::merge(&mut out, patch);
        }
    }
    Ok(out)
}

fn require_manager(kind: &PatchKind) -> ApiResult<()> {
    match kind {
        PatchKind::Apply { field_manager, .. } if field_manager.is_empty() => Err(
            ApiError::invalid_options("fieldManager: Required value: is required for apply patch"),
        ),
        _ => Ok(()),
    }
}

/// RFC 6902, with one quirk of the real server's implementation kept: a `test` of a missing path
/// against `null` passes (kube-runtime's finalizer helper relies on it when adding the first
/// finalizer). The document is a copy, so a failing operation discards the whole patch.
fn json_patch_ops(doc: &mut Value, patch: &Value) -> ApiResult<()> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })?;
    for op in ops.0 {
        if let json_patch::PatchOperation::Test(t) = &op {
            if t.value.is_null() && doc.pointer(t.path.as_str()).is_none() {
                continue;
            }
        }
        json_patch::patch(doc, std::slice::from_ref(&op)).map_err(|e| {
            ApiError::new(
                422,
                "Invalid",
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        })?;
    }
    Ok(())
}

/// Strategic merge patch, approximated without the OpenAPI patch metadata: maps merge
/// recursively; `null` deletes; lists of objects that all carry a `name` (containers, volumes,
/// env) or `type` (conditions) key merge element-wise by that key; `metadata.finalizers` merges
/// as a set; every other list is replaced. `$patch` directives are not supported.
pub fn strategic_merge(doc: &mut Value, patch: &Value, path: &str) {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let d = doc.as_object_mut().expect("object");
    for (k, pv) in p {
        let child = format!("{path}/{k}");
        if pv.is_null() {
            d.remove(k);
            continue;
        }
        let slot = d.entry(k.clone()).or_insert(Value::Null);
        match (slot.as_array().cloned(), pv.as_array()) {
            (Some(old), Some(new)) => *slot = merge_list(&old, new, &child),
            _ if pv.is_object() => strategic_merge(slot, pv, &child),
            _ => *slot = pv.clone(),
        }
    }
}

fn merge_list(old: &[Value], new: &[Value], path: &str) -> Value {
    if path == "/metadata/finalizers" {
        let mut out = old.to_vec();
        out.extend(new.iter().filter(|v| !old.contains(v)).cloned());
        return Value::Array(out);
    }
    let Some(key) = ["name", "type"]
        .into_iter()
        .find(|k| keyed(old, k) && keyed(new, k))
    else {
        return Value::Array(new.to_vec());
    };
    let mut out = old.to_vec();
    for item in new {
        match out.iter_mut().find(|o| o[key] == item[key]) {
            Some(existing) => strategic_merge(existing, item, path),
            None => out.push(item.clone()),
        }
    }
    Value::Array(out)
}

fn keyed(list: &[Value], key: &str) -> bool {
    !list.is_empty() && list.iter().all(|v| v.get(key).is_some())
}

/// Patches a stored object (or, for apply on the main resource, creates it when absent).
/// Returns the result and whether it was created.
pub fn patch_object(
    state: &mut State,
    res: &'static ResourceInfo,
    ns: &str,
    name: &str,
    kind: &PatchKind,
    patch: &Value,
    target: Target,
) -> ApiResult<(Value, bool)> {
    let current = match state.get(res, ns, name) {
        Ok(obj) => obj,
        Err(e)
            if matches!(kind, PatchKind::Apply { .. })
                && target == Target::Main
                && e.code == 404 =>
        {
            require_manager(kind)?;
            let mut obj = patch.clone();
            if obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                obj["metadata"]["name"] = Value::from(name);
            }
            return state.create(res, ns, obj).map(|o| (o, true));
        }
        Err(e) => return Err(e),
    };
    let patched = apply(kind, &current, patch)?;
    state
        .update(res, ns, name, patched, target)
        .map(|o| (o, false))
}
