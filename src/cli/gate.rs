//! `ratchet gate`: the CI face of [`crate::gate`]: runs it, prints the Markdown (or one JSON
//! object) and fails with exit 7 on a regression.

use crate::cli::args::GateArgs;
use crate::error::Result;
use crate::gate::{regression_error, run, Options};
use crate::workspace::{command_line, Workspace};
use std::path::Path;

pub use crate::gate::{leftovers, remove_leftovers, GateReport};

/// `ratchet gate`: run it, print the Markdown (or, with `--json`, one JSON object while the
/// text goes to stderr) and fail with exit 7 on a regression.
pub fn command(dir: &Path, args: &GateArgs) -> Result<()> {
    crate::signals::install()?;
    let mut out = if args.json { super::json::JsonOut::take_stdout() } else { None };
    // The runs' progress is drawn as for an experiment (to stderr under --json).
    let mut ui = crate::cli::ui::Text::new();
    let result = Workspace::discover(dir).and_then(|ws| ws.lock(&command_line(), &mut ui)).and_then(|ws| {
        let mut fx = crate::events::Effects::new(&mut ui, crate::signals::Cancel::signals());
        let opts = Options { base: args.base.clone(), head: args.head.clone(), threshold: args.threshold, pairs: args.pairs };
        run(&ws, &opts, &mut crate::bench::executor::ProcessExecutor, &mut fx)
    });
    drop(ui);
    match (&result, out.as_mut()) {
        (Ok(r), Some(o)) => o.emit(&super::json::envelope("gate", serde_json::to_value(r).expect("json"))),
        // The comment quotes commit messages; on a terminal they are printable (the JSON keeps them).
        (Ok(r), None) => println!("{}", crate::printable::block(&r.markdown)),
        (Err(e), Some(o)) => o.emit(&super::json::error(e)),
        (Err(_), None) => {}
    }
    let r = result?;
    if r.passed {
        Ok(())
    } else {
        Err(regression_error(&r))
    }
}
