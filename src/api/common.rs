//! Pieces shared by the three custom resources: scheduling requirements with `minValues`, the
//! reference from a NodePool or NodeClaim to its node class, Karpenter's duration strings, and the
//! status conditions helper that every kind uses.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::KubeSchema;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize};

/// Durations as Karpenter writes them in `expireAfter` and `consolidateAfter`: one or more
/// `<digits><s|m|h>` groups, or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// `terminationGracePeriod`: like [`NILLABLE_DURATION_PATTERN`] but `Never` is not allowed.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";
/// The value of a duration field that disables the behaviour it times.
pub const NEVER: &str = "Never";

// Label keys and values follow the Kubernetes qualified-name grammar: an optional DNS-subdomain
// prefix and a name of at most 63 characters.
const LABEL_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// The operators a requirement may use, including Karpenter's integer comparisons `Gte`/`Lte`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RequirementOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl RequirementOperator {
    /// The operator's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            RequirementOperator::In => "In",
            RequirementOperator::NotIn => "NotIn",
            RequirementOperator::Exists => "Exists",
            RequirementOperator::DoesNotExist => "DoesNotExist",
            RequirementOperator::Gt => "Gt",
            RequirementOperator::Lt => "Lt",
            RequirementOperator::Gte => "Gte",
            RequirementOperator::Lte => "Lte",
        }
    }
}

/// A node selector requirement that may also ask for a minimum number of distinct values
/// (`minValues`), e.g. "keep at least 5 instance types in the candidate list".
///
/// The key rules sit here because both NodePools and NodeClaims restrict them; the
/// `karpenter.sh/nodepool` key is only forbidden on NodePools (NodeClaims carry it), so that rule
/// is on the NodePool's list.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key the requirement constrains.
    #[schemars(length(max = 316), regex(pattern = LABEL_KEY_PATTERN))]
    #[x_kube(
        validation = Rule::new(r#"self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#).message(r#"keys in the "karpenter.sh" domain are reserved"#),
        validation = Rule::new(r#"self != "kubernetes.io/hostname""#).message(r#"the "kubernetes.io/hostname" key is reserved"#)
    )]
    pub key: String,
    /// How the key's value relates to `values`.
    pub operator: RequirementOperator,
    /// The values the operator compares against; `In`/`NotIn` take a set, `Gt`/`Lt`/`Gte`/`Lte`
    /// exactly one integer, `Exists`/`DoesNotExist` none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63), regex(pattern = LABEL_VALUE_PATTERN)))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub values: Vec<String>,
    /// The least number of distinct values the scheduler must keep available for this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i32>,
}

impl NodeSelectorRequirementWithMinValues {
    /// A requirement without `minValues`.
    pub fn new(key: &str, operator: RequirementOperator, values: &[&str]) -> Self {
        NodeSelectorRequirementWithMinValues {
            key: key.to_string(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }
}

/// Points at the provider-specific node class, e.g. `{group: karpenter.k8s.aws, kind:
/// EC2NodeClass, name: default}`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NodeClassReference {
    /// API group of the node class, without a version.
    #[schemars(regex(pattern = r"^[^/]*$"))]
    #[x_kube(validation = Rule::new("self != ''").message("group must not be empty"))]
    pub group: String,
    /// Kind of the node class.
    #[x_kube(validation = Rule::new("self != ''").message("kind must not be empty"))]
    pub kind: String,
    /// Name of the node class object.
    #[x_kube(validation = Rule::new("self != ''").message("name must not be empty"))]
    pub name: String,
}

// Kubernetes resource quantities (`100m`, `2Gi`, `1e3`), as the API server's own schema checks
// them.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a resource-name to quantity map. k8s-openapi's `Quantity` schema carries a page of
/// description that would be repeated for every such map in the CRDs; this one is the same check
/// (an int or a quantity string) without it.
pub(crate) fn quantity_map_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "x-kubernetes-int-or-string": true,
            "pattern": QUANTITY_PATTERN,
        },
    })
}

/// The CEL rules Karpenter places on every requirements list (NodePool template and NodeClaim).
pub(crate) const REQUIREMENT_IN_NEEDS_VALUES: &str =
    "self.all(r, r.operator != 'In' || size(r.values) > 0)";
pub(crate) const REQUIREMENT_COMPARISON_ONE_INTEGER: &str =
    "self.all(r, !(r.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (size(r.values) == 1 && int(r.values[0]) >= 0))";
pub(crate) const REQUIREMENT_MIN_VALUES_FIT: &str =
    "self.all(r, !(r.operator == 'In' && has(r.minValues)) || size(r.values) >= r.minValues)";

/// Why a duration string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("duration {0:?} is empty")]
    Empty(String),
    #[error("duration {0:?} is not a sequence of <number><s|m|h>")]
    Malformed(String),
    #[error("duration {0:?} is too long")]
    Overflow(String),
}

/// Reads a duration such as `720h`, `1h30m` or `0s`; `m` and `h` may be combined with `s` the way
/// Go prints durations (`8h0m0s`).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty(text.to_string()));
    }
    let mut seconds: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(DurationError::Malformed(text.to_string())),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| DurationError::Malformed(text.to_string()))?;
        let add = n
            .checked_mul(unit)
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
        seconds = seconds
            .checked_add(add)
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(DurationError::Malformed(text.to_string()));
    }
    Ok(Duration::from_secs(seconds))
}

/// Reads a duration that may be `Never` (returned as `None`).
pub fn parse_nillable_duration(text: &str) -> Result<Option<Duration>, DurationError> {
    if text == NEVER {
        return Ok(None);
    }
    parse_duration(text).map(Some)
}

