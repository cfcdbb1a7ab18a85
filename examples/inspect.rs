//! Stand-alone `inspect` for trying the trace reader before it is wired into the `ratchet`
//! CLI: `cargo run --example inspect -- PATH [--json] [--kernel PATTERN] ...`.

use clap::Parser;
use ratchet::trace::inspect::{run_inspect, InspectArgs};

#[derive(Parser)]
#[command(name = "inspect", about = "Diagnose a profiler capture (ratchet inspect)")]
struct Cli {
    #[command(flatten)]
    args: InspectArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run_inspect(&cli.args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
