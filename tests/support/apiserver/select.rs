//! Label selectors (the string syntax of `labelSelector` and the `LabelSelector` object of PDBs)
//! and field selectors, with the per-kind field support of the real server.

use std::collections::BTreeSet;

use serde_json::Value;

use super::resources::ResourceInfo;
use super::status::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`: every requirement must hold (an empty selector matches everything).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            if !term.is_empty() {
                reqs.push(parse_term(term)?);
            }
        }
        Ok(Self(reqs))
    }

    /// From a `metav1.LabelSelector` object (matchLabels and matchExpressions). `None` for a null
    /// selector, which selects nothing.
    pub fn from_object(sel: &Value) -> ApiResult<Option<Self>> {
        if sel.is_null() {
            return Ok(None);
        }
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(LabelReq::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            reqs.push(expression(e)?);
        }
        Ok(Some(Self(reqs)))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.0.iter().all(|r| requirement_holds(r, labels))
    }
}

fn expression(e: &Value) -> ApiResult<LabelReq> {
    let key = e["key"].as_str().unwrap_or_default().to_string();
    let values: BTreeSet<String> = e["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    match e["operator"].as_str().unwrap_or_default() {
        "In" => Ok(LabelReq::In(key, values)),
        "NotIn" => Ok(LabelReq::NotIn(key, values)),
        "Exists" => Ok(LabelReq::Exists(key)),
        "DoesNotExist" => Ok(LabelReq::NotExists(key)),
        op => Err(ApiError::bad_request(format!(
            "{op:?} is not a valid label selector operator"
        ))),
    }
}

fn requirement_holds(r: &LabelReq, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    match r {
        LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
        LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
        LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
        LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
        LabelReq::Exists(k) => get(k).is_some(),
        LabelReq::NotExists(k) => get(k).is_none(),
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b` is two terms).
fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_term(t: &str) -> ApiResult<LabelReq> {
    let bad = || ApiError::bad_request(format!("unable to parse requirement: {t:?}"));
    if let Some(k) = t.strip_prefix('!') {
        return Ok(LabelReq::NotExists(valid_key(k.trim()).ok_or_else(bad)?));
    }
    for (op, set_op) in [(" notin ", true), (" in ", false)] {
        if let Some((k, rest)) = t.split_once(op) {
            let key = valid_key(k.trim()).ok_or_else(bad)?;
            let set = parse_set(rest.trim()).ok_or_else(bad)?;
            return Ok(if set_op {
                LabelReq::NotIn(key, set)
            } else {
                LabelReq::In(key, set)
            });
        }
    }
    for op in ["!=", "==", "="] {
        if let Some((k, v)) = t.split_once(op) {
            let key = valid_key(k.trim()).ok_or_else(bad)?;
            let val = v.trim().to_string();
            return Ok(if op == "!=" {
                LabelReq::NotEq(key, val)
            } else {
                LabelReq::Eq(key, val)
            });
        }
    }
    Ok(LabelReq::Exists(valid_key(t).ok_or_else(bad)?))
}

fn valid_key(k: &str) -> Option<String> {
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    ok.then(|| k.to_string())
}

fn parse_set(s: &str) -> Option<BTreeSet<String>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

/// A parsed `fieldSelector`: `field=value`, `field==value` or `field!=value` terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses and checks every field against what the real server supports for the kind
    /// (an unsupported field is a 400, as there).
    pub fn parse(s: &str, res: &ResourceInfo) -> ApiResult<Self> {
        let mut terms = Vec::new();
        for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, eq, value) = split_field_term(t)?;
            if !supported_fields(res).contains(&field.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field, eq, value));
        }
        Ok(Self(terms))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(f, eq, v)| (field_value(obj, f) == *v) == *eq)
    }
}

fn split_field_term(t: &str) -> ApiResult<(String, bool, String)> {
    for (op, eq) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((f, v)) = t.split_once(op) {
            return Ok((f.trim().to_string(), eq, v.trim().to_string()));
        }
    }
    Err(ApiError::bad_request(format!(
        "invalid selector: '{t}'; can't understand '{t}'"
    )))
}

/// The fields each kind can be selected by (the real server's field label conversion funcs).
fn supported_fields(res: &ResourceInfo) -> Vec<&'static str> {
    let mut f = vec!["metadata.name", "metadata.namespace"];
    match (res.group, res.plural) {
        ("", "pods") => f.extend([
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        ("", "nodes") => f.push("spec.unschedulable"),
        ("", "events") => f.extend([
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]),
        _ => {}
    }
    f
}

/// The string form of a field as the server compares it (missing is "", booleans default false).
fn field_value(obj: &Value, field: &str) -> String {
    let v = match field {
        "source" => &obj["source"]["component"],
        _ => field.split('.').fold(obj, |v, k| &v[k]),
    };
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Null if matches!(field, "spec.unschedulable" | "spec.hostNetwork") => "false".into(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
