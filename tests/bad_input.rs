//! A catalogue of malformed inputs (fixtures/bad-input/, listed in its README.md). Every case must
//! end in a clear error that names the object and the field (or, for inputs that parse but make no
//! sense, a plan that reports the pods unschedulable with a reason), and never in a panic, a hang or
//! a crash.
//!
//! Each case is its own `#[test]` and runs inside `catch_unwind` (or in the `joiner` binary), so a
//! panic shows up as that case failing, with its name. A case that fails because of a bug is kept,
//! marked `#[ignore = "bug: ..."]`, so that `cargo test -- --ignored` shows whether it is fixed; none
//! is open today.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joiner::catalog::{Catalog, CatalogError};
use joiner::domain::{ClusterSnapshot, Quantity, QuantityError};
use joiner::optimizer::{self, Plan, SolveSettings, Strategy, UnschedulableReason};
use joiner::sim::Scenario;
use joiner::snapshot::{load_snapshot, parse_snapshot, SnapshotError};

// ------------------------------------------------------------------ helpers

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/bad-input")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "<non-string panic payload>".into())
}

/// Runs one case; a panic inside joiner becomes a failure naming the case.
fn guarded<T>(case: &str, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => panic!("case {case}: joiner panicked: {}", panic_text(p)),
    }
}

fn assert_fragments(case: &str, message: &str, fragments: &[&str]) {
    for f in fragments {
        assert!(
            message.contains(f),
            "case {case}: error does not mention {f:?}:\n  {message}"
        );
    }
    assert!(
        !message.contains("panicked"),
        "case {case}: error mentions a panic:\n  {message}"
    );
}

/// The part of an error joiner wrote itself must start lowercase (the project's style); kinds and
/// object names come before it and are exempt.
fn assert_lowercase(case: &str, fragment: &str) {
    let first = fragment.chars().next().unwrap_or(' ');
    assert!(
        !first.is_uppercase(),
        "case {case}: message fragment is not lowercase: {fragment:?}"
    );
}

/// The snapshot error for `text`, checked for style; panics (naming the case) when the text parses.
fn snapshot_error_text(case: &str, text: &str, origin: &str) -> String {
    let result = guarded(case, || parse_snapshot(text, origin));
    let e = match result {
        Ok(s) => panic!(
            "case {case}: parsed without error ({} pods, {} nodes, {} nodepools, warnings {:?})",
            s.pods.len(),
            s.nodes.len(),
            s.nodepools.len(),
            s.warnings
        ),
        Err(e) => e,
    };
    match &e {
        SnapshotError::Object { message, path, .. } => {
            assert!(
                !path.is_empty(),
                "case {case}: object error without a field path: {e}"
            );
            assert_lowercase(case, message);
        }
        SnapshotError::Document { message, .. } | SnapshotError::Yaml { message, .. } => {
            assert_lowercase(case, message)
        }
        SnapshotError::Read { .. } => {}
    }
    let text = e.to_string();
    println!("{case}: {text}");
    text
}

/// A fixture snapshot must be rejected with an error containing every fragment.
fn expect_snapshot_error(case: &str, file: &str, fragments: &[&str]) {
    let text = snapshot_error_text(case, &read(file), file);
    assert_fragments(case, &text, fragments);
}

fn expect_catalog_error(case: &str, file: &str, fragments: &[&str]) {
    let text = read(file);
    let e = match guarded(case, || Catalog::from_json(&text, file)) {
        Ok(c) => panic!(
            "case {case}: catalog accepted ({} instance types)",
            c.instance_types.len()
        ),
        Err(e) => e,
    };
    let message = e.to_string();
    println!("{case}: {message}");
    if let CatalogError::Invalid { message, .. } = &e {
        assert_lowercase(case, message);
    }
    assert_fragments(case, &message, fragments);
}

fn expect_scenario_error(case: &str, file: &str, fragments: &[&str]) {
    let text = read(file);
    let e = match guarded(case, || Scenario::parse(&text, file, None)) {
        Ok(s) => panic!(
            "case {case}: scenario accepted ({} workloads, {} events)",
            s.workloads.len(),
            s.events.len()
        ),
        Err(e) => e,
    };
    let message = e.to_string();
    println!("{case}: {message}");
    assert_fragments(case, &message, fragments);
}

