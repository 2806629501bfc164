//! Kubernetes quantities (`250m`, `1.5Gi`, `2e3`): parsing never panics, and whatever parses
//! survives a round trip through both of its printed forms unchanged.
#![no_main]

use joiner::domain::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(q) = Quantity::parse(text) else { return };
    for printed in [q.to_canonical(), q.to_binary(), q.to_string()] {
        let again = Quantity::parse(&printed).unwrap_or_else(|e| {
            panic!("{text:?} parsed to {q:?}, printed as {printed:?}, which fails: {e}")
        });
        assert_eq!(again, q, "{text:?} printed as {printed:?}");
    }
});
