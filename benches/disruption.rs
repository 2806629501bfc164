//! Criterion benchmarks of one disruption decision on the scale-in cluster (`joiner::scalein`, 50
//! nodes, 500 pods left after a 60% drop) against the bundled us-east-1 catalog: joiner's MILP and
//! one pass of Karpenter's baseline in the same run. `joiner bench-disruption` reports costs, bounds
//! and evictions; this measures time only.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use joiner::catalog::Catalog;
use joiner::disruption::{consolidate, timing, DisruptionSettings, DisruptionStrategy};

fn scale_in(c: &mut Criterion) {
    let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
    let snapshot = joiner::scalein::scale_in(50, 500, 0.6, 1, &catalog);
    let now = timing::parse_timestamp(joiner::scalein::NOW).expect("fixed clock");
    let mut group = c.benchmark_group("scale_in_50");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for strategy in [DisruptionStrategy::Milp, DisruptionStrategy::Baseline] {
        let settings = DisruptionSettings {
            strategy,
            time_limit: Duration::from_secs(2),
            ..DisruptionSettings::new(now)
        };
        group.bench_function(format!("{strategy:?}").to_lowercase(), |b| {
            b.iter(|| consolidate(&snapshot, &catalog, &settings).expect("consolidate"))
        });
    }
    group.finish();
}

criterion_group!(benches, scale_in);
criterion_main!(benches);