macro_rules! snapshot_rejects {
    ($($(#[$attr:meta])* $name:ident: $file:literal => [$($frag:expr),* $(,)?];)*) => {$(
        $(#[$attr])*
        #[test]
        fn $name() {
            expect_snapshot_error(stringify!($name), $file, &[$($frag),*]);
        }
    )*};
}

macro_rules! catalog_rejects {
    ($($(#[$attr:meta])* $name:ident: $file:literal => [$($frag:expr),* $(,)?];)*) => {$(
        $(#[$attr])*
        #[test]
        fn $name() {
            expect_catalog_error(stringify!($name), $file, &[$($frag),*]);
        }
    )*};
}

macro_rules! scenario_rejects {
    ($($(#[$attr:meta])* $name:ident: $file:literal => [$($frag:expr),* $(,)?];)*) => {$(
        $(#[$attr])*
        #[test]
        fn $name() {
            expect_scenario_error(stringify!($name), $file, &[$($frag),*]);
        }
    )*};
}

// ------------------------------------------------------------------ quantities

snapshot_rejects! {
    quantity_negative_cpu: "quantity-negative-cpu.yaml" => [
        "Pod shop/quantity-negative-cpu: spec.containers[0].resources.requests.cpu: negative quantity \"-1\""];
    quantity_negative_memory: "quantity-negative-memory.yaml" => [
        "Pod shop/quantity-negative-memory: spec.containers[0].resources.requests.memory: negative quantity \"-1Gi\""];
    quantity_huge_memory: "quantity-huge-memory.yaml" => [
        "Pod shop/quantity-huge-memory: spec.containers[0].resources.requests.memory: quantity \"99999999999999999999Ei\" is out of range"];
    quantity_huge_cpu_exponent: "quantity-huge-cpu-exponent.yaml" => [
        "Pod shop/quantity-huge-cpu-exponent: spec.containers[0].resources.requests.cpu: quantity \"1e400\" is out of range"];
    quantity_huge_cpu_exponent_quoted: "quantity-huge-cpu-exponent-quoted.yaml" => [
        "Pod shop/quantity-huge-cpu-exponent-quoted: spec.containers[0].resources.requests.cpu: quantity \"1e400\" is out of range"];
    // serde_yaml_ng::Value has no 128-bit integers: the document is read again to find the object.
    quantity_huge_plain_integer: "quantity-huge-plain-integer.yaml" => [
        "spec.containers[0].resources.requests.memory: integer 99999999999999999999 does not fit in 64 bits at line 9 column 26"];
    quantity_malformed_abc: "quantity-malformed-abc.yaml" => [
        "Pod shop/quantity-malformed-abc: spec.containers[0].resources.requests.cpu: malformed quantity \"abc\""];
    quantity_malformed_dots: "quantity-malformed-dots.yaml" => [
        "Pod shop/quantity-malformed-dots: spec.containers[0].resources.requests.cpu: malformed quantity \"1.2.3\""];
    quantity_unknown_suffix: "quantity-unknown-suffix.yaml" => [
        "Pod shop/quantity-unknown-suffix: spec.containers[0].resources.requests.cpu: unknown suffix in quantity \"1Xi\""];
    quantity_empty: "quantity-empty.yaml" => [
        "Pod shop/quantity-empty: spec.containers[0].resources.requests.cpu: empty quantity"];
    quantity_infinity: "quantity-infinity.yaml" => [
        "Pod shop/quantity-infinity: spec.containers[0].resources.requests.cpu: malformed quantity"];
    quantity_not_scalar: "quantity-not-scalar.yaml" => [
        "Pod shop/quantity-not-scalar: spec.containers[0].resources.requests.cpu", "invalid type"];
    quantity_huge_plain_integer_names_object: "quantity-huge-plain-integer.yaml" => [
        "Pod shop/quantity-huge-plain-integer: spec.containers[0].resources.requests.memory"];
}

/// A malformed quantity text and the error kind it must give.
type QuantityCase = (&'static str, fn(&QuantityError) -> bool);

/// `Quantity::parse` on its own: every malformed text is an error of the right kind, never a panic.
#[test]
fn quantity_parse_table() {
    use QuantityError::*;
    let cases: [QuantityCase; 17] = [
        ("", |e| matches!(e, Empty)),
        ("   ", |e| matches!(e, Empty)),
        ("abc", |e| matches!(e, Suffix(_) | Malformed(_))),
        ("1.2.3", |e| matches!(e, Malformed(_))),
        ("--1", |e| matches!(e, Malformed(_))),
        ("1Xi", |e| matches!(e, Suffix(_))),
        ("1e", |e| matches!(e, Malformed(_))),
        ("e3", |e| matches!(e, Malformed(_))),
        ("1e400", |e| matches!(e, Overflow(_))),
        ("1e2147483648", |e| matches!(e, Malformed(_) | Overflow(_))),
        ("99999999999999999999Ei", |e| matches!(e, Overflow(_))),
        ("9223372036854775807", |e| matches!(e, Overflow(_))),
        ("1234567890123456789012345678901", |e| {
            matches!(e, Overflow(_))
        }),
        ("1µ", |e| matches!(e, Malformed(_) | Suffix(_))),
        ("١", |e| matches!(e, Malformed(_))),
        ("1 Gi", |e| matches!(e, Malformed(_) | Suffix(_))),
        ("0x10", |e| matches!(e, Malformed(_) | Suffix(_))),
    ];
    for (text, ok) in cases {
        let r = guarded(text, || Quantity::parse(text));
        match r {
            Ok(q) => panic!("case quantity {text:?}: parsed as {q}"),
            Err(e) => {
                assert!(
                    ok(&e),
                    "case quantity {text:?}: unexpected error kind {e:?}"
                );
                assert_lowercase(text, &e.to_string());
                println!("quantity {text:?}: {e}");
            }
        }
    }
    // negative amounts parse (the snapshot reader rejects them with the field path)
    assert!(
        Quantity::parse("-1").unwrap().is_negative(),
        "case quantity \"-1\""
    );
}

// ------------------------------------------------------------------ requirements

snapshot_rejects! {
    requirement_unknown_operator: "requirement-unknown-operator.yaml" => [
        "NodePool requirement-unknown-operator: spec.template.spec.requirements[1].operator: unknown operator \"Sometimes\""];
    requirement_gt_not_integer: "requirement-gt-not-integer.yaml" => [
        "NodePool requirement-gt-not-integer: spec.template.spec.requirements[0].values: operator \"Gt\" takes exactly one non-negative integer value, got [\"four\"]"];
    requirement_gt_multiple_values: "requirement-gt-multiple-values.yaml" => [
        "NodePool requirement-gt-multiple-values: spec.template.spec.requirements[0].values:", "got [\"4\", \"8\"]"];
    requirement_lt_no_values: "requirement-lt-no-values.yaml" => [
        "NodePool requirement-lt-no-values: spec.template.spec.requirements[0].values:", "got []"];
    requirement_lt_negative: "requirement-lt-negative.yaml" => [
        "NodePool requirement-lt-negative: spec.template.spec.requirements[0].values:", "got [\"-4\"]"];
    requirement_in_no_values: "requirement-in-no-values.yaml" => [
        "NodePool requirement-in-no-values: spec.template.spec.requirements[0].values: operator \"In\" needs at least one value"];
    requirement_min_values_too_many: "requirement-min-values-too-many.yaml" => [
        "NodePool requirement-min-values-too-many: spec.template.spec.requirements[0].minValues: minValues 3 is more than the 1 values listed"];
    requirement_operator_not_string: "requirement-operator-not-string.yaml" => [
        "NodePool requirement-operator-not-string: spec.template.spec.requirements[0].operator", "invalid type"];
    affinity_unknown_operator: "affinity-unknown-operator.yaml" => [
        "Pod shop/affinity-unknown-operator: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator \"Sometimes\""];
    affinity_gt_not_integer: "affinity-gt-not-integer.yaml" => [
        "Pod default/affinity-gt-not-integer: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values:", "got [\"4.5\"]"];
    spread_unknown_selector_operator: "spread-unknown-selector-operator.yaml" => [
        "Pod default/spread-unknown-selector-operator: spec.topologySpreadConstraints[0]", "unknown operator \"Sometimes\""];
    spread_max_skew_zero: "spread-max-skew-zero.yaml" => [
        "Pod default/spread-max-skew-zero: spec.topologySpreadConstraints[0].maxSkew: maxSkew 0 must be at least 1"];
    spread_unknown_when_unsatisfiable: "spread-unknown-when-unsatisfiable.yaml" => [
        "Pod default/spread-unknown-when-unsatisfiable: spec.topologySpreadConstraints[0].whenUnsatisfiable: unknown value \"Sometimes\""];
    pdb_selector_unknown_operator: "pdb-selector-unknown-operator.yaml" => [
        "PodDisruptionBudget shop/pdb-selector-unknown-operator: spec.selector.matchExpressions[0].operator: unknown operator \"Sometimes\""];
}

// ------------------------------------------------------------------ NodePool fields

snapshot_rejects! {
    nodepool_weight_zero: "nodepool-weight-zero.yaml" => [
        "NodePool nodepool-weight-zero: spec.weight: weight 0 is outside 1..=100"];
    nodepool_weight_too_large: "nodepool-weight-too-large.yaml" => [
        "NodePool nodepool-weight-too-large: spec.weight: weight 101 is outside 1..=100"];
    nodepool_weight_negative: "nodepool-weight-negative.yaml" => [
        "NodePool nodepool-weight-negative: spec.weight: weight -5 is outside 1..=100"];
    nodepool_weight_huge: "nodepool-weight-huge.yaml" => ["spec.weight: integer 99999999999999999999 does not fit in 64 bits at line 6 column 11"];
    nodepool_weight_huge_names_object: "nodepool-weight-huge.yaml" => ["NodePool nodepool-weight-huge: spec.weight"];
    nodepool_weight_not_number: "nodepool-weight-not-number.yaml" => [
        "NodePool nodepool-weight-not-number: spec.weight: invalid type: string \"heavy\""];
    duration_expire_after_days: "duration-expire-after-days.yaml" => [
        "NodePool duration-expire-after-days: spec.template.spec.expireAfter: malformed duration \"5d\""];
    duration_consolidate_after_negative: "duration-consolidate-after-negative.yaml" => [
        "NodePool duration-consolidate-after-negative: spec.disruption.consolidateAfter: malformed duration \"-1s\""];
    duration_termination_grace_never: "duration-termination-grace-never.yaml" => [
        "NodePool duration-termination-grace-never: spec.template.spec.terminationGracePeriod: malformed duration \"Never\""];
    budget_schedule_without_duration: "budget-schedule-without-duration.yaml" => [
        "NodePool budget-schedule-without-duration: spec.disruption.budgets[0]: schedule and duration must be set together"];
    budget_nodes_bad: "budget-nodes-bad.yaml" => [
        "NodePool budget-nodes-bad: spec.disruption.budgets[0].nodes: \"150%\" is neither a count nor a percentage of 0-100%"];
    budget_unknown_reason: "budget-unknown-reason.yaml" => [
        "NodePool budget-unknown-reason: spec.disruption.budgets[0].reasons[1]: unknown disruption reason \"Expired\""];
    consolidation_policy_unknown: "consolidation-policy-unknown.yaml" => [
        "NodePool consolidation-policy-unknown: spec.disruption.consolidationPolicy: unknown consolidation policy \"Always\""];
    consolidation_threshold_without_balanced: "consolidation-threshold-without-balanced.yaml" => [
        "NodePool consolidation-threshold-without-balanced: spec.disruption.consolidationThreshold: consolidationThreshold needs consolidationPolicy Balanced"];
    consolidation_threshold_zero: "consolidation-threshold-zero.yaml" => [
        "NodePool consolidation-threshold-zero: spec.disruption.consolidationThreshold: threshold 0 is not a positive number"];
    taint_bad_effect_nodepool: "taint-bad-effect-nodepool.yaml" => [
        "NodePool taint-bad-effect-nodepool: spec.template.spec.taints[0].effect: unknown taint effect \"Sometimes\""];
    startup_taint_missing_effect: "startup-taint-missing-effect.yaml" => [
        "NodePool startup-taint-missing-effect: spec.template.spec.startupTaints[0]", "missing field `effect`"];
    nodepool_limits_negative: "nodepool-limits-negative.yaml" => [
        "NodePool nodepool-limits-negative: spec.limits.cpu: negative quantity \"-100\""];
    nodepool_limits_malformed: "nodepool-limits-malformed.yaml" => [
        "NodePool nodepool-limits-malformed: spec.limits.memory: malformed quantity \"lots\""];
    nodepool_spec_not_mapping: "nodepool-spec-not-mapping.yaml" => [
        "NodePool nodepool-spec-not-mapping: spec: invalid type: string \"just-a-string\""];
    nodepool_missing_name: "nodepool-missing-name.yaml" => ["NodePool <unnamed>: metadata.name: missing"];
}

// A budget's cron schedule and duration are validated when the snapshot is read, as Karpenter's CRD
// validates them on admission.
snapshot_rejects! {
    budget_invalid_cron: "budget-invalid-cron.yaml" => [
        "NodePool budget-invalid-cron: spec.disruption.budgets[0].schedule", "cron"];
    budget_cron_out_of_range: "budget-cron-out-of-range.yaml" => [
        "NodePool budget-cron-out-of-range: spec.disruption.budgets[0].schedule"];
    budget_invalid_duration: "budget-invalid-duration.yaml" => [
        "NodePool budget-invalid-duration: spec.disruption.budgets[0].duration: malformed duration \"5d\""];
}

/// A budget with an invalid cron schedule, should one get past the reader: every disruption of its
/// pool is blocked (Karpenter's fail-closed rule). The reader now rejects the three files, so this
/// only prints their errors.
#[test]
fn budget_invalid_cron_fails_closed_when_evaluated() {
    use joiner::disruption::budget::allowed_disruptions;
    use joiner::disruption::timing::parse_timestamp;
    use joiner::disruption::Reason;
    let case = "budget_invalid_cron_fails_closed_when_evaluated";
    for file in [
        "budget-invalid-cron.yaml",
        "budget-cron-out-of-range.yaml",
        "budget-invalid-duration.yaml",
    ] {
        let text = read(file);
        let snapshot = match guarded(case, || parse_snapshot(&text, file)) {
            Ok(s) => s,
            // once the reader rejects it (the fix), this case has nothing left to check
            Err(e) => {
                println!("{case}: {file} now rejected: {e}");
                continue;
            }
        };
        let now = parse_timestamp("2026-01-05T12:00:00Z").unwrap();
        let budgets = &snapshot.nodepools[0].disruption.budgets;
        for reason in [Reason::Empty, Reason::Underutilized, Reason::Drifted] {
            let allowed = guarded(case, || allowed_disruptions(budgets, reason, 10, now));
            assert_eq!(
                allowed, 0,
                "case {case}: {file}: a malformed budget must block {reason}"
            );
        }
    }
}

// ------------------------------------------------------------------ other kinds

snapshot_rejects! {
    taint_bad_effect_node: "taint-bad-effect-node.yaml" => [
        "Node taint-bad-effect-node: spec.taints[0].effect: unknown taint effect \"Sometimes\""];
    toleration_bad_effect: "toleration-bad-effect.yaml" => [
        "Pod default/toleration-bad-effect: spec.tolerations[0].effect: unknown taint effect \"Always\""];
    toleration_bad_operator: "toleration-bad-operator.yaml" => [
        "Pod default/toleration-bad-operator: spec.tolerations[0].operator: unknown toleration operator \"Sometimes\""];
    host_port_out_of_range: "host-port-out-of-range.yaml" => [
        "Pod default/host-port-out-of-range: spec.containers[0].ports[0].hostPort: host port 70000 is out of range"];
    pod_label_not_string: "pod-label-not-string.yaml" => [
        "Pod default/pod-label-not-string: metadata.labels", "invalid type"];
    pod_missing_name: "pod-missing-name.yaml" => ["Pod shop/<unnamed>: metadata.name: missing"];
    pod_missing_spec: "pod-missing-spec.yaml" => ["Pod default/pod-missing-spec: spec: missing"];
    pod_metadata_not_mapping: "pod-metadata-not-mapping.yaml" => ["Pod default/<unnamed>: metadata", "invalid type"];
    pod_deletion_cost_not_integer: "pod-deletion-cost-not-integer.yaml" => [
        "Pod default/pod-deletion-cost-not-integer: metadata.annotations[\"controller.kubernetes.io/pod-deletion-cost\"]: \"1e12\" is not a 32-bit integer"];
    node_missing_name: "node-missing-name.yaml" => ["Node <unnamed>: metadata.name: missing"];
    node_capacity_negative: "node-capacity-negative.yaml" => [
        "Node node-capacity-negative: status.allocatable.memory: negative quantity \"-8Gi\""];
    nodeclaim_missing_name: "nodeclaim-missing-name.yaml" => ["NodeClaim <unnamed>: metadata.name: missing"];
    nodeclaim_bad_expire_after: "nodeclaim-bad-expire-after.yaml" => [
        "NodeClaim nodeclaim-bad-expire-after: spec.expireAfter: malformed duration \"5d\""];
    nodeclass_missing_name: "nodeclass-missing-name.yaml" => ["EC2NodeClass <unnamed>: metadata.name: missing"];
    nodeclass_max_pods_negative: "nodeclass-max-pods-negative.yaml" => [
        "EC2NodeClass nodeclass-max-pods-negative: spec.kubelet.maxPods: invalid value: integer `-1`"];
    nodeclass_eviction_hard_bad: "nodeclass-eviction-hard-bad.yaml" => [
        "EC2NodeClass nodeclass-eviction-hard-bad: spec.kubelet.evictionHard.memory.available: \"lots\" is neither a percentage nor a quantity"];
    nodeclass_kube_reserved_negative: "nodeclass-kube-reserved-negative.yaml" => [
        "EC2NodeClass nodeclass-kube-reserved-negative: spec.kubelet.kubeReserved.cpu: negative quantity \"-100m\""];
    pdb_missing_name: "pdb-missing-name.yaml" => ["PodDisruptionBudget shop/<unnamed>: metadata.name: missing"];
    daemonset_missing_template_spec: "daemonset-missing-template-spec.yaml" => [
        "DaemonSet kube-system/daemonset-missing-template-spec: spec.template.spec: missing"];
    daemonset_negative_request: "daemonset-negative-request.yaml" => [
        "DaemonSet kube-system/daemonset-negative-request: spec.template.spec.containers[0].resources.requests.cpu: negative quantity \"-50m\""];
    pod_empty_name: "pod-empty-name.yaml" => ["metadata.name"];
}

// ------------------------------------------------------------------ cost-weight ConfigMap

snapshot_rejects! {
    weights_unknown_key: "weights-unknown-key.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.unschedulablePods: unknown key \"unschedulablePods\""];
    weights_negative: "weights-negative.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.minSavings:", "\"-0.5\" is not a non-negative number"];
    weights_not_a_number: "weights-not-a-number.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.podEviction:", "\"cheap\" is not a non-negative number"];
    weights_infinite: "weights-infinite.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.unschedulablePod:", "is not a non-negative number"];
    weights_nan: "weights-nan.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.nodeDisruption:", "is not a non-negative number"];
    weights_value_is_list: "weights-value-is-list.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data.preferNoSchedule", "invalid type"];
    weights_data_not_mapping: "weights-data-not-mapping.yaml" => [
        "ConfigMap kube-system/joiner-cost-weights: data", "invalid type"];
}

// ------------------------------------------------------------------ documents and YAML

snapshot_rejects! {
    document_scalar: "document-scalar.yaml" => [
        "document-scalar.yaml: document 1: not a kubernetes object (expected a mapping with apiVersion and kind)"];
    document_sequence: "document-sequence.yaml" => ["document-sequence.yaml: document 2: not a kubernetes object"];
    document_no_kind: "document-no-kind.yaml" => ["document-no-kind.yaml: document 1: object without apiVersion and kind"];
    document_kind_not_string: "document-kind-not-string.yaml" => [
        "document-kind-not-string.yaml: document 1: object without apiVersion and kind"];
    list_items_not_sequence: "list-items-not-sequence.yaml" => [
        "list-items-not-sequence.yaml: document 1: list whose items is not a sequence"];
    list_item_scalar: "list-item-scalar.yaml" => ["list-item-scalar.yaml: document 1: items[1]: not a kubernetes object"];
    yaml_unclosed_flow: "yaml-unclosed-flow.yaml" => ["yaml-unclosed-flow.yaml: document 2: malformed yaml:", "line"];
    yaml_bad_indentation: "yaml-bad-indentation.yaml" => ["yaml-bad-indentation.yaml: document 1: malformed yaml:", "line"];
    yaml_tab_indentation: "yaml-tab-indentation.yaml" => ["yaml-tab-indentation.yaml: document 1: malformed yaml:"];
    yaml_duplicate_key: "yaml-duplicate-key.yaml" => ["yaml-duplicate-key.yaml: document 1: malformed yaml:", "duplicate", "metadata"];
    yaml_alias_bomb: "yaml-alias-bomb.yaml" => ["yaml-alias-bomb.yaml: document 1: malformed yaml:"];
    control_characters: "control-characters.yaml" => ["control-characters.yaml: document 1: malformed yaml:"];
}

#[test]
fn binary_garbage_file() {
    let case = "binary_garbage_file";
    let path = fixture("binary-garbage.bin");
    let e = guarded(case, || load_snapshot(&path))
        .expect_err("case binary_garbage_file: garbage parsed");
    let message = e.to_string();
    println!("{case}: {message}");
    assert!(
        matches!(e, SnapshotError::Read { .. }),
        "case {case}: {e:?}"
    );
    assert_fragments(
        case,
        &message,
        &["cannot read", "binary-garbage.bin", "valid UTF-8"],
    );
    // the same bytes, made into text, are still not a snapshot
    let lossy = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
    let text = snapshot_error_text(case, &lossy, "garbage");
    assert_fragments(case, &text, &["garbage: document 1:"]);
}

/// 10,000 nested flow sequences: serde_yaml_ng's recursion limit turns this into a clean error
/// instead of a stack overflow.
#[test]
fn deeply_nested_lists() {
    let case = "deeply_nested_lists";
    let text = format!("{}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let message = snapshot_error_text(case, &text, "nested.yaml");
    assert_fragments(
        case,
        &message,
        &[
            "nested.yaml: document 1: malformed yaml:",
            "recursion limit exceeded",
        ],
    );
}

/// Deep nesting inside a field of an object joiner reads.
#[test]
fn deeply_nested_mappings_in_a_pod() {
    let case = "deeply_nested_mappings_in_a_pod";
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: deep}}\nspec:\n  containers: []\n  nodeSelector: {}x{}\n",
        "{a: ".repeat(10_000),
        "}".repeat(10_000)
    );
    let message = snapshot_error_text(case, &text, "nested.yaml");
    assert_fragments(
        case,
        &message,
        &[
            "nested.yaml: document 1: malformed yaml:",
            "recursion limit exceeded",
        ],
    );
}

