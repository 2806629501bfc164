//! Cluster snapshots (`kubectl get -o yaml` streams and `kind: List`): any text either reads into a
//! snapshot or gets an error naming the object and field, and a snapshot that reads can be planned
//! (greedy, so an input runs in milliseconds) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|text: &str| {
    let Ok(snapshot) = joiner::snapshot::parse_snapshot(text, "fuzz.yaml") else {
        return;
    };
    common::plan(snapshot, common::catalog());
});
