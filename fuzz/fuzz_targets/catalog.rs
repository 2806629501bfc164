//! Catalog files (docs/catalog.md), which users write by hand for what-ifs: any text either loads or
//! gets an error, and a catalog that loads can be planned against without panicking.
#![no_main]

use joiner::catalog::Catalog;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|text: &str| {
    let Ok(catalog) = Catalog::from_json(text, "fuzz.json") else {
        return;
    };
    common::plan(common::small_snapshot(), &catalog);
});
