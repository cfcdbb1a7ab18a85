//! An interleaved measuring session: runs the incumbent and the candidate as fresh benchmark
//! processes, one pair at a time in the procedure's order for it (AB or BA), re-running (a bounded
//! number of times) a run that the benchmark marks as throttled. Shared by experiments and
//! `ratchet calibrate`; the decision procedure decides which pairs to ask for. It prints
//! nothing: each run's start and end are events (the command line draws the progress bar).

use crate::bench::executor::Executor;
use crate::bench::{self, RunContext, RunRecord, RunStatus, Side};
use crate::config::Config;
use crate::error::Result;
use crate::events::{Event, Events};
use crate::signals::Cancel;
use crate::stats::sequential::{incumbent_first, Phase};
use crate::store::{Status, Store};
use std::path::{Path, PathBuf};

/// Why a session cannot go on.
#[derive(Debug, Clone)]
pub enum Stop {
    /// The candidate's run failed: the experiment ends with this status.
    Candidate(Status, String),
    /// The incumbent's run failed: nothing can be compared.
    Incumbent(String),
    /// The failure is the machine's or the set-up's, not the hypothesis's: no space left, or
    /// both sides fail the same way.
    Infrastructure(String),
    Interrupted,
}

/// One side's checkout and commit.
pub struct Checkout<'a> {
    pub dir: &'a Path,
    pub commit: String,
}

/// Where a session's runs go and what they get. Built as a struct, then [`Session::start`]ed.
pub struct Session<'a> {
    pub cfg: &'a Config,
    pub exec: &'a mut dyn Executor,
    pub events: &'a mut dyn Events,
    /// Stops the session (and its running benchmark) when set.
    pub cancel: Cancel,
    pub id: &'a str,
    pub runs_dir: PathBuf,
    pub repo_root: &'a Path,
    pub state_dir: &'a Path,
    pub python_dir: &'a Path,
    pub deep: bool,
    /// Where each run is appended as soon as it ends (`None`: keep them in memory only).
    pub store: Option<&'a Store>,
    pub incumbent: Checkout<'a>,
    pub candidate: Checkout<'a>,
    /// Every run, superseded throttled ones included, in order.
    pub records: Vec<RunRecord>,
}

impl<'a> Session<'a> {
    /// Announce the session: it runs about `max_runs` benchmark processes (more when runs are
    /// repeated).
    pub fn start(self, max_runs: usize) -> Self {
        self.events.emit(Event::SessionStarted { max_runs });
        self
    }

    /// Measure pair `i` of `phase` in the procedure's order for it ([`incumbent_first`]);
    /// returns the indices in `records` of the incumbent's and the candidate's runs, or why the
    /// session must stop. Each run records its pair and phase, so a decision replays from
    /// `runs.jsonl` alone.
    pub fn pair(&mut self, phase: Phase, i: usize, label: &str) -> Result<Result<(usize, usize), Stop>> {
        let order = if incumbent_first(phase, i) { [Side::Incumbent, Side::Candidate] } else { [Side::Candidate, Side::Incumbent] };
        let mut idx = [0usize; 2];
        for side in order {
            match self.side(side, label, (phase, i))? {
                Ok(i) => idx[(side == Side::Candidate) as usize] = i,
                Err(stop) => return Ok(Err(stop)),
            }
        }
        Ok(Ok((idx[0], idx[1])))
    }

