//! Durations and schedules as NodePools and scenarios write them: Go durations (`1h30m`), the
//! nillable `Never`, RFC 3339 timestamps and budget cron schedules. Parsing never panics.
#![no_main]

use joiner::disruption::timing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(d) = timing::parse_go_duration(text) {
        // Go's own limit, which the parser promises to keep
        assert!(d.as_nanos() <= i64::MAX as u128, "{text:?} parsed to {d:?}");
    }
    let _ = timing::parse_nillable(text);
    let _ = timing::parse_timestamp(text);
    let _ = timing::check_schedule(text);
    let _ = joiner::api::parse_duration(text);
    let _ = joiner::api::parse_nillable_duration(text);
});
