//! The subcommands other than the experiment itself, one file each: `init` (here), `results`,
//! `status`, `sweep`, `show`, `plot`, `simulate`, `retry` and `gc`.

pub mod completions;
pub mod detect;
pub mod gate;
pub mod gc;
pub mod guard;
pub mod inspect;
pub mod json;
pub mod plot;
pub mod pythonpath;
pub mod recover;
pub mod results;
pub mod retry;
pub mod show;
pub mod simulate;
pub mod status;
pub mod sweep;
pub mod worker;

use crate::cli::InitArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::vcs::Repo;
use std::path::Path;

pub fn init(dir: &Path, args: &InitArgs) -> Result<()> {
    let root = match Repo::discover(dir) {
        Ok(r) => r.root().to_path_buf(),
        Err(_) => dir.to_path_buf(),
    };
    let path = config::path_in(&root);
    if path.exists() && !args.force {
        return Err(Error::config(format!("{} already exists", path.display())).hint("pass --force to overwrite it"));
    }
    let (preset, detected) = match &args.preset {
        Some(p) => (p.clone(), None),
        None => match detect::detect() {
            Some((p, from)) => (p.to_string(), Some(format!("detected {from}"))),
            None => ("cpu".to_string(), Some("no TPU or known GPU detected: nominal CPU figures; pass --preset to choose".to_string())),
        },
    };
    if crate::hardware::preset(&preset).is_none() {
        return Err(Error::usage(format!("unknown hardware preset {preset:?}; known: {}", crate::hardware::preset_names().join(", "))));
    }
    let has_prepare = root.join("prepare.py").exists();
    let command = match (&args.command, has_prepare) {
        (Some(c), _) => c.clone(),
        (None, true) => "python3 prepare.py".to_string(),
        (None, false) => {
            return Err(Error::usage(format!("no prepare.py in {}, so ratchet cannot guess the benchmark command", root.display()))
                .hint("pass it: ratchet init --command \"python3 bench.py\""))
        }
    };
    let text = config::template(&command, &preset);
    crate::store::write_atomic(&path, text.as_bytes())?;
    println!(
        "wrote {} (benchmark: {command}; hardware: {preset}{})",
        path.display(),
        detected.map(|d| format!(", {d}")).unwrap_or_default()
    );
    if has_prepare {
        println!("found prepare.py: it should follow the benchmark protocol (docs/protocol.md), or print RESULT: lines");
    }
    Ok(())
}
