//! The `ratchet` binary: everything lives in the library; this only maps its result to an exit code.

fn main() {
    // Printing to a closed pipe (`ratchet ... | head -1`) must not abort an experiment.
    let relay = ratchet::cli::output::Relay::install();
    // A panic's message goes through the relay too: it is flushed before the exit (101, as Rust's).
    let code = std::panic::catch_unwind(|| ratchet::cli::main_with_args(std::env::args_os())).unwrap_or(101);
    relay.finish();
    std::process::exit(code);
}
