//! What the benchmarks share (included by each with `#[path]`: a bench is its own crate).

/// The arguments this benchmark was given when `cargo bench` runs it, cargo's own flags left
/// out. `cargo bench` passes `--bench`; `cargo test --benches` (or `--all-targets`) does not,
/// and a test run must not start a benchmark: then this says how to run it and gives `None`.
pub fn bench_args(name: &str) -> Option<Vec<String>> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if !all.iter().any(|a| a == "--bench") {
        eprintln!("{name}: run it with `cargo bench --bench {name}` (a benchmark, not a test)");
        return None;
    }
    Some(all.into_iter().filter(|a| !a.starts_with("--")).collect())
}
