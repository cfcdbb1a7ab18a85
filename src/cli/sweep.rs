//! `ratchet sweep`: the command-line face of [`crate::sweep`].

use crate::cli::args::SweepArgs;
use crate::error::{Error, Result};
use crate::events::Effects;
use crate::scale::engine::{Engine, JobHandle, JobState, TrialSpec};
use crate::sweep::{self, SweepOptions};
use crate::workspace::Locked;
use std::path::Path;

pub fn run(dir: &Path, ws: &Locked, args: &SweepArgs, fx: &mut Effects) -> Result<sweep::SweepOutcome> {
    crate::signals::install()?;
    let max_wall = args.max_wall.as_deref().map(sweep::parse_duration).transpose().map_err(|e| Error::usage(format!("--max-wall: {e}")))?;
    if args.pairs.is_some_and(|p| p < 2) {
        return Err(Error::usage("--pairs must be at least 2: a paired test needs two pairs"));
    }
    // Relative paths are the user's, from where they ran ratchet.
    let paths = args.paths.iter().map(|p| if p.is_absolute() { p.clone() } else { dir.join(p) }).collect();
    let opts = SweepOptions { paths, max_wall, max_runs: args.max_runs, deep: args.deep, pairs: args.pairs };
    // Parallel trials only when asked for: --jobs, [devices], or an external
    // [engine] in ratchet.toml (Slurm, hooks), whose generated files go under the state dir.
    let cfg = ws.config()?;
    if let Some(engine) = crate::scale::engine_from_config(&cfg.engine, ws.root(), &ws.state_dir)? {
        if args.jobs == Some(0) {
            return Err(Error::usage("--jobs 0: give at least 1 trial in flight"));
        }
        let mut engine = Capped { engine, cap: args.jobs };
        return crate::scale::controller::run(ws, &opts, &mut engine, fx);
    }
    let devices = cfg.devices;
    if args.jobs.is_some() || devices.is_some() {
        let slots = crate::scale::local::slots(devices.as_ref(), args.jobs)?;
        crate::scale::local::check_host_cpus(&slots)?;
        let mut engine = crate::scale::local::LocalEngine::new(slots, &ws.state_dir);
        return crate::scale::controller::run(ws, &opts, &mut engine, fx);
    }
    // A parallel sweep stopped before: its workers are stopped and its recording finished first.
    crate::scale::controller::recover(ws, fx)?;
    sweep::run(ws, &opts, &mut crate::bench::executor::ProcessExecutor, fx)
}

/// An external engine with at most `--jobs` trials in flight (its own capacity otherwise).
struct Capped {
    engine: Box<dyn Engine>,
    cap: Option<usize>,
}

impl Engine for Capped {
    fn name(&self) -> &str {
        self.engine.name()
    }
    fn capacity(&self) -> usize {
        self.cap.map_or(self.engine.capacity(), |c| c.min(self.engine.capacity()))
    }
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        self.engine.submit(trials, worker)
    }
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        self.engine.poll(job)
    }
    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        self.engine.cancel(job)
    }
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        self.engine.stop(job)
    }
    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        self.engine.stopped(job)
    }
    fn fetch(&mut self, job: &JobHandle, trial: &TrialSpec) -> Result<()> {
        self.engine.fetch(job, trial)
    }
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        self.engine.find(trial)
    }
    fn next_device(&self) -> Option<String> {
        self.engine.next_device()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that only has a capacity (the wrapper passes everything else through).
    struct Slots(usize);

    impl Engine for Slots {
        fn name(&self) -> &str {
            "slots"
        }
        fn capacity(&self) -> usize {
            self.0
        }
        fn submit(&mut self, _: &[TrialSpec], _: &[Vec<String>]) -> Result<Vec<JobHandle>> {
            Ok(vec![])
        }
        fn poll(&mut self, _: &JobHandle) -> Result<JobState> {
            Ok(JobState::Finished)
        }
        fn cancel(&mut self, _: &JobHandle) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn jobs_lowers_an_external_engines_capacity_but_never_raises_it() {
        let cap = |engine: usize, jobs: Option<usize>| Capped { engine: Box::new(Slots(engine)), cap: jobs }.capacity();
        assert_eq!(cap(8, None), 8);
        assert_eq!(cap(8, Some(3)), 3);
        assert_eq!(cap(2, Some(5)), 2);
        assert_eq!(Capped { engine: Box::new(Slots(1)), cap: None }.name(), "slots");
    }
}
