//! Writes the benchmark's diverse workload as a snapshot YAML: `cargo run --example gen_workload -- N SEED`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let seed = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(42);
    print!(
        "{}",
        joiner::workload::to_yaml(&joiner::workload::diverse(n, seed))
    );
}
