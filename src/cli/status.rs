//! `ratchet status`: the incumbent, whether a ratchet is running, an unfinished experiment or
//! sweep hypothesis and what recovery will do about it, and the last result. It only reports:
//! `ratchet recover` (or the next experiment or sweep) does the recovery.

use crate::error::Result;
use crate::printable::{block, line};
use crate::store::{ResultRow, Status};
use crate::workspace::Workspace;
use serde::Serialize;

/// Everything `ratchet status` says, as data (`--json` prints it; the text renders it).
#[derive(Debug, Serialize)]
pub struct Report {
    /// Who holds the lock, when another ratchet is running here.
    pub running: Option<String>,
    /// The same as an object for agents: the running ratchet's pid, when it started and its
    /// command line; null when none runs.
    pub running_process: Option<crate::lock::Holder>,
    pub branch: String,
    /// HEAD's commit (none in a repository without commits).
    pub head: Option<String>,
    /// What the next experiment measures against: HEAD, unless HEAD is an experiment's
    /// candidate not yet decided (then the remembered incumbent).
    pub incumbent: Option<String>,
    /// The last incumbent ratchet kept or restored on this branch.
    pub remembered_incumbent: Option<String>,
    /// The branch moved (a manual commit, a pull) since ratchet's last incumbent.
    pub head_moved: bool,
    /// The experiment in the journal: running (when locked) or left unfinished by a dead ratchet.
    pub experiment_in_flight: Option<InFlight>,
    pub sweep_in_flight: Option<String>,
    /// A parallel sweep's journal: its trials in flight or left by a dead ratchet.
    pub parallel_in_flight: Option<String>,
    /// What `ratchet recover` (or the next experiment) will do; empty when nothing is pending
    /// (or while another ratchet runs).
    pub recovery: Vec<String>,
    /// The noise history's summary line.
    pub noise: Option<String>,
    /// The noisy-machine warning, when the history's noise keeps the budget from seeing the
    /// minimum effect (what it costs and what to do); null otherwise.
    pub noise_alarm: Option<String>,
    pub last: Option<ResultRow>,
    pub experiments: usize,
    pub kept: usize,
    /// Disk taken by ratchet's files and what `ratchet gc` would free, as one line.
    pub disk: String,
}

#[derive(Debug, Serialize)]
pub struct InFlight {
    pub id: u64,
    pub phase: crate::journal::Phase,
    pub message: String,
    pub candidate: Option<String>,
}

/// Gather the report; changes nothing (it takes the lock only to read a journal no one writes).
pub fn report(ws: &Workspace) -> Result<Report> {
    let repo = &ws.repo;
    let state_dir = ws.state_dir.clone();
    let store = &ws.store;
    let args: Vec<String> = std::env::args().collect();
    let (running, recovery) = match crate::lock::RepoLock::for_repo(repo, &args.join(" ")) {
        Ok(lock) => {
            if let Some(h) = lock.stale() {
                eprintln!("note: {}", block(&h.stale_note()));
            }
            (None, super::recover::plan(repo, store))
        }
        Err(e) if e.kind == crate::error::Kind::Locked => (Some(e.message), vec![]),
        Err(e) => return Err(e),
    };
    let head_ref = repo.repo.head().ok();
    let branch = head_ref.as_ref().and_then(|h| h.shorthand().map(str::to_string)).unwrap_or_else(|| "HEAD".into());
    let head = head_ref.as_ref().and_then(|h| h.target()).map(|o| o.to_string());
    let state = crate::store::State::load(&state_dir);
    let remembered = state.incumbents.get(&branch).cloned();
    let in_flight = crate::journal::load(&state_dir);
    // An experiment's candidate at HEAD (one in flight, or killed before it was recorded) is not
    // the branch moving: the incumbent is still the remembered one.
    let candidate_at_head = matches!((&in_flight, &head), (Some(j), Some(h)) if j.candidate.as_deref() == Some(h.as_str()));
    let head_moved = matches!((&remembered, &head), (Some(r), Some(h)) if r != h) && !candidate_at_head;
    let cfg = crate::config::Config::load(&crate::config::path_in(repo.root())).ok();
    let hist = cfg.as_ref().map(|cfg| crate::stats::history::load(&state_dir, &crate::experiment::history_key(cfg)));
    let noise = cfg.as_ref().zip(hist.as_ref()).map(|(cfg, h)| crate::stats::history::describe(h, &cfg.decision.params(None)));
    let noise_alarm =
        cfg.as_ref().zip(hist.as_ref()).and_then(|(cfg, h)| crate::experiment::noise_alarm(h, &cfg.decision.params(None), cfg));
    let rows = store.rows()?;
    let running_process = running.as_ref().and_then(|_| crate::lock::holder(&repo.common_state_dir()));
    Ok(Report {
        running,
        running_process,
        branch,
        incumbent: match (&in_flight, candidate_at_head) {
            (Some(j), true) => Some(j.incumbent.clone()),
            _ => head.clone(),
        },
        head,
        remembered_incumbent: remembered,
        head_moved,
        experiment_in_flight: in_flight.map(|j| InFlight { id: j.id, phase: j.phase, message: j.message, candidate: j.candidate }),
        sweep_in_flight: crate::sweep::in_flight(&state_dir),
        parallel_in_flight: crate::scale::controller::in_flight(&state_dir),
        recovery,
        noise,
        noise_alarm,
        kept: rows.iter().filter(|r| r.status == Status::Keep).count(),
        experiments: rows.len(),
        last: rows.last().cloned(),
        disk: crate::cli::gc::disk_line(repo, &rows),
    })
}

