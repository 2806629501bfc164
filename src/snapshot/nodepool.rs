//! karpenter.sh/v1 NodePools: template requirements, labels and taints, limits, weight and the
//! disruption block, with the defaults and validation rules of Karpenter's CRD applied so a
//! hand-written snapshot is read the way the API server would have stored it.

use crate::domain::{Budget, ConsolidationPolicy, Disruption, NodePool, Taint};

use super::convert::{is_karpenter_duration, taint, FieldError, FieldResult};
use super::karpenter::{quantity_map, requirements, BudgetSpec, NodePoolObject, TaintSpec, Text};

const REASONS: [&str; 3] = ["Underutilized", "Empty", "Drifted"];
/// The CRD's defaults.
const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";
const DEFAULT_EXPIRE_AFTER: &str = "720h";
const DEFAULT_BUDGET_NODES: &str = "10%";

pub(crate) fn convert_nodepool(obj: NodePoolObject) -> FieldResult<NodePool> {
    let name = obj.metadata.required_name()?;
    let spec = obj.spec.unwrap_or_default();
    let template = spec.template.unwrap_or_default();
    let tspec = template.spec.unwrap_or_default();
    let tpath = "spec.template.spec";
    let expire_after = duration(
        tspec.expire_after.as_ref(),
        DEFAULT_EXPIRE_AFTER,
        &format!("{tpath}.expireAfter"),
    )?;
    let termination_grace_period = grace_period(
        tspec.termination_grace_period.as_ref(),
        &format!("{tpath}.terminationGracePeriod"),
    )?;
    Ok(NodePool {
        name,
        weight: weight(spec.weight)?,
        requirements: requirements(
            tspec.requirements.as_deref(),
            &format!("{tpath}.requirements"),
        )?,
        labels: template.metadata.and_then(|m| m.labels).unwrap_or_default(),
        taints: taints(tspec.taints.as_deref(), &format!("{tpath}.taints"))?,
        startup_taints: taints(
            tspec.startup_taints.as_deref(),
            &format!("{tpath}.startupTaints"),
        )?,
        limits: quantity_map(spec.limits.as_ref(), "spec.limits")?,
        node_class: tspec
            .node_class_ref
            .and_then(|r| r.name)
            .filter(|n| !n.is_empty()),
        expire_after: Some(expire_after),
        termination_grace_period,
        disruption: disruption(spec.disruption.unwrap_or_default())?,
        hash: obj
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::karpenter::NODEPOOL_HASH))
            .cloned(),
    })
}

/// Absent is 0 (tried last); a written weight must be within the CRD's 1..=100.
fn weight(w: Option<i64>) -> FieldResult<i32> {
    match w {
        None => Ok(0),
        Some(w @ 1..=100) => Ok(w as i32),
        Some(w) => Err(FieldError::new(
            "spec.weight",
            format!("weight {w} is outside 1..=100"),
        )),
    }
}

fn taints(list: Option<&[TaintSpec]>, path: &str) -> FieldResult<Vec<Taint>> {
    let mut out = Vec::new();
    for (i, t) in list.unwrap_or_default().iter().enumerate() {
        out.push(taint(
            &t.key,
            t.value.as_deref(),
            &t.effect,
            &format!("{path}[{i}]"),
        )?);
    }
    Ok(out)
}

/// `terminationGracePeriod`: a duration, with no default and, unlike the others, never `Never`
/// (the CRD's pattern).
fn grace_period(value: Option<&Text>, path: &str) -> FieldResult<Option<String>> {
    let Some(Text(s)) = value else {
        return Ok(None);
    };
    if s == "Never" || !is_karpenter_duration(s) {
        return Err(FieldError::new(path, format!("malformed duration {s:?}")));
    }
    Ok(Some(s.clone()))
}

/// A Karpenter duration (`30s`, `720h`, `Never`), defaulted when absent.
fn duration(value: Option<&Text>, default: &str, path: &str) -> FieldResult<String> {
    let Some(Text(s)) = value else {
        return Ok(default.to_string());
    };
    if !is_karpenter_duration(s) {
        return Err(FieldError::new(path, format!("malformed duration {s:?}")));
    }
    Ok(s.clone())
}

fn disruption(d: super::karpenter::DisruptionSpec) -> FieldResult<Disruption> {
    let path = "spec.disruption";
    let policy = policy(d.consolidation_policy.as_deref(), path)?;
    let consolidation_threshold = threshold(d.consolidation_threshold, policy, path)?;
    let consolidate_after = duration(
        d.consolidate_after.as_ref(),
        DEFAULT_CONSOLIDATE_AFTER,
        &format!("{path}.consolidateAfter"),
    )?;
    let budgets = match d.budgets {
        None => vec![Budget {
            nodes: DEFAULT_BUDGET_NODES.to_string(),
            ..Budget::default()
        }],
        Some(list) => {
            let mut out = Vec::new();
            for (i, b) in list.into_iter().enumerate() {
                out.push(budget(b, &format!("{path}.budgets[{i}]"))?);
            }
            out
        }
    };
    Ok(Disruption {
        consolidation_policy: policy,
        consolidation_threshold,
        consolidate_after: Some(consolidate_after),
        budgets,
    })
}

