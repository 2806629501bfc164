//! Criterion benchmarks of the decision core on Karpenter's diverse pod mix against the bundled
//! us-east-1 catalog: the greedy baseline and the MILP in the same run, so their ratio is measured on
//! the same machine at the same time.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use joiner::catalog::Catalog;
use joiner::optimizer::{solve, SolveSettings, Strategy};

fn diverse(c: &mut Criterion) {
    let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
    let mut group = c.benchmark_group("diverse");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    // the MILP gets 1 s, the target for 1,000 pods; `joiner bench` reports plan cost and bound
    for pods in [100usize, 1000] {
        let snapshot = joiner::workload::diverse(pods, 42);
        for strategy in [Strategy::Greedy, Strategy::Milp] {
            let settings = SolveSettings {
                strategy,
                time_limit: Duration::from_secs(1),
                ..Default::default()
            };
            group.bench_with_input(
                BenchmarkId::new(format!("{strategy:?}").to_lowercase(), pods),
                &snapshot,
                |b, s| b.iter(|| solve(s, &catalog, &settings).expect("solve")),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, diverse);
criterion_main!(benches);