    /// One side's run, run again while the benchmark says it was throttled (bounded): a
    /// throttled run's value is not trusted, but after the last re-run it is used anyway, so a
    /// sample is never dropped because of its value.
    fn side(&mut self, side: Side, label: &str, tag: (Phase, usize)) -> Result<Result<usize, Stop>> {
        let mut attempt = 0;
        loop {
            let i = self.run_once(side, label, Some(tag))?;
            crate::signals::inject("after-run");
            let rec = &self.records[i];
            if rec.status != RunStatus::Ok {
                let err = rec.error.clone().unwrap_or_default();
                if let Some(store) = self.store {
                    store.append_run(rec)?;
                }
                if let Some(stop) = self.infrastructure_check(i, side, label)? {
                    return Ok(Err(stop));
                }
                let rec = &self.records[i];
                return Ok(Err(match (rec.status, side) {
                    (RunStatus::Interrupted, _) => Stop::Interrupted,
                    // Failed once a stop was asked for: the stop's doing. Ray's `job stop`, a
                    // service manager or a cluster's preemption signal the whole process tree,
                    // so the benchmark can die of it before the run loop sees the stop; the
                    // hypothesis is not blamed for it (nor the incumbent, which would stop a sweep).
                    _ if self.cancel.is_cancelled() => Stop::Interrupted,
                    (s, Side::Candidate) => Stop::Candidate(
                        match s {
                            RunStatus::Timeout => Status::Timeout,
                            RunStatus::Invalid => Status::Invalid,
                            _ => Status::Crash,
                        },
                        err,
                    ),
                    (_, Side::Incumbent) => Stop::Incumbent(err),
                }));
            }
            if self.cancel.is_cancelled() {
                // The run finished before the signal: it is a sample like any other, so it is
                // recorded before the session stops.
                if let Some(store) = self.store {
                    store.append_run(&self.records[i])?;
                }
                return Ok(Err(Stop::Interrupted));
            }
            if rec.throttled == Some(true) && attempt < self.cfg.benchmark.throttle_reruns {
                attempt += 1;
                self.records[i].superseded = true;
                if let Some(store) = self.store {
                    store.append_run(&self.records[i])?;
                }
                self.events.emit(Event::RunRepeated { run: i, side, attempt, max: self.cfg.benchmark.throttle_reruns });
                continue;
            }
            if let Some(store) = self.store {
                store.append_run(&self.records[i])?;
            }
            return Ok(Ok(i));
        }
    }

    /// Whether the failure of run `i` (of `side`) is the machine's: the disk is full, or the
    /// other side, run once more now, crashes exactly the same way (same exit code or signal).
    /// A hypothesis is never blamed for what the incumbent does too.
    fn infrastructure_check(&mut self, i: usize, side: Side, label: &str) -> Result<Option<Stop>> {
        let rec = &self.records[i];
        let err = rec.error.clone().unwrap_or_default();
        if bench::infra::says_no_space(&err) {
            return Ok(Some(Stop::Infrastructure(format!("the {} run failed for lack of disk space: {err}", side.as_str()))));
        }
        if rec.status != RunStatus::Crash || self.cancel.is_cancelled() {
            return Ok(None);
        }
        let (code, signal) = (rec.exit_code, rec.signal);
        let other = match side {
            Side::Candidate => Side::Incumbent,
            Side::Incumbent => Side::Candidate,
        };
        self.events.emit(Event::CrossCheck { crashed: side, other });
        // A cross-check is no pair's run: it records neither pair nor phase.
        let j = self.run_once(other, &format!("{label}, cross-check"), None)?;
        if let Some(store) = self.store {
            store.append_run(&self.records[j])?;
        }
        let o = &self.records[j];
        if o.status == RunStatus::Interrupted {
            return Ok(Some(Stop::Interrupted));
        }
        if o.status == RunStatus::Crash && o.exit_code == code && o.signal == signal {
            let how = match (code, signal) {
                (Some(c), _) => format!("exit code {c}"),
                (_, Some(s)) => crate::process::signal(s),
                _ => "the same way".into(),
            };
            return Ok(Some(Stop::Infrastructure(format!(
                "the incumbent and the candidate both crash with {how}, so the benchmark's set-up is broken: {err}"
            ))));
        }
        Ok(None)
    }

    fn run_once(&mut self, side: Side, label: &str, tag: Option<(Phase, usize)>) -> Result<usize> {
        let run = self.records.len();
        let co = match side {
            Side::Candidate => &self.candidate,
            Side::Incumbent => &self.incumbent,
        };
        self.events.emit(Event::RunStarted { run, side, label: label.to_string() });
        let ctx = RunContext {
            experiment: self.id,
            run,
            side,
            commit: &co.commit,
            dir: co.dir,
            out_dir: self.runs_dir.join(format!("{run:03}-{}", side.as_str())),
            repo_root: self.repo_root,
            state_dir: self.state_dir,
            python_dir: self.python_dir,
            deep: self.deep,
            pair: tag.map(|(phase, i)| (phase.as_str(), i)),
        };
        let mut rec = bench::measure_with(self.exec, self.cfg, &ctx, &self.cancel)?;
        if let Some((phase, i)) = tag {
            rec.pair = Some(i);
            rec.phase = Some(phase.as_str().to_string());
        }
        self.events.emit(Event::RunFinished {
            run,
            side,
            label: label.to_string(),
            status: rec.status,
            latency_ms: rec.latency_ms,
            value: rec.value,
            wall_s: rec.wall_s,
        });
        self.records.push(rec);
        Ok(run)
    }

    pub fn finish(&mut self) {
        self.events.emit(Event::SessionFinished);
    }
}