/// Many documents, each deeply (but legally) nested, and many small documents: no limit trips on size alone.
#[test]
fn very_large_document_parses() {
    let case = "very_large_document_parses";
    let mut text = String::with_capacity(20_000 * 260);
    for i in 0..20_000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web-{i:05}, namespace: shop, labels: {{app: web}}}}\n\
             spec:\n  containers:\n  - name: app\n    resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}\n"
        ));
    }
    let start = Instant::now();
    let snapshot = guarded(case, || parse_snapshot(&text, "large.yaml"))
        .unwrap_or_else(|e| panic!("case {case}: {e}"));
    let took = start.elapsed();
    println!(
        "{case}: {} bytes, {} pods in {took:?}",
        text.len(),
        snapshot.pods.len()
    );
    assert_eq!(snapshot.pods.len(), 20_000, "case {case}");
    assert_eq!(snapshot.pending_pods().count(), 20_000, "case {case}");
    assert!(
        took < Duration::from_secs(60),
        "case {case}: parsing took {took:?}"
    );
    // one kind: List of the same pods too
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        (0..20_000).map(|i| format!("- {{apiVersion: v1, kind: Pod, metadata: {{name: p{i}}}, spec: {{containers: []}}}}\n")).collect::<String>()
    );
    let snapshot = guarded(case, || parse_snapshot(&list, "list.yaml"))
        .unwrap_or_else(|e| panic!("case {case}: {e}"));
    assert_eq!(snapshot.pods.len(), 20_000, "case {case} (List)");
}

