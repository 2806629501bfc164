//! Labels, node requirements (the operators of node affinity and NodePool requirements), label
//! selectors, taints and tolerations: the predicates that decide whether a pod may land on a node.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Node or pod labels.
pub type Labels = BTreeMap<String, String>;

pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// Key of the `NoSchedule` taint a disruption command puts on the nodes it is removing.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";

/// Deprecated label keys that Karpenter rewrites to their current names.
pub fn normalize_key(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => ZONE,
        "failure-domain.beta.kubernetes.io/region" => REGION,
        "beta.kubernetes.io/arch" => ARCH,
        "beta.kubernetes.io/os" => OS,
        "beta.kubernetes.io/instance-type" => INSTANCE_TYPE,
        other => other,
    }
}

/// A requirement operator, including Karpenter's `Gte`/`Lte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }
}

/// One `key operator values` requirement; `min_values` is only meaningful on NodePool requirements.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
    pub min_values: Option<u32>,
}

/// Why a requirement is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error("unknown operator {0:?}")]
    UnknownOperator(String),
    #[error("operator {0:?} needs at least one value")]
    NoValues(String),
    #[error("operator {0:?} takes exactly one non-negative integer value, got {1:?}")]
    NotAnInteger(String, Vec<String>),
    #[error("minValues {0} is more than the {1} values listed")]
    MinValues(u32, usize),
}

impl Requirement {
    /// Builds and validates a requirement the way Karpenter's CEL rules do.
    pub fn new(
        key: &str,
        operator: &str,
        values: Vec<String>,
        min_values: Option<u32>,
    ) -> Result<Self, RequirementError> {
        let op = Operator::parse(operator)
            .ok_or_else(|| RequirementError::UnknownOperator(operator.to_string()))?;
        match op {
            Operator::In if values.is_empty() => {
                return Err(RequirementError::NoValues(operator.to_string()))
            }
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
                if values.len() != 1 || values[0].parse::<u64>().is_err() =>
            {
                return Err(RequirementError::NotAnInteger(operator.to_string(), values));
            }
            _ => {}
        }
        if let (Operator::In, Some(m)) = (op, min_values) {
            if (m as usize) > values.len() {
                return Err(RequirementError::MinValues(m, values.len()));
            }
        }
        Ok(Requirement {
            key: normalize_key(key).to_string(),
            operator: op,
            values,
            min_values,
        })
    }