/// `consolidationPolicy`, defaulted to `WhenEmptyOrUnderutilized` as the CRD does.
fn policy(value: Option<&str>, path: &str) -> FieldResult<ConsolidationPolicy> {
    let Some(name) = value else {
        return Ok(ConsolidationPolicy::default());
    };
    ConsolidationPolicy::parse(name).ok_or_else(|| {
        let expected: Vec<&str> = ConsolidationPolicy::ALL
            .iter()
            .map(|p| p.as_str())
            .collect();
        FieldError::new(
            format!("{path}.consolidationPolicy"),
            format!(
                "unknown consolidation policy {name:?} (expected {})",
                expected.join(", ")
            ),
        )
    })
}

/// `consolidationThreshold` (k): a positive number, only with `consolidationPolicy: Balanced`.
fn threshold(
    value: Option<f64>,
    policy: ConsolidationPolicy,
    path: &str,
) -> FieldResult<Option<f64>> {
    let Some(k) = value else { return Ok(None) };
    let path = format!("{path}.consolidationThreshold");
    if policy != ConsolidationPolicy::Balanced {
        let message =
            format!("consolidationThreshold needs consolidationPolicy Balanced, not {policy}");
        return Err(FieldError::new(path, message));
    }
    if !(k.is_finite() && k > 0.0) {
        return Err(FieldError::new(
            path,
            format!("threshold {k} is not a positive number"),
        ));
    }
    Ok(Some(k))
}

fn budget(b: BudgetSpec, path: &str) -> FieldResult<Budget> {
    let nodes = b
        .nodes
        .map(|t| t.0)
        .unwrap_or_else(|| DEFAULT_BUDGET_NODES.to_string());
    if !is_budget_nodes(&nodes) {
        return Err(FieldError::new(
            format!("{path}.nodes"),
            format!("{nodes:?} is neither a count nor a percentage of 0-100%"),
        ));
    }
    let reasons = b.reasons.unwrap_or_default();
    if let Some((i, r)) = reasons
        .iter()
        .enumerate()
        .find(|(_, r)| !REASONS.contains(&r.as_str()))
    {
        return Err(FieldError::new(
            format!("{path}.reasons[{i}]"),
            format!("unknown disruption reason {r:?}"),
        ));
    }
    let duration = b.duration.map(|t| t.0);
    if b.schedule.is_some() != duration.is_some() {
        return Err(FieldError::new(
            path,
            "schedule and duration must be set together",
        ));
    }
    if let Some(schedule) = &b.schedule {
        crate::disruption::timing::check_schedule(schedule)
            .map_err(|e| FieldError::new(format!("{path}.schedule"), e.to_string()))?;
    }
    if let Some(d) = duration
        .as_ref()
        .filter(|d| *d == "Never" || !is_karpenter_duration(d))
    {
        return Err(FieldError::new(
            format!("{path}.duration"),
            format!("malformed duration {d:?}"),
        ));
    }
    Ok(Budget {
        nodes,
        reasons,
        schedule: b.schedule,
        duration,
    })
}

