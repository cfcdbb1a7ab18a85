//! The `ratchet` binary: everything lives in the library; this only maps its result to an exit code.

fn main() {
    // Printing to a closed pipe (`ratchet ... | head -1`) must not abort an experiment.
    let relay = ratchet::output::Relay::install();
    let code = ratchet::main_with_args(std::env::args_os());
    relay.finish();
    std::process::exit(code);
}