/// Implements [`HasConditions`] for a kind whose optional status struct holds `conditions`.
macro_rules! has_conditions {
    ($kind:ty, $status:ty) => {
        impl $crate::api::common::HasConditions for $kind {
            fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
                self.status
                    .as_ref()
                    .map_or(&[], |s| s.conditions.as_slice())
            }

            fn conditions_mut(
                &mut self,
            ) -> &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
                &mut self
                    .status
                    .get_or_insert_with(<$status>::default)
                    .conditions
            }
        }
    };
}
pub(crate) use has_conditions;

/// Access to a resource's `status.conditions`, with helpers shared by every kind.
pub trait HasConditions {
    /// The conditions, empty when there is no status yet.
    fn conditions(&self) -> &[Condition];
    /// The conditions list, creating the status if needed.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;

    /// The condition of this type, if present.
    fn condition(&self, type_: &str) -> Option<&Condition> {
        find_condition(self.conditions(), type_)
    }

    /// Whether the condition of this type is present with status `True`.
    fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == STATUS_TRUE)
    }

    /// Sets a condition; see [`set_condition`]. Returns whether anything changed.
    fn set_condition(
        &mut self,
        type_: &str,
        status: bool,
        reason: &str,
        message: &str,
        now: Time,
    ) -> bool {
        set_condition(self.conditions_mut(), type_, status, reason, message, now)
    }
}

const STATUS_TRUE: &str = "True";
const STATUS_FALSE: &str = "False";

/// The condition of this type in a list, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Adds or updates the condition of type `type_`. `lastTransitionTime` moves to `now` only when the
/// status flips (or the condition is new), so watchers can tell how long a state has held; reason
/// and message are refreshed every time. Returns whether the list changed, so callers can skip a
/// status write when nothing did.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Time,
) -> bool {
    let status = if status { STATUS_TRUE } else { STATUS_FALSE };
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) else {
        conditions.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_transition_time: now,
            observed_generation: None,
        });
        return true;
    };
    let mut changed = false;
    if existing.status != status {
        existing.status = status.to_string();
        existing.last_transition_time = now;
        changed = true;
    }
    if existing.reason != reason || existing.message != message {
        existing.reason = reason.to_string();
        existing.message = message.to_string();
        changed = true;
    }
    changed
}

/// Conditions as stored by the API server always carry `lastTransitionTime`, but hand-written
/// manifests (the test fixtures, snapshots of older tools) often leave it and `reason` out. Reading
/// such a condition must not fail the whole object, so a missing time becomes the Unix epoch,
/// which reads as "changed long ago".
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LooseCondition {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    last_transition_time: Option<Time>,
    observed_generation: Option<i64>,
}

pub(crate) fn deserialize_conditions<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<Condition>, D::Error> {
    let loose: Option<Vec<LooseCondition>> = Option::deserialize(d)?;
    Ok(loose
        .unwrap_or_default()
        .into_iter()
        .map(|c| Condition {
            type_: c.type_,
            status: c.status,
            reason: c.reason,
            message: c.message,
            last_transition_time: c
                .last_transition_time
                .unwrap_or(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            observed_generation: c.observed_generation,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid timestamp"))
    }

    #[test]
    fn set_condition_keeps_transition_time_while_status_holds() {
        let mut conds = Vec::new();
        assert!(set_condition(&mut conds, "Ready", true, "Up", "", at(10)));
        assert!(!set_condition(&mut conds, "Ready", true, "Up", "", at(20)));
        assert!(set_condition(
            &mut conds,
            "Ready",
            true,
            "StillUp",
            "new message",
            at(30)
        ));
        assert_eq!(conds[0].last_transition_time, at(10));
        assert_eq!(conds[0].reason, "StillUp");
        assert!(set_condition(
            &mut conds,
            "Ready",
            false,
            "Down",
            "",
            at(40)
        ));
        assert_eq!(conds[0].last_transition_time, at(40));
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn find_condition_by_type() {
        let mut conds = Vec::new();
        set_condition(&mut conds, "A", true, "R", "", at(1));
        set_condition(&mut conds, "B", false, "R", "", at(1));
        assert_eq!(
            find_condition(&conds, "B").map(|c| c.status.as_str()),
            Some("False")
        );
        assert!(find_condition(&conds, "C").is_none());
    }

    #[test]
    fn durations_parse_like_karpenter() {
        assert_eq!(parse_duration("720h"), Ok(Duration::from_secs(720 * 3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("8h0m0s"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_nillable_duration("Never"), Ok(None));
        assert!(matches!(
            parse_duration("5d"),
            Err(DurationError::Malformed(_))
        ));
        assert!(matches!(
            parse_duration("10"),
            Err(DurationError::Malformed(_))
        ));
        assert!(matches!(parse_duration(""), Err(DurationError::Empty(_))));
        assert!(matches!(
            parse_duration("99999999999999999999h"),
            Err(DurationError::Malformed(_))
        ));
    }

    #[test]
    fn loose_conditions_fill_missing_fields() {
        #[derive(Deserialize)]
        struct Holder {
            #[serde(deserialize_with = "deserialize_conditions")]
            conditions: Vec<Condition>,
        }
        let h: Holder =
            serde_json::from_str(r#"{"conditions":[{"type":"Launched","status":"True"}]}"#)
                .expect("loose condition reads");
        assert_eq!(h.conditions[0].type_, "Launched");
        assert_eq!(h.conditions[0].last_transition_time, at(0));
    }
}
