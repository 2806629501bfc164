//! The cost-weight ConfigMap's `data`, as a map and as the ConfigMap object in a snapshot: every
//! entry either applies or is refused with an error naming it, and accepted weights are finite and
//! non-negative.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: BTreeMap<String, String>| {
    if let Ok(w) = joiner::domain::CostWeights::from_data(&data) {
        let fields = serde_json::to_value(&w).expect("weights serialise");
        for (k, v) in fields.as_object().expect("object") {
            let x = v.as_f64().unwrap_or(f64::NAN);
            assert!(
                x.is_finite() && x >= 0.0,
                "accepted {k} = {v} from {data:?}"
            );
        }
        let mut snapshot = common::small_snapshot();
        snapshot.weights = w;
        common::plan(snapshot, common::catalog());
    }
    let map: serde_yaml_ng::Mapping = data
        .iter()
        .map(|(k, v)| (k.clone().into(), v.clone().into()))
        .collect();
    let doc = serde_yaml_ng::to_string(&serde_yaml_ng::Value::Mapping(
        [
            ("apiVersion".into(), "v1".into()),
            ("kind".into(), "ConfigMap".into()),
            (
                "metadata".into(),
                serde_yaml_ng::Value::Mapping(
                    [
                        ("name".into(), "joiner-cost-weights".into()),
                        ("namespace".into(), "joiner".into()),
                    ]
                    .into_iter()
                    .collect(),
                ),
            ),
            ("data".into(), serde_yaml_ng::Value::Mapping(map)),
        ]
        .into_iter()
        .collect(),
    ))
    .expect("yaml");
    let _ = joiner::snapshot::parse_snapshot(&doc, "fuzz.yaml");
});
