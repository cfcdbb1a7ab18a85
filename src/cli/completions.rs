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

/// Print the man page (roff) of `ratchet` (`ratchet man > ratchet.1`) or of one subcommand
/// (`ratchet man show > ratchet-show.1`): every page the main page lists as `ratchet-NAME(1)`.
pub fn man(subcommand: Option<&str>) -> Result<()> {
    // clap's own `help` subcommand is no page of its own: `--help` is on every page.
    let cmd = Cli::command().disable_help_subcommand(true);
    let page = match subcommand {
        None => cmd,
        Some(name) => {
            let Some(sub) = cmd.find_subcommand(name) else {
                let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
                return Err(crate::error::Error::usage(format!("no subcommand {name:?} has a page; the pages: {}", names.join(", "))));
            };
            sub.clone().display_name(format!("ratchet-{name}")).bin_name(format!("ratchet {name}"))
        }
    };
    let mut out = vec![];
    clap_mangen::Man::new(page).render(&mut out)?;
    use std::io::Write;
    std::io::stdout().write_all(&out)?;
    Ok(())
}