// Duplicate objects: two objects with the same kind and name cannot exist in a cluster, so a dump
// holding them was edited by hand or merged. The expectation is an error (or at least a warning)
// naming the object; the reader gives an error.
fn expect_duplicate_reported(case: &str, file: &str, object: &str) {
    let text = read(file);
    match guarded(case, || parse_snapshot(&text, file)) {
        Err(e) => {
            let message = e.to_string();
            println!("{case}: {message}");
            assert_fragments(case, &message, &[object]);
        }
        Ok(s) => {
            assert!(
                s.warnings.iter().any(|w| w.contains(object)),
                "case {case}: duplicate {object} accepted without error or warning (warnings {:?}; {} pods, {} nodes, {} nodepools)",
                s.warnings,
                s.pods.len(),
                s.nodes.len(),
                s.nodepools.len()
            );
        }
    }
}

#[test]
fn duplicate_pods() {
    expect_duplicate_reported("duplicate_pods", "duplicate-pods.yaml", "Pod shop/web-1");
}

#[test]
fn duplicate_nodepools() {
    expect_duplicate_reported(
        "duplicate_nodepools",
        "duplicate-nodepools.yaml",
        "NodePool default",
    );
}

#[test]
fn duplicate_nodes() {
    expect_duplicate_reported(
        "duplicate_nodes",
        "duplicate-nodes.yaml",
        "Node ip-10-0-0-1",
    );
}

