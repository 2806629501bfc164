//! Conversions shared by every kind: field-path errors, quantities, label selectors, requirements,
//! taints, and the small string formats (durations, percentages) Karpenter validates with CEL.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

use crate::domain::{
    LabelSelector, Labels, Operator, Quantity, QuantityError, Requirement, RequirementError,
    Resources, Taint, TaintEffect,
};

use super::NEVER_MATCH_KEY;

/// A problem inside one object: where (a field path such as `spec.containers[0].resources`) and
/// what. The dispatcher adds the object's kind and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub path: String,
    pub message: String,
}

pub(crate) type FieldResult<T> = Result<T, FieldError>;

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        FieldError {
            path: path.into(),
            message: message.to_string(),
        }
    }
}

/// Deserializes an API object, naming the failing field path in the error.
pub(crate) fn typed<T: DeserializeOwned>(value: Value) -> FieldResult<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        // An error on the object itself has the path ".", which reads badly in a message.
        let path = if path == "." || path.is_empty() {
            "(object)".to_string()
        } else {
            path
        };
        FieldError::new(path, e.into_inner())
    })
}

/// Parses one quantity; negative amounts are errors because no request, capacity or limit may be.
pub(crate) fn quantity(text: &str, path: &str) -> FieldResult<Quantity> {
    let q = Quantity::parse(text).map_err(|e| match e {
        // `Quantity::parse` blames the suffix when there is no number at all ("abc"); that is a
        // malformed quantity, not a misspelt unit.
        QuantityError::Suffix(s) if !s.chars().any(|c| c.is_ascii_digit()) => {
            FieldError::new(path, QuantityError::Malformed(s))
        }
        e => FieldError::new(path, e),
    })?;
    if q.is_negative() {
        return Err(FieldError::new(path, format!("negative quantity {text:?}")));
    }
    Ok(q)
}

/// Reads a resource list (`cpu: 100m`, `memory: 1Gi`, ...) whose entries are at `{path}.{name}`.
pub(crate) fn resources<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    path: &str,
) -> FieldResult<Resources> {
    let mut out = Resources::new();
    for (name, text) in entries {
        out.set(name, quantity(text, &format!("{path}.{name}"))?);
    }
    Ok(out)
}

/// A k8s-openapi resource list (absent is empty).
pub(crate) fn api_resources(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    path: &str,
) -> FieldResult<Resources> {
    let Some(list) = list else {
        return Ok(Resources::new());
    };
    resources(list.iter().map(|(k, q)| (k.as_str(), q.0.as_str())), path)
}

/// The field of a requirement a validation error is about, so messages point at it.
fn requirement_field(e: &RequirementError) -> &'static str {
    match e {
        RequirementError::UnknownOperator(_) => "operator",
        RequirementError::NoValues(_) | RequirementError::NotAnInteger(..) => "values",
        RequirementError::MinValues(..) => "minValues",
    }
}

/// Builds a node requirement (key normalized), with errors at `{path}.operator` and so on.
pub(crate) fn requirement(
    key: &str,
    op: &str,
    values: Vec<String>,
    min_values: Option<u32>,
    path: &str,
) -> FieldResult<Requirement> {
    Requirement::new(key, op, values, min_values)
        .map_err(|e| FieldError::new(format!("{path}.{}", requirement_field(&e)), e))
}

/// A requirement over pod labels: validated like node requirements but the key is kept as written,
/// since deprecated-key normalization only applies to node labels.
pub(crate) fn label_requirement(
    key: &str,
    op: &str,
    values: Vec<String>,
    path: &str,
) -> FieldResult<Requirement> {
    let mut r = requirement(key, op, values, None, path)?;
    r.key = key.to_string();
    Ok(r)
}

/// A selector that matches no object, for the API's "absent selector selects nothing" rule.
pub(crate) fn never_selector() -> LabelSelector {
    LabelSelector {
        match_labels: Labels::new(),
        match_expressions: vec![never_requirement()],
    }
}

/// A requirement no label set satisfies (the key is reserved by joiner and never set on objects).
pub(crate) fn never_requirement() -> Requirement {
    Requirement {
        key: NEVER_MATCH_KEY.to_string(),
        operator: Operator::Exists,
        values: Vec::new(),
        min_values: None,
    }
}

/// Converts an API label selector; `None` (absent) becomes [`never_selector`].
pub(crate) fn label_selector(
    selector: Option<&meta::LabelSelector>,
    path: &str,
) -> FieldResult<LabelSelector> {
    let Some(selector) = selector else {
        return Ok(never_selector());
    };
    let mut out = LabelSelector {
        match_labels: selector.match_labels.clone().unwrap_or_default(),
        match_expressions: Vec::new(),
    };
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let values = e.values.clone().unwrap_or_default();
        out.match_expressions.push(label_requirement(
            &e.key,
            &e.operator,
            values,
            &format!("{path}.matchExpressions[{i}]"),
        )?);
    }
    Ok(out)
}

