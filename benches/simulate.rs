//! Criterion benchmarks of whole simulation runs: the small scenarios of fixtures/scenarios/simulate
//! (a scale-down with consolidation; capacity shortages and a spot interruption), joiner's
//! strategy and Karpenter's in the same run. `joiner simulate` reports the bundled default's
//! wall-clock time per strategy; this measures the simulator and the decisions it calls, time only.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use joiner::sim::{self, Scenario, SimStrategy};

fn runs(c: &mut Criterion) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/simulate");
    for name in ["scale-down", "spot-interruption-and-ice"] {
        let scenario = Scenario::load(&dir.join(format!("{name}.yaml"))).expect("bundled scenario");
        let mut group = c.benchmark_group(name);
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(10));
        for strategy in [SimStrategy::Milp, SimStrategy::Greedy] {
            group.bench_function(strategy.as_str(), |b| {
                b.iter(|| sim::run(&scenario, strategy, scenario.seed, &mut |_| {}).expect("run"))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, runs);
criterion_main!(benches);