// ------------------------------------------------------------------ catalog files

catalog_rejects! {
    catalog_negative_price: "catalog-negative-price.json" => [
        "catalog: instance type \"t.large\": offerings[0].price -0.1 is not a non-negative number"];
    catalog_missing_arch: "catalog-missing-arch.json" => [
        "catalog: catalog-missing-arch.json: field instance_types[0]", "missing field `arch`"];
    catalog_missing_offerings: "catalog-missing-offerings.json" => [
        "catalog: catalog-missing-offerings.json: field instance_types[0]", "missing field `offerings`"];
    catalog_missing_region: "catalog-missing-region.json" => ["catalog: catalog-missing-region.json:", "missing field `region`"];
    catalog_zero_cpus: "catalog-zero-cpus.json" => ["catalog: instance type \"t.zero\": vcpu and memory_mib must be positive"];
    catalog_zero_memory: "catalog-zero-memory.json" => ["catalog: instance type \"t.nomem\": vcpu and memory_mib must be positive"];
    catalog_negative_cpus: "catalog-negative-cpus.json" => [
        "catalog: catalog-negative-cpus.json: field instance_types[0].vcpu: invalid value: integer `-2`"];
    catalog_price_not_number: "catalog-price-not-number.json" => [
        "catalog: catalog-price-not-number.json: field instance_types[0].offerings[0].price: invalid type: string \"cheap\""];
    catalog_price_overflow: "catalog-price-overflow.json" => ["catalog: catalog-price-overflow.json:", "number out of range"];
    catalog_unknown_arch: "catalog-unknown-arch.json" => [
        "catalog: catalog-unknown-arch.json: field instance_types[0].arch: unknown variant `sparc`"];
    catalog_unknown_capacity_type: "catalog-unknown-capacity-type.json" => [
        "catalog: catalog-unknown-capacity-type.json: field instance_types[0].offerings[0].capacity_type: unknown variant `reserved`"];
    catalog_empty_zone: "catalog-empty-zone.json" => ["catalog: instance type \"t.large\": offerings[0].zone is empty"];
    catalog_duplicate_type: "catalog-duplicate-type.json" => ["catalog: instance type \"t.large\": listed twice"];
    catalog_negative_capacity: "catalog-negative-capacity.json" => [
        "catalog: instance type \"t.large\": capacity.nvidia.com/gpu is negative"];
    catalog_negative_overhead: "catalog-negative-overhead.json" => ["catalog: instance type \"t.large\": overhead.cpu is negative"];
    catalog_malformed_capacity: "catalog-malformed-capacity.json" => [
        "catalog: catalog-malformed-capacity.json: field instance_types[0].capacity.ephemeral-storage:", "quantity \"lots\""];
    catalog_not_object: "catalog-not-object.json" => ["catalog: catalog-not-object.json:"];
    catalog_not_object_message_is_clear: "catalog-not-object.json" => ["catalog: catalog-not-object.json:", "invalid type: sequence"];
    catalog_truncated: "catalog-truncated.json" => ["catalog: catalog-truncated.json:", "EOF while parsing"];
    catalog_memory_overflow: "catalog-memory-overflow.json" => ["catalog: instance type \"t.huge\": memory_mib"];
}

