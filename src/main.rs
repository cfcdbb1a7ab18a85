//! The `ratchet` binary: everything lives in the library; this only maps its result to an exit code.

fn main() {
    std::process::exit(ratchet::main_with_args(std::env::args_os()));
}