    pub fn in_values(key: &str, values: &[&str]) -> Self {
        Requirement {
            key: key.to_string(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// Whether a node with these labels satisfies the requirement. A missing key satisfies only
    /// `NotIn` and `DoesNotExist`, as in Kubernetes.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match (self.operator, value) {
            (Operator::In, Some(v)) => self.values.iter().any(|x| x == v),
            (Operator::In, None) => false,
            (Operator::NotIn, Some(v)) => !self.values.iter().any(|x| x == v),
            (Operator::NotIn, None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (op, Some(v)) => {
                let (Ok(x), Some(Ok(y))) = (
                    v.parse::<i64>(),
                    self.values.first().map(|s| s.parse::<i64>()),
                ) else {
                    return false;
                };
                match op {
                    Operator::Gt => x > y,
                    Operator::Lt => x < y,
                    Operator::Gte => x >= y,
                    _ => x <= y,
                }
            }
            (_, None) => false,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.key, self.operator)?;
        if !self.values.is_empty() {
            write!(f, " [{}]", self.values.join(","))?;
        }
        Ok(())
    }
}

/// Required node affinity: terms are ORed, the requirements inside a term ANDed. No terms match
/// all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeSelector {
    pub terms: Vec<Vec<Requirement>>,
}

impl NodeSelector {
    /// Both selectors: every pair of terms joined (no terms matches everything).
    pub fn and(&self, other: &NodeSelector) -> NodeSelector {
        if self.terms.is_empty() {
            return other.clone();
        }
        if other.terms.is_empty() {
            return self.clone();
        }
        let terms = self
            .terms
            .iter()
            .flat_map(|a| {
                other
                    .terms
                    .iter()
                    .map(move |b| [a.clone(), b.clone()].concat())
            })
            .collect();
        NodeSelector { terms }
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.terms.is_empty()
            || self
                .terms
                .iter()
                .any(|t| t.iter().all(|r| r.matches(labels)))
    }
}

/// A Kubernetes label selector. `None` selectors (absent) match nothing; empty ones match
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LabelSelector {
    pub match_labels: Labels,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    pub fn parse(s: &str) -> Option<TaintEffect> {
        Some(match s {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

/// A toleration; `effect: None` tolerates every effect, `exists` ignores the value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Toleration {
    pub key: Option<String>,
    pub exists: bool,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        match &self.key {
            None => self.exists,
            Some(k) if k != &taint.key => false,
            Some(_) => self.exists || self.value == taint.value,
        }
    }
}

/// Whether pods with these tolerations may be placed on a node with `taints`. `PreferNoSchedule`
/// never blocks placement; it is a soft cost handled by the optimizer.
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// How many `PreferNoSchedule` taints the pod does not tolerate.
pub fn untolerated_soft_taints(tolerations: &[Toleration], taints: &[Taint]) -> usize {
    taints
        .iter()
        .filter(|t| {
            t.effect == TaintEffect::PreferNoSchedule
                && !tolerations.iter().any(|tol| tol.tolerates(t))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, vals: &[&str]) -> Requirement {
        Requirement::new(key, op, vals.iter().map(|v| v.to_string()).collect(), None).unwrap()
    }

    #[test]
    fn operators_on_undefined_keys_follow_kubernetes() {
        let l = labels(&[("a", "1")]);
        assert!(!req("x", "In", &["1"]).matches(&l));
        assert!(req("x", "NotIn", &["1"]).matches(&l));
        assert!(!req("x", "Exists", &[]).matches(&l));
        assert!(req("x", "DoesNotExist", &[]).matches(&l));
        assert!(!req("x", "Gt", &["0"]).matches(&l));
    }

    #[test]
    fn integer_operators_compare_numerically() {
        let l = labels(&[("cpu", "16")]);
        assert!(req("cpu", "Gt", &["8"]).matches(&l));
        assert!(!req("cpu", "Lt", &["8"]).matches(&l));
        assert!(req("cpu", "Gte", &["16"]).matches(&l));
        assert!(req("cpu", "Lte", &["16"]).matches(&l));
        assert!(!req("cpu", "Gt", &["16"]).matches(&l));
    }

    #[test]
    fn malformed_requirements_are_rejected() {
        assert!(matches!(
            Requirement::new("k", "Near", vec![], None),
            Err(RequirementError::UnknownOperator(_))
        ));
        assert!(matches!(
            Requirement::new("k", "In", vec![], None),
            Err(RequirementError::NoValues(_))
        ));
        assert!(matches!(
            Requirement::new("k", "Gt", vec!["x".into()], None),
            Err(RequirementError::NotAnInteger(..))
        ));
        assert!(matches!(
            Requirement::new("k", "In", vec!["a".into()], Some(2)),
            Err(RequirementError::MinValues(2, 1))
        ));
    }

    #[test]
    fn deprecated_keys_are_normalized() {
        let r = req("failure-domain.beta.kubernetes.io/zone", "In", &["z1"]);
        assert_eq!(r.key, ZONE);
    }

    #[test]
    fn node_selector_terms_are_ored() {
        let sel = NodeSelector {
            terms: vec![vec![req("a", "In", &["x"])], vec![req("b", "In", &["y"])]],
        };
        assert!(sel.matches(&labels(&[("b", "y")])));
        assert!(!sel.matches(&labels(&[("b", "z")])));
        assert!(NodeSelector::default().matches(&labels(&[])));
    }

    #[test]
    fn tolerations_match_taints() {
        let taint = Taint {
            key: "gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        };
        let exact = Toleration {
            key: Some("gpu".into()),
            exists: false,
            value: "true".into(),
            effect: None,
        };
        let wrong = Toleration {
            key: Some("gpu".into()),
            exists: false,
            value: "no".into(),
            effect: None,
        };
        let any = Toleration {
            key: None,
            exists: true,
            value: String::new(),
            effect: None,
        };
        assert!(exact.tolerates(&taint) && any.tolerates(&taint) && !wrong.tolerates(&taint));
        let soft = Taint {
            key: "x".into(),
            value: String::new(),
            effect: TaintEffect::PreferNoSchedule,
        };
        assert!(tolerates_all(&[], std::slice::from_ref(&soft)));
        assert_eq!(untolerated_soft_taints(&[], &[soft]), 1);
    }
}
