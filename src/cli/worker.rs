//! `ratchet worker`: the command-line face of [`crate::scale::worker`], run by engines (local
//! slots, Slurm, a hook) and scripts. Its output is the run directory; its log goes to stderr.

use crate::cli::args::WorkerArgs;
use crate::error::{Error, Result};
use crate::events::Effects;
use crate::scale::trial::TrialEnd;
use crate::scale::worker::{self, WorkerOptions};
use crate::signals::Cancel;
use std::path::Path;

pub fn run(repo: Option<&Path>, a: &WorkerArgs) -> Result<()> {
    let Some(repo) = repo else {
        return Err(Error::usage("ratchet worker needs --repo R: the repository (or git bundle) holding both commits"));
    };
    crate::signals::install()?;
    let cwd = std::env::current_dir()?;
    let abs = |p: &Path| if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
    let scale = |arg: &Option<String>, flag: &str| {
        arg.as_deref().map(worker::parse_noise).transpose().map_err(|e| Error::usage(format!("{flag}: {e}")))
    };
    let (noise_scale, sums_scale) = (scale(&a.noise_scale, "--noise-scale")?, scale(&a.sums_scale, "--sums-scale")?);
    if sums_scale.is_some() && noise_scale.is_none() {
        return Err(Error::usage("--sums-scale is read beside a borrowed scale: give --noise-scale too"));
    }
    let opts = WorkerOptions {
        repo: abs(repo),
        incumbent: a.incumbent.clone(),
        candidate: a.candidate.clone(),
        out: abs(&a.out),
        id: a.id.clone(),
        config: a.config.as_deref().map(abs),
        pairs: a.pairs,
        noise_scale,
        sums_scale,
        recheck: a.recheck,
        deep: a.deep,
        work: None,
    };
    let mut ui = crate::cli::ui::Text::new();
    let result = worker::run(&opts, &mut crate::bench::executor::ProcessExecutor, &mut Effects::new(&mut ui, Cancel::signals()))?;
    eprintln!(
        "worker: trial {} ended ({:?}) after {} runs; {} written",
        result.id,
        result.end,
        result.runs,
        opts.out.join(crate::scale::trial::RESULT_FILE).display()
    );
    if result.end == TrialEnd::Interrupted {
        return Err(Error::interrupted().hint("the trial's result says interrupted; the controller runs it again"));
    }
    Ok(())
}