/// Adds `key In [value]` to a selector, as a label when that does not overwrite a different one.
pub(crate) fn require_label(selector: &mut LabelSelector, key: &str, value: &str) {
    match selector.match_labels.get(key) {
        None => {
            selector
                .match_labels
                .insert(key.to_string(), value.to_string());
        }
        Some(v) if v == value => {}
        // Both conditions must hold, so keep the existing label and add the new one as an
        // expression.
        Some(_) => selector
            .match_expressions
            .push(Requirement::in_values(key, &[value])),
    }
}

/// Converts a taint, rejecting effects Kubernetes does not define.
pub(crate) fn taint(
    key: &str,
    value: Option<&str>,
    effect: &str,
    path: &str,
) -> FieldResult<Taint> {
    let effect = TaintEffect::parse(effect).ok_or_else(|| {
        FieldError::new(
            format!("{path}.effect"),
            format!("unknown taint effect {effect:?}"),
        )
    })?;
    Ok(Taint {
        key: key.to_string(),
        value: value.unwrap_or_default().to_string(),
        effect,
    })
}

/// Karpenter's duration format (`30s`, `1h30m`, `720h`) or `Never`.
pub(crate) fn is_karpenter_duration(s: &str) -> bool {
    if s == "Never" {
        return true;
    }
    let mut digits = 0usize;
    let mut units = 0usize;
    for c in s.chars() {
        match c {
            '0'..='9' => digits += 1,
            's' | 'm' | 'h' if digits > 0 => {
                digits = 0;
                units += 1;
            }
            _ => return false,
        }
    }
    digits == 0 && units > 0
}

/// A percentage such as `10%` or `7.5%` no larger than 100%.
pub(crate) fn is_percentage(s: &str) -> bool {
    let Some(number) = s.strip_suffix('%') else {
        return false;
    };
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let digits = |p: &str| p.chars().all(|c| c.is_ascii_digit());
    if int_part.is_empty()
        || !digits(int_part)
        || !digits(frac_part)
        || (number.contains('.') && frac_part.is_empty())
    {
        return false;
    }
    number.parse::<f64>().is_ok_and(|v| v <= 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_karpenter_pattern() {
        for ok in ["30s", "1h30m", "720h", "Never", "0s"] {
            assert!(is_karpenter_duration(ok), "{ok}");
        }
        for bad in ["", "h", "30", "1d", "never", "-1s", "1.5h"] {
            assert!(!is_karpenter_duration(bad), "{bad}");
        }
    }

    #[test]
    fn percentages_are_bounded() {
        for ok in ["0%", "10%", "7.5%", "100%"] {
            assert!(is_percentage(ok), "{ok}");
        }
        for bad in ["%", "10", "101%", "1.%", ".5%", "-1%", "a%"] {
            assert!(!is_percentage(bad), "{bad}");
        }
    }

    #[test]
    fn requirement_errors_name_the_field() {
        let e = requirement("k", "Near", vec![], None, "spec.requirements[2]").unwrap_err();
        assert_eq!(e.path, "spec.requirements[2].operator");
        assert_eq!(e.message, "unknown operator \"Near\"");
        let e = requirement("k", "In", vec![], None, "r").unwrap_err();
        assert_eq!(e.path, "r.values");
    }

    #[test]
    fn negative_and_malformed_quantities_fail_with_path() {
        assert_eq!(
            quantity("-1", "x.cpu").unwrap_err().message,
            "negative quantity \"-1\""
        );
        let e = resources([("cpu", "abc")], "spec.requests").unwrap_err();
        assert_eq!(e.path, "spec.requests.cpu");
    }

    #[test]
    fn label_requirements_keep_deprecated_keys() {
        let r = label_requirement("beta.kubernetes.io/arch", "Exists", vec![], "p").unwrap();
        assert_eq!(r.key, "beta.kubernetes.io/arch");
    }

    #[test]
    fn absent_selector_matches_nothing() {
        let s = label_selector(None, "p").unwrap();
        assert!(!s.matches(&Labels::new()));
        let empty = label_selector(Some(&meta::LabelSelector::default()), "p").unwrap();
        assert!(empty.matches(&Labels::new()));
    }

    #[test]
    fn conflicting_label_requirement_becomes_expression() {
        let mut s = LabelSelector::default();
        require_label(&mut s, "app", "a");
        require_label(&mut s, "app", "b");
        assert_eq!(s.match_expressions.len(), 1);
        let labels: Labels = [("app".to_string(), "a".to_string())].into();
        assert!(!s.matches(&labels));
    }
}
