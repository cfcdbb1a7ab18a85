//! `ratchet completions SHELL` and `ratchet man`: shell completions and a man page generated from
//! the clap definitions, so they never drift from the real flags.

use crate::cli::args::Cli;
use crate::error::Result;
use clap::CommandFactory;

/// Print the completion script for `shell` (bash, zsh, fish, elvish, powershell).
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "ratchet", &mut std::io::stdout());
    Ok(())
}

/// Print the man page (roff) of `ratchet`: `ratchet man > ratchet.1`.
pub fn man() -> Result<()> {
    let mut out = vec![];
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    use std::io::Write;
    std::io::stdout().write_all(&out)?;
    Ok(())
}