/// The state of ratchet in this repo, as text or (`json`) one JSON object.
pub fn run(ws: &Workspace, json: bool) -> Result<()> {
    let r = report(ws)?;
    if json {
        println!("{}", super::json::to_line("status", &r));
        return Ok(());
    }
    // Messages, hypothesis names, the running ratchet's command line are the user's (or an
    // agent's) text: printable, each on its line.
    let short = |s: &str| line(&s[..s.len().min(12)]).into_owned();
    let branch = line(&r.branch);
    match &r.running {
        Some(who) => {
            println!("{}", block(who));
            if let Some(j) = &r.experiment_in_flight {
                println!("  experiment {} ({:?}): {}", j.id, j.phase, line(&j.message));
            }
            if let Some(h) = &r.sweep_in_flight {
                println!("  sweep hypothesis in flight: {}", line(h));
            }
            if let Some(p) = &r.parallel_in_flight {
                println!("  parallel sweep: {}", line(p));
            }
        }
        None => {
            println!("no ratchet is running here");
            if r.recovery.is_empty() {
                println!("no unfinished experiment");
            } else {
                if let Some(j) = &r.experiment_in_flight {
                    println!("unfinished experiment {} ({:?}): {}", j.id, j.phase, line(&j.message));
                }
                if let Some(h) = &r.sweep_in_flight {
                    println!("unfinished sweep hypothesis: {}", line(h));
                }
                println!("recovery pending (`ratchet recover` does it, or the next experiment or sweep):");
                for step in &r.recovery {
                    println!("  - {}", line(step));
                }
            }
        }
    }
    let candidate = r.experiment_in_flight.as_ref().filter(|j| j.candidate.is_some() && j.candidate == r.head);
    if let (Some(inc), Some(head), Some(j)) = (&r.incumbent, &r.head, candidate) {
        println!("incumbent on {}: {} (HEAD {} is experiment {}'s candidate, not yet decided)", branch, short(inc), short(head), j.id);
    }
    match (&r.remembered_incumbent, &r.head) {
        _ if candidate.is_some() => {}
        (Some(inc), Some(head)) if r.head_moved => println!(
            "incumbent on {}: HEAD {} ({} moved since ratchet's last incumbent {}; the next experiment measures against HEAD)",
            branch,
            short(head),
            branch,
            short(inc)
        ),
        (Some(inc), _) => println!("incumbent on {}: {}", branch, short(inc)),
        (None, _) => println!("incumbent on {}: HEAD (no experiment yet)", branch),
    }
    if let Some(n) = &r.noise {
        println!("{}", block(n));
    }
    if let Some(a) = &r.noise_alarm {
        println!("warning: {}", block(a));
        // The history stays noisy until measured again.
        println!("  once the machine is quiet, `ratchet calibrate` measures its noise again");
    }
    match &r.last {
        Some(l) => println!("last experiment: {} {} ({}): {}", l.id, l.status.as_str(), line(&l.time), line(&l.message)),
        None => println!("no experiments yet"),
    }
    if r.experiments > 0 {
        println!("{} experiments, {} kept", r.experiments, r.kept);
    }
    println!("{}", block(&r.disk));
    Ok(())
}
