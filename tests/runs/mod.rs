//! One benchmark run: the process, its signals and faults, the preflight, the real example.

mod compiler_figures;
mod disk_full;
mod dying_ratchet;
mod escaping_benchmarks;
mod forked_runs;
mod harness_shadowing;
mod hostile_benchmarks;
mod machine_faults;
mod preflight;
mod python_helper_import;
mod real_example;
mod run_environment;
mod signals_and_pipes;
mod trace_depth;