/// Karpenter's `^((100|[0-9]{1,2})%|[0-9]+)$`.
fn is_budget_nodes(s: &str) -> bool {
    let all_digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    match s.strip_suffix('%') {
        Some(pct) => pct == "100" || (all_digits(pct) && pct.len() <= 2),
        None => all_digits(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::convert::typed;

    fn pool(yaml: &str) -> FieldResult<NodePool> {
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).unwrap();
        convert_nodepool(typed(v)?)
    }

    #[test]
    fn defaults_apply() {
        let p = pool("metadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n").unwrap();
        assert_eq!(p.weight, 0);
        assert_eq!(p.node_class.as_deref(), Some("default"));
        assert_eq!(p.expire_after.as_deref(), Some("720h"));
        assert_eq!(
            p.termination_grace_period, None,
            "no default: a drain waits for its budgets"
        );
        assert_eq!(
            p.disruption.consolidation_policy,
            ConsolidationPolicy::WhenEmptyOrUnderutilized
        );
        assert_eq!(p.disruption.balanced_threshold(), None);
        assert_eq!(p.disruption.consolidate_after.as_deref(), Some("0s"));
        assert_eq!(
            p.disruption.budgets,
            vec![Budget {
                nodes: "10%".into(),
                ..Budget::default()
            }]
        );
    }

    #[test]
    fn a_termination_grace_period_is_read() {
        let p = pool(
            "metadata: {name: p}\nspec: {template: {spec: {terminationGracePeriod: 1h30m}}}\n",
        )
        .unwrap();
        assert_eq!(p.termination_grace_period.as_deref(), Some("1h30m"));
    }

    #[test]
    fn budget_nodes_pattern() {
        for ok in ["0", "10", "100%", "5%", "99%", "0%"] {
            assert!(is_budget_nodes(ok), "{ok}");
        }
        for bad in ["", "%", "101%", "100.0%", "1000%", "-1", "ten"] {
            assert!(!is_budget_nodes(bad), "{bad}");
        }
    }

    #[test]
    fn validation_errors_name_fields() {
        let cases = [
            ("spec: {weight: 0}", "spec.weight"),
            ("spec: {weight: 101}", "spec.weight"),
            ("spec: {disruption: {consolidationPolicy: Always}}", "spec.disruption.consolidationPolicy"),
            ("spec: {disruption: {consolidateAfter: 5d}}", "spec.disruption.consolidateAfter"),
            ("spec: {disruption: {consolidationThreshold: 3}}", "spec.disruption.consolidationThreshold"),
            (
                "spec: {disruption: {consolidationPolicy: Balanced, consolidationThreshold: 0}}",
                "spec.disruption.consolidationThreshold",
            ),
            (
                "spec: {disruption: {consolidationPolicy: Balanced, consolidationThreshold: -1.5}}",
                "spec.disruption.consolidationThreshold",
            ),
            ("spec: {disruption: {budgets: [{nodes: 120%}]}}", "spec.disruption.budgets[0].nodes"),
            (
                "spec: {disruption: {budgets: [{nodes: '1', reasons: [Expired]}]}}",
                "spec.disruption.budgets[0].reasons[0]",
            ),
            ("spec: {disruption: {budgets: [{nodes: '1', schedule: '@daily'}]}}", "spec.disruption.budgets[0]"),
            ("spec: {disruption: {budgets: [{nodes: '1', schedule: 'every tuesday', duration: 1h}]}}", "spec.disruption.budgets[0].schedule"),
            ("spec: {disruption: {budgets: [{nodes: '1', schedule: '61 25 * * *', duration: 1h}]}}", "spec.disruption.budgets[0].schedule"),
            ("spec: {disruption: {budgets: [{nodes: '1', schedule: '@daily', duration: 5d}]}}", "spec.disruption.budgets[0].duration"),
            ("spec: {template: {spec: {taints: [{key: a, effect: Nope}]}}}", "spec.template.spec.taints[0].effect"),
            ("spec: {limits: {cpu: -4}}", "spec.limits.cpu"),
            ("spec: {template: {spec: {terminationGracePeriod: Never}}}", "spec.template.spec.terminationGracePeriod"),
            ("spec: {template: {spec: {terminationGracePeriod: 2d}}}", "spec.template.spec.terminationGracePeriod"),
        ];
        for (spec, path) in cases {
            let e = pool(&format!("metadata: {{name: p}}\n{spec}\n")).unwrap_err();
            assert_eq!(e.path, path, "{spec}: {}", e.message);
        }
    }

    #[test]
    fn balanced_reads_its_threshold_or_the_default() {
        let p = pool("metadata: {name: p}\nspec: {disruption: {consolidationPolicy: Balanced}}\n")
            .unwrap();
        assert_eq!(
            p.disruption.consolidation_policy,
            ConsolidationPolicy::Balanced
        );
        assert_eq!(p.disruption.balanced_threshold(), Some(2.0));
        let p = pool(
            "metadata: {name: p}\nspec: {disruption: {consolidationPolicy: Balanced, consolidationThreshold: 2.5}}\n",
        )
        .unwrap();
        assert_eq!(p.disruption.balanced_threshold(), Some(2.5));
        let p = pool("metadata: {name: p}\nspec: {disruption: {consolidationPolicy: WhenEmpty}}\n")
            .unwrap();
        assert_eq!(
            p.disruption.consolidation_policy,
            ConsolidationPolicy::WhenEmpty
        );
    }

    #[test]
    fn limits_take_numbers_and_nodes() {
        let p =
            pool("metadata: {name: p}\nspec: {weight: 10, limits: {cpu: 1000, memory: 1000Gi, nodes: 5}}\n").unwrap();
        assert_eq!(p.weight, 10);
        assert_eq!(
            p.limits.get("cpu"),
            crate::domain::Quantity::from_units(1000)
        );
        assert_eq!(
            p.limits.get("nodes"),
            crate::domain::Quantity::from_units(5)
        );
    }
}
