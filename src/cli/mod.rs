//! The command line's face of the library: [`main_with_args`] parses the arguments ([`args`]) and
//! dispatches each subcommand to its file here (one file per command), rendering the core's events
//! as text ([`ui`]) for the terminal ([`term`]); the core never sees clap types.

pub mod args;
#[doc(hidden)]
pub mod output;
pub(crate) mod term;
pub mod ui;

pub mod completions;
pub mod detect;
pub mod gate;
pub mod gc;
pub mod guard;
pub mod init;
pub mod inspect;
pub mod json;
pub mod plot;
pub mod pythonpath;
pub mod recover;
pub mod replay;
pub mod results;
pub mod retry;
pub mod show;
pub mod status;
pub mod sweep;
pub mod worker;

use crate::error::{self, Error, Result};
use crate::events::{self, Effects};
use crate::signals::{self, Cancel};
use crate::workspace::{command_line, Locked, Workspace};
use crate::{bench, experiment};
use args::{Cli, Command};

/// Parse the command line and run it; returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let subcommands = guard::subcommand_names();
    let args = guard::normalize_args(args.into_iter().collect(), &subcommands);
    let color = match guard::color_choice(&args) {
        term::ColorChoice::Auto => clap::ColorChoice::Auto,
        term::ColorChoice::Always => clap::ColorChoice::Always,
        term::ColorChoice::Never => clap::ColorChoice::Never,
    };
    let parsed = {
        use clap::{CommandFactory, FromArgMatches};
        Cli::command().color(color).try_get_matches_from(args.clone()).and_then(|m| Cli::from_arg_matches(&m))
    };
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            if e.use_stderr() {
                if let Some(typo) = guard::mistyped_subcommand(&args, &subcommands) {
                    eprintln!("error: {}", crate::printable::block(&typo.to_string()));
                    return error::exit::USAGE;
                }
            }
            let _ = e.print();
            return if e.use_stderr() { error::exit::USAGE } else { 0 };
        }
    };
    match dispatch(cli) {
        Ok(()) => 0,
        Err(e) => {
            // An error may quote a message, a file name or a config key: printable, as all else.
            eprintln!("error: {}", crate::printable::block(&e.to_string()));
            e.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    term::set_color_choice(cli.color);
    ui::set_verbosity(if cli.quiet {
        ui::Verbosity::Quiet
    } else if cli.verbose {
        ui::Verbosity::Verbose
    } else {
        ui::Verbosity::Normal
    });
    let dir = match &cli.experiment.repo.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    match cli.command {
        Some(Command::Init(a)) => init::run(&dir, &a),
        Some(Command::Results(a)) => results::run(&Workspace::discover(&dir)?, &a),
        Some(Command::Status(a)) => status::run(&Workspace::discover(&dir)?, a.json),
        Some(Command::Recover) => recover::run(&lock_repo(&dir, &mut ui::Text::new())?),
        Some(Command::Sweep(a)) => {
            signals::install()?;
            json::recorded(
                &dir,
                a.json,
                || {
                    let mut ui = ui::Text::new();
                    let ws = lock_repo(&dir, &mut ui)?;
                    sweep::run(&dir, &ws, &a, &mut Effects::new(&mut ui, Cancel::signals()))
                },
                |o, rows| Some(json::sweep(o, rows)),
            )
            .map(|_| ())
        }
        Some(Command::Show(a)) => show::run(&Workspace::discover(&dir)?, &a),
        Some(Command::Replay(a)) => replay::run(&Workspace::discover(&dir)?, &a),
        Some(Command::Plot(a)) => plot::run(&Workspace::discover(&dir)?, &dir, &a),
        Some(Command::Inspect(mut a)) => {
            // Inside a ratchet repo, its configured hardware completes the roofline.
            let start = if a.path.is_dir() { a.path.clone() } else { dir.clone() };
            if let Ok(ws) = Workspace::discover(&start) {
                a.config_hardware = ws.config().ok().and_then(|c| c.hardware());
            }
            inspect::run_inspect(&a).map_err(Error::from)
        }
        Some(Command::Gate(a)) => gate::command(&dir, &a),
        Some(Command::Worker(a)) => worker::run(cli.experiment.repo.dir.as_deref(), &a),
        Some(Command::Calibrate(a)) => {
            signals::install()?;
            json::calibrate(&dir, &a)
        }
        Some(Command::Run(a)) => experiment_cmd(&dir, a.message, &a.flags, false),
        Some(Command::Completions { shell }) => completions::completions(shell),
        Some(Command::Man { subcommand }) => completions::man(subcommand.as_deref()),
        Some(Command::Pythonpath) => pythonpath::run(&Workspace::discover(&dir)?),
        Some(Command::Gc(a)) => {
            let ws = lock_repo(&dir, &mut ui::Text::new())?;
            gc::run(&ws, &a)
        }
        Some(Command::Retry(a)) => {
            let message = {
                let ws = lock_repo(&dir, &mut ui::Text::new())?;
                retry::apply(&ws, &a)?
            };
            if !(a.run || a.pairs.is_some()) {
                return Ok(());
            }
            experiment_cmd(
                &dir,
                message,
                &args::ExperimentFlags { pairs: a.pairs, allow_large: a.allow_large, ..Default::default() },
                false,
            )
        }
        None => {
            let e = cli.experiment;
            let Some(message) = e.message else {
                return Err(Error::usage("no experiment message given")
                    .hint("ratchet \"experiment: bump BQ to 512\" runs one; ratchet --help lists the subcommands"));
            };
            experiment_cmd(&dir, message, &e.flags, true)
        }
    }
}

/// Take the repo's lock for a command that changes the branch or the results.
pub(crate) fn lock_repo(dir: &std::path::Path, events: &mut dyn events::Events) -> Result<Locked> {
    Workspace::discover(dir)?.lock(&command_line(), events)
}

/// `guard`: refuse a message that looks like a mistyped subcommand (`ratchet MSG`; an explicit
/// `ratchet run MSG` means it).
fn experiment_cmd(dir: &std::path::Path, message: String, flags: &args::ExperimentFlags, guard: bool) -> Result<()> {
    let op = || {
        if guard {
            guard::check_message(&message, &guard::subcommand_names())?;
        }
        experiment_cmd_text(dir, message.clone(), flags)
    };
    json::recorded(dir, flags.json, op, |_, _| None)
}

fn experiment_cmd_text(dir: &std::path::Path, message: String, flags: &args::ExperimentFlags) -> Result<()> {
    signals::install()?;
    let mut ui = ui::Text::new();
    let ws = lock_repo(dir, &mut ui)?;
    let mut fx = Effects::new(&mut ui, Cancel::signals());
    crate::sweep::recover(&ws, &mut fx)?;
    // A stopped parallel sweep's workers must not run beside this experiment's benchmark.
    crate::scale::controller::recover(&ws, &mut fx)?;
    let (message, deep_suffix) = experiment::split_deep_suffix(&message);
    let opts = experiment::Options {
        message,
        deep: flags.deep || deep_suffix,
        allow_empty: flags.allow_empty,
        pairs: flags.pairs,
        allow_large: flags.allow_large,
        ..Default::default()
    };
    experiment::run(&ws, &opts, &mut bench::executor::ProcessExecutor, &mut fx)?.into_result()?;
    Ok(())
}