#[test]
fn catalog_deeply_nested_json() {
    let case = "catalog_deeply_nested_json";
    let text = format!(
        "{{\"region\": \"r\", \"provenance\": {}{}, \"instance_types\": []}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let e = guarded(case, || Catalog::from_json(&text, "nested.json"))
        .expect_err("case catalog_deeply_nested_json: accepted");
    let message = e.to_string();
    println!("{case}: {message}");
    assert_fragments(
        case,
        &message,
        &["catalog: nested.json:", "recursion limit exceeded"],
    );
}

#[test]
fn catalog_empty_is_valid() {
    let case = "catalog_empty_is_valid";
    let text = read("catalog-empty.json");
    let c = guarded(case, || Catalog::from_json(&text, "catalog-empty.json"))
        .unwrap_or_else(|e| panic!("case {case}: {e}"));
    assert!(c.instance_types.is_empty(), "case {case}");
}

// ------------------------------------------------------------------ scenario files

scenario_rejects! {
    scenario_unknown_event_kind: "scenario-unknown-event-kind.yaml" => [
        "scenario scenario-unknown-event-kind.yaml: events[0].kind: unknown event kind \"explode\" (insufficientCapacity or interrupt)"];
    scenario_negative_replicas: "scenario-negative-replicas.yaml" => [
        "scenario scenario-negative-replicas.yaml: workloads[0].replicas.constant:", "integer `-3`, expected u32"];
    scenario_negative_burst: "scenario-negative-burst.yaml" => [
        "scenario scenario-negative-burst.yaml: workloads[0].bursts[0].extra:", "integer `-5`, expected u32"];
    scenario_negative_parallelism: "scenario-negative-parallelism.yaml" => [
        "scenario scenario-negative-parallelism.yaml: workloads[0].parallelism:", "integer `-1`, expected u32"];
    scenario_negative_duration: "scenario-negative-duration.yaml" => [
        "scenario scenario-negative-duration.yaml: duration: malformed duration \"-1h\""];
    scenario_event_negative_at: "scenario-event-negative-at.yaml" => [
        "scenario scenario-event-negative-at.yaml: events[0].at: malformed duration \"-5m\""];
    scenario_unknown_field: "scenario-unknown-field.yaml" => ["scenario scenario-unknown-field.yaml:", "unknown field `evnts`"];
    scenario_unknown_workload_kind: "scenario-unknown-workload-kind.yaml" => [
        "scenario scenario-unknown-workload-kind.yaml: workloads[0].kind: unknown workload kind \"DaemonSet\" (Deployment, StatefulSet or Job)"];
    scenario_gap_out_of_range: "scenario-gap-out-of-range.yaml" => ["scenario scenario-gap-out-of-range.yaml: solver.gap: 2 is not in [0, 1)"];
    scenario_no_nodepool: "scenario-no-nodepool.yaml" => ["scenario scenario-no-nodepool.yaml: manifests: no NodePool"];
    scenario_bad_manifest: "scenario-bad-manifest.yaml" => [
        "Pod shop/static: spec.containers[0].resources.requests.cpu: negative quantity \"-1\""];
    scenario_diurnal_min_above_max: "scenario-diurnal-min-above-max.yaml" => [
        "scenario scenario-diurnal-min-above-max.yaml: workloads[0].replicas.diurnal: min 10 is above max 2"];
    scenario_rate_scale_negative: "scenario-rate-scale-negative.yaml" => [
        "scenario scenario-rate-scale-negative.yaml: spotInterruptions.rateScale: must be a non-negative number"];
    scenario_ice_without_type: "scenario-ice-without-type.yaml" => [
        "scenario scenario-ice-without-type.yaml: events[0].instanceType: an insufficientCapacity event needs it"];
    scenario_duplicate_workload: "scenario-duplicate-workload.yaml" => [
        "scenario scenario-duplicate-workload.yaml: workloads[1].name: default/web is named twice"];
    scenario_not_mapping: "scenario-not-mapping.yaml" => ["scenario scenario-not-mapping.yaml:", "invalid type: sequence"];
    scenario_error_path_not_repeated: "scenario-negative-replicas.yaml" => [
        "scenario scenario-negative-replicas.yaml: workloads[0].replicas.constant: invalid type: integer `-3`"];
}

#[test]
fn scenario_deeply_nested() {
    let case = "scenario_deeply_nested";
    let text = format!(
        "name: deep\nduration: 1h\nmanifests: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let e = guarded(case, || Scenario::parse(&text, "nested.yaml", None))
        .err()
        .unwrap_or_else(|| panic!("case {case}: accepted"));
    let message = e.to_string();
    println!("{case}: {message}");
    assert_fragments(
        case,
        &message,
        &["scenario nested.yaml:", "recursion limit exceeded"],
    );
}

// ------------------------------------------------------------------ inputs that parse but make no sense

fn settings() -> SolveSettings {
    SolveSettings {
        strategy: Strategy::Milp,
        time_limit: Duration::from_secs(20),
        threads: 1,
        ..SolveSettings::default()
    }
}

fn small_catalog() -> Catalog {
    Catalog::from_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/catalogs/test-small.json"),
    )
    .expect("test-small catalog")
}

fn placed(plan: &Plan) -> usize {
    plan.nodes.iter().map(|n| n.pods.len()).sum::<usize>()
        + plan.existing.iter().map(|e| e.pods.len()).sum::<usize>()
}

/// Solves a fixture with both strategies and checks every pending pod is reported unschedulable
/// with one of `reasons` and a message.
fn expect_unschedulable(
    case: &str,
    file: &str,
    catalog: &Catalog,
    reasons: &[UnschedulableReason],
) {
    let text = read(file);
    let snapshot: ClusterSnapshot = guarded(case, || parse_snapshot(&text, file))
        .unwrap_or_else(|e| panic!("case {case}: does not parse: {e}"));
    let pending = snapshot.pending_pods().count();
    assert!(pending > 0, "case {case}: fixture has no pending pods");
    for strategy in [Strategy::Greedy, Strategy::Milp] {
        let s = SolveSettings {
            strategy,
            ..settings()
        };
        let plan = guarded(case, || optimizer::solve(&snapshot, catalog, &s))
            .unwrap_or_else(|e| panic!("case {case} ({strategy:?}): solve failed: {e}"));
        for u in &plan.unschedulable {
            println!(
                "{case} ({strategy:?}): {} {:?}: {}",
                u.pod, u.reason, u.message
            );
        }
        assert_eq!(
            placed(&plan),
            0,
            "case {case} ({strategy:?}): pods were placed: {:?}",
            plan.nodes
                .iter()
                .map(|n| (&n.nodepool, &n.instance_type, &n.pods))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            plan.unschedulable.len(),
            pending,
            "case {case} ({strategy:?}): not every pod is reported"
        );
        for u in &plan.unschedulable {
            assert!(
                reasons.contains(&u.reason),
                "case {case} ({strategy:?}): {} has reason {:?}, expected one of {reasons:?}",
                u.pod,
                u.reason
            );
            assert!(
                !u.message.is_empty(),
                "case {case} ({strategy:?}): {} has no message",
                u.pod
            );
            assert_lowercase(case, &u.message);
        }
    }
}

#[test]
fn solver_missing_nodeclass() {
    expect_unschedulable(
        "solver_missing_nodeclass",
        "solver-missing-nodeclass.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

/// The same NodePool and pods without any EC2NodeClass in the snapshot (a what-if that leaves the
/// classes out): the missing class is not held against the pool, and both pods are placed.
#[test]
fn solver_missing_nodeclass_without_any_nodeclass_plans() {
    let case = "solver_missing_nodeclass_without_any_nodeclass_plans";
    let text = read("solver-missing-nodeclass.yaml");
    let snapshot = guarded(case, || {
        parse_snapshot(&text, "solver-missing-nodeclass.yaml")
    })
    .unwrap_or_else(|e| panic!("case {case}: {e}"));
    let snapshot = ClusterSnapshot {
        node_classes: vec![],
        ..snapshot
    };
    for strategy in [Strategy::Greedy, Strategy::Milp] {
        let s = SolveSettings {
            strategy,
            ..settings()
        };
        let plan = guarded(case, || optimizer::solve(&snapshot, &small_catalog(), &s))
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_eq!(
            placed(&plan),
            2,
            "case {case} ({strategy:?}): {:?}",
            plan.unschedulable
        );
    }
}

#[test]
fn solver_contradictory_nodepool() {
    expect_unschedulable(
        "solver_contradictory_nodepool",
        "solver-contradictory-nodepool.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_contradictory_pod() {
    expect_unschedulable(
        "solver_contradictory_pod",
        "solver-contradictory-pod.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_pod_too_large() {
    let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
    expect_unschedulable(
        "solver_pod_too_large",
        "solver-pod-too-large.yaml",
        &catalog,
        &[UnschedulableReason::LargerThanAnyType],
    );
}

#[test]
fn solver_unknown_label() {
    expect_unschedulable(
        "solver_unknown_label",
        "solver-unknown-label.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_nodepool_unknown_label() {
    expect_unschedulable(
        "solver_nodepool_unknown_label",
        "solver-nodepool-unknown-label.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_no_nodepool() {
    expect_unschedulable(
        "solver_no_nodepool",
        "solver-no-nodepool.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_zero_limits() {
    expect_unschedulable(
        "solver_zero_limits",
        "solver-zero-limits.yaml",
        &small_catalog(),
        &[UnschedulableReason::NodepoolLimit],
    );
}

#[test]
fn solver_untolerated_taint() {
    expect_unschedulable(
        "solver_untolerated_taint",
        "solver-untolerated-taint.yaml",
        &small_catalog(),
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

#[test]
fn solver_empty_catalog() {
    let catalog = Catalog::from_json(&read("catalog-empty.json"), "catalog-empty.json")
        .expect("empty catalog");
    expect_unschedulable(
        "solver_empty_catalog",
        "solver-empty-catalog.yaml",
        &catalog,
        &[UnschedulableReason::NoCompatibleOffering],
    );
}

/// The catalog with a u64::MAX memory_mib is accepted today (see `catalog_memory_overflow`); solving
/// with it must at least not crash, and the type can hold nothing.
#[test]
fn solver_catalog_memory_overflow_does_not_crash() {
    let case = "solver_catalog_memory_overflow_does_not_crash";
    let text = read("catalog-memory-overflow.json");
    let catalog = match Catalog::from_json(&text, "catalog-memory-overflow.json") {
        Ok(c) => c,
        Err(e) => {
            println!("{case}: catalog now rejected: {e}");
            return;
        }
    };
    let snapshot = parse_snapshot(
        &read("solver-empty-catalog.yaml"),
        "solver-empty-catalog.yaml",
    )
    .unwrap();
    let plan = guarded(case, || optimizer::solve(&snapshot, &catalog, &settings()))
        .unwrap_or_else(|e| panic!("case {case}: {e}"));
    println!(
        "{case}: placed {}, unschedulable {:?}",
        placed(&plan),
        plan.unschedulable
            .iter()
            .map(|u| u.reason)
            .collect::<Vec<_>>()
    );
}

// ------------------------------------------------------------------ the binary

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `joiner` with a deadline; a hang fails the case (the child is killed), a signal shows as a
/// missing exit code.
fn joiner(case: &str, args: &[&std::ffi::OsStr], timeout: Duration) -> Run {
    let dir = std::env::temp_dir().join(format!("joiner-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join(format!("{case}.out"));
    let err_path = dir.join(format!("{case}.err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .args(args)
        .env_remove("JOINER_GAP")
        .env_remove("JOINER_TIME_LIMIT")
        .env_remove("JOINER_THREADS")
        .env_remove("JOINER_CATALOG")
        .env_remove("JOINER_REGION")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("the joiner binary runs");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("case {case}: joiner did not finish within {timeout:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&std::fs::read(&out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap()).into_owned(),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    run
}

/// `joiner <args>` must exit non-zero (not by a signal) with `error: ...` naming every fragment.
fn expect_cli_error(case: &str, args: &[&std::ffi::OsStr], fragments: &[&str]) {
    let run = joiner(case, args, Duration::from_secs(120));
    println!("{case}: exit {:?}, stderr:\n{}", run.code, run.stderr);
    assert!(
        !run.stderr.contains("panicked"),
        "case {case}: joiner panicked:\n{}",
        run.stderr
    );
    let code = run.code.unwrap_or_else(|| {
        panic!(
            "case {case}: joiner was killed by a signal:\n{}",
            run.stderr
        )
    });
    assert_ne!(
        code, 0,
        "case {case}: joiner succeeded on bad input; stdout:\n{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("error: "),
        "case {case}: no `error:` line:\n{}",
        run.stderr
    );
    assert_fragments(case, &run.stderr, fragments);
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

fn solve_args<'a>(snapshot: &'a Path, extra: &[&'a str]) -> Vec<&'a std::ffi::OsStr> {
    let mut args = vec![os("solve"), os("--snapshot"), snapshot.as_os_str()];
    args.extend(extra.iter().map(|&s| os(s)));
    args
}

#[test]
fn cli_negative_cpu() {
    let f = fixture("quantity-negative-cpu.yaml");
    expect_cli_error("cli_negative_cpu", &solve_args(&f, &[]), &[
        "error: Pod shop/quantity-negative-cpu: spec.containers[0].resources.requests.cpu: negative quantity \"-1\"",
    ]);
}

#[test]
fn cli_unknown_operator() {
    let f = fixture("requirement-unknown-operator.yaml");
    expect_cli_error("cli_unknown_operator", &solve_args(&f, &[]), &[
        "NodePool requirement-unknown-operator: spec.template.spec.requirements[1].operator: unknown operator \"Sometimes\"",
    ]);
}

#[test]
fn cli_invalid_yaml() {
    let f = fixture("yaml-unclosed-flow.yaml");
    expect_cli_error(
        "cli_invalid_yaml",
        &solve_args(&f, &[]),
        &["yaml-unclosed-flow.yaml: document 2: malformed yaml:"],
    );
}

#[test]
fn cli_binary_garbage() {
    let f = fixture("binary-garbage.bin");
    expect_cli_error(
        "cli_binary_garbage",
        &solve_args(&f, &[]),
        &["cannot read", "binary-garbage.bin"],
    );
}

#[test]
fn cli_missing_file() {
    let f = fixture("does-not-exist.yaml");
    expect_cli_error(
        "cli_missing_file",
        &solve_args(&f, &[]),
        &["cannot read", "does-not-exist.yaml"],
    );
}

#[test]
fn cli_alias_bomb() {
    let f = fixture("yaml-alias-bomb.yaml");
    expect_cli_error(
        "cli_alias_bomb",
        &solve_args(&f, &[]),
        &["yaml-alias-bomb.yaml: document 1: malformed yaml:"],
    );
}

#[test]
fn cli_deeply_nested() {
    let dir = std::env::temp_dir().join(format!("joiner-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("nested.yaml");
    std::fs::write(
        &f,
        format!("{}{}\n", "[".repeat(10_000), "]".repeat(10_000)),
    )
    .unwrap();
    expect_cli_error(
        "cli_deeply_nested",
        &solve_args(&f, &[]),
        &[
            "nested.yaml: document 1: malformed yaml:",
            "recursion limit exceeded",
        ],
    );
    let _ = std::fs::remove_file(f);
}

#[test]
fn cli_bad_catalog() {
    let f = fixture("solver-no-nodepool.yaml");
    let c = fixture("catalog-negative-price.json");
    let mut args = solve_args(&f, &["--catalog"]);
    args.push(c.as_os_str());
    expect_cli_error("cli_bad_catalog", &args, &["catalog: instance type \"t.large\": offerings[0].price -0.1 is not a non-negative number"]);
}

#[test]
fn cli_catalog_garbage() {
    let f = fixture("solver-no-nodepool.yaml");
    let c = fixture("binary-garbage.bin");
    let mut args = solve_args(&f, &["--catalog"]);
    args.push(c.as_os_str());
    expect_cli_error(
        "cli_catalog_garbage",
        &args,
        &["catalog", "binary-garbage.bin"],
    );
}

/// The OS error is printed once: `SnapshotError::Read`/`CatalogError::Read` put it in their message
/// and do not also expose it as a `source`, which `main` would print again with `{e:#}`.
#[test]
fn cli_read_error_not_repeated() {
    let case = "cli_read_error_not_repeated";
    let f = fixture("does-not-exist.yaml");
    let run = joiner(case, &solve_args(&f, &[]), Duration::from_secs(60));
    assert_eq!(
        run.stderr.matches("No such file or directory").count(),
        1,
        "case {case}: {}",
        run.stderr
    );
}

#[test]
fn cli_unknown_region() {
    let f = fixture("solver-no-nodepool.yaml");
    expect_cli_error(
        "cli_unknown_region",
        &solve_args(&f, &["--region", "mars-1"]),
        &["no bundled catalog for region \"mars-1\""],
    );
}

#[test]
fn cli_time_limit_nan() {
    let f = fixture("solver-no-nodepool.yaml");
    expect_cli_error(
        "cli_time_limit_nan",
        &solve_args(&f, &["--time-limit", "NaN"]),
        &["--time-limit must be a positive number of seconds"],
    );
}

#[test]
fn cli_time_limit_huge() {
    let f = fixture("solver-no-nodepool.yaml");
    expect_cli_error(
        "cli_time_limit_huge",
        &solve_args(&f, &["--time-limit", "1e20"]),
        &["time-limit"],
    );
}

#[test]
fn cli_gap_out_of_range() {
    let f = fixture("solver-no-nodepool.yaml");
    expect_cli_error(
        "cli_gap_out_of_range",
        &solve_args(&f, &["--gap", "5"]),
        &["gap 5 is not in [0, 1)"],
    );
}

#[test]
fn cli_threads_zero() {
    let f = fixture("solver-no-nodepool.yaml");
    expect_cli_error(
        "cli_threads_zero",
        &solve_args(&f, &["--threads", "0"]),
        &["threads must be at least 1"],
    );
}

#[test]
fn cli_simulate_bad_scenario() {
    let f = fixture("scenario-unknown-event-kind.yaml");
    let out = std::env::temp_dir().join(format!("joiner-bad-input-{}-sim", std::process::id()));
    let args = [
        os("simulate"),
        os("--scenario"),
        f.as_os_str(),
        os("--out"),
        out.as_os_str(),
    ];
    expect_cli_error(
        "cli_simulate_bad_scenario",
        &args,
        &["events[0].kind: unknown event kind \"explode\""],
    );
}

/// End to end, an input that parses but cannot be satisfied: exit 3 (pods left unschedulable) and a
/// JSON plan that reports the pod.
#[test]
fn cli_pod_too_large_is_reported_unschedulable() {
    let case = "cli_pod_too_large_is_reported_unschedulable";
    let f = fixture("solver-pod-too-large.yaml");
    let run = joiner(
        case,
        &solve_args(
            &f,
            &["--output", "json", "--threads", "1", "--time-limit", "20"],
        ),
        Duration::from_secs(120),
    );
    assert!(
        !run.stderr.contains("panicked"),
        "case {case}: joiner panicked:\n{}",
        run.stderr
    );
    assert_eq!(run.code, Some(3), "case {case}: stderr:\n{}", run.stderr);
    let plan: Plan = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("case {case}: plan JSON: {e}\n{}", run.stdout));
    assert_eq!(
        plan.unschedulable.len(),
        1,
        "case {case}: {:?}",
        plan.unschedulable
    );
    assert_eq!(
        plan.unschedulable[0].reason,
        UnschedulableReason::LargerThanAnyType,
        "case {case}"
    );
    println!("{case}: {}", plan.unschedulable[0].message);
}
