//! Simulation scenario files (docs/simulate.md): any text either reads into a scenario or gets an
//! error naming the field; nothing panics. Running a scenario is left out: it is minutes of work.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = joiner::sim::Scenario::parse(text, "fuzz.yaml", None);
});
