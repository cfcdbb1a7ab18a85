//! One experiment, end to end: commit the working tree's change as a hypothesis, measure it
//! against the incumbent in interleaved pairs, decide, keep or revert, and record the row.
//! It prints nothing: what happens is reported as events, and the end is an [`Outcome`].

use crate::bench::executor::Executor;
use crate::bench::{self, RunRecord, RunStatus, Side};
use crate::config::{self, Config};
use crate::error::WithPath;
use crate::error::{Error, Result};
use crate::events::{Effects, Event};
use crate::metrics::{self, Metrics};
use crate::session::{Checkout, Session, Stop};
use crate::stats::effect;
use crate::stats::history;
use crate::stats::sequential::{Next, Phase, Sequential};
use crate::stats::{Decision, Verdict};
use crate::store::{ResultRow, State, Status, Store};
use crate::vcs::short;
use crate::vcs::{self, Repo};
use crate::workspace::Locked;
use crate::{fault, journal};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use crate::outcome::Outcome;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub message: String,
    pub deep: bool,
    pub allow_empty: bool,
    /// Overrides `[decision] max_pairs`.
    pub pairs: Option<u32>,
    /// The sweep hypothesis behind this experiment (`<file>@<hash>`), recorded in its row.
    pub hypothesis: Option<String>,
    /// Its tags, recorded in the row.
    pub tags: Vec<String>,
    /// Commit large or binary untracked files too (`--allow-large`).
    pub allow_large: bool,
}

/// The message's trailing ` --deep`, as the source article writes it, means the `--deep` flag.
pub fn split_deep_suffix(message: &str) -> (String, bool) {
    let t = message.trim_end();
    match t.strip_suffix("--deep") {
        Some(rest) if rest.is_empty() || rest.ends_with(char::is_whitespace) => (rest.trim_end().to_string(), true),
        _ => (t.to_string(), false),
    }
}

/// Run one experiment in the locked workspace. Every experiment that records a row returns
/// `Ok` with its [`Outcome`] (interrupted and undecidable ones too: [`Outcome::error`] says
/// how the process exits); `Err` means nothing was recorded.
///
/// The caller runs the recoveries first (`sweep::recover`: an unfinished experiment, and a
/// stopped sweep's edit, which must never be committed under another message), as the command
/// line does; without them this refuses to start.
pub fn run(ws: &Locked, opts: &Options, exec: &mut dyn Executor, fx: &mut Effects) -> Result<Outcome> {
    ws.require_recovered("experiment::run")?;
    let started = Instant::now();
    let repo = &ws.repo;
    let state_dir = ws.state_dir.clone();
    let store = &ws.store;
    if let Some(what) = journal::recover(repo, store)? {
        fx.emit(Event::Recovered { what });
    }
    let (branch, head) = repo.check_safe()?;
    for text in repo.check_commit_policy()? {
        fx.note(text);
    }
    Repo::check_message(&opts.message)?;
    let cfg = ws.config()?;
    if opts.message.trim().is_empty() {
        return Err(
            Error::usage("the experiment's message is empty").hint("describe the hypothesis: ratchet \"experiment: bump BQ to 512\"")
        );
    }
    if let Some(pairs) = opts.pairs.filter(|&p| !(2..=config::MAX_PAIRS).contains(&p)) {
        return Err(Error::usage(format!("--pairs {pairs}: must be between 2 (a paired test needs two pairs) and {}", config::MAX_PAIRS)));
    }
    let noise_key = history_key(&cfg);
    let hist = history::load(&state_dir, &noise_key);
    let seq = Sequential::new(cfg.decision.params(opts.pairs)).with_history(history::borrowed(&hist.entries));
    let elasticity = crate::stats::elasticity(cfg.score.metric);
    repo.ensure_excludes()?;
    std::fs::create_dir_all(&state_dir).with_path(&state_dir)?;

    let mut state = State::load(&state_dir);
    let incumbent = match state.incumbents.get(&branch).and_then(|s| git2::Oid::from_str(s).ok()) {
        Some(remembered) if remembered == head => head,
        Some(remembered) => {
            fx.note(format!(
                "{branch} moved since ratchet's last kept commit ({}); the incumbent is HEAD ({})",
                short(&remembered.to_string()),
                short(&head.to_string())
            ));
            head
        }
        None => head,
    };
    if opts.deep {
        fx.note("--deep: every run takes continuous-profiling snapshots (RATCHET_DEEP=1); `ratchet show` summarises them");
    }
    let changes = repo.changes()?;
    let left_out = repo.left_out();
    if !left_out.is_empty() {
        fx.note(format!(
            "left out of the hypothesis: {} (written into the repo while an earlier experiment's benchmark ran, listed in \
             .ratchet/outputs; git add one to make it part of the hypothesis)",
            vcs::some_of(&left_out, 5)
        ));
    }
    let submodules = repo.changed_submodules();
    let listed = || submodules.iter().map(|(p, what)| format!("{p} ({what})")).collect::<Vec<_>>().join(", ");
    if !opts.allow_empty && changes.is_empty() && !submodules.is_empty() {
        return Err(Error::repo(format!(
            "nothing to test: the only changes are inside submodules ({}), and ratchet never commits into or moves a submodule",
            listed()
        ))
        .hint("to test a change to a submodule's code, make it in the superproject's own files (or vendor it); git submodule update undoes a moved submodule"));
    }
    if !opts.allow_empty && changes.is_empty() {
        return Err(Error::repo("nothing to test: the working tree has no change against HEAD")
            .hint("edit the kernel first, or pass --allow-empty to re-measure HEAD as it is"));
    }
    if !submodules.is_empty() {
        fx.note(format!(
            "submodules differ from their recorded commits: {}; the candidate is measured with them as they are, the incumbent's \
             checkout at the recorded commits, so their change is measured as part of this hypothesis without being in it",
            listed()
        ));
    }
    let protected = config::protected_paths(&cfg, repo.root());
    let touched: Vec<&String> = changes.iter().filter(|p| config::is_protected(p, &protected)).collect();
    if !touched.is_empty() {
        let list: Vec<&str> = touched.iter().map(|s| s.as_str()).collect();
        return Err(Error::repo(format!(
            "the hypothesis changes the benchmark harness ({}): a gain could then come from changing the measuring stick, not the kernel",
            list.join(", ")
        ))
        .hint("commit harness changes on their own first (git commit), then run the experiment with only the kernel change"));
    }
    if let Some(why) = crate::bench::shadow::check(&cfg, &repo.repo, repo.root(), head, &changes) {
        return Err(Error::repo(format!("refused: {why}"))
            .hint("nothing was committed and the change is still in the work tree: give the new module a name of its own"));
    }

    let changes = crate::admit::admit(repo, changes, opts.allow_large, opts.allow_empty, fx)?;

    // The set-up is checked before an id is taken: a broken set-up uses up no experiment id.
    let python_dir = crate::pyhelper::install(&state_dir)?;
    bench::infra::preflight(&cfg, repo.root(), &state_dir, &python_dir)?;
    // Made (or moved) before the commit, so a refusal there (someone else's checkout at its
    // path) leaves the hypothesis in the work tree with nothing committed.
    let inc_dir = repo.incumbent_worktree(incumbent)?;
    let id = journal::allocate_id(repo, store)?;
    let id_str = id.to_string();
    let exp_dir = crate::layout::experiment_dir(&state_dir, &id_str);
    if exp_dir.exists() {
        // Left by an experiment that died before recording its row; its runs are stale.
        std::fs::remove_dir_all(&exp_dir).with_path(&exp_dir)?;
    }
    let mut entry = journal::Entry {
        id,
        branch: branch.clone(),
        incumbent: incumbent.to_string(),
        message: opts.message.clone(),
        phase: journal::Phase::Committing,
        candidate: None,
        row: None,
        pid: std::process::id(),
        started: crate::fsutil::now(),
        hypothesis: opts.hypothesis.clone().unwrap_or_default(),
        tags: opts.tags.join(";"),
    };
    journal::write(&state_dir, &entry)?;
    fault::point("before-commit");
    let candidate = repo.commit_hypothesis(&opts.message, &changes, opts.allow_empty)?;
    repo.watch_blind_spots();
    entry.phase = journal::Phase::Measuring;
    entry.candidate = Some(candidate.to_string());
    journal::write(&state_dir, &entry)?;
    fault::point("after-commit");
    if let Some(text) = noise_alarm(&hist, &seq.params, &cfg) {
        fx.note(text);
    }
    fx.emit(Event::ExperimentStarted {
        id,
        message: opts.message.clone(),
        branch: branch.clone(),
        candidate: candidate.to_string(),
        incumbent: incumbent.to_string(),
        metric: cfg.score.metric.as_str().to_string(),
        params: seq.params.clone(),
        elasticity,
        history: history::describe(&hist, &seq.params),
        one_phase: seq.one_phase_budget(),
    });

    // The bar's total and the time left: the likely work from past decisions, not the budget.
    let record = crate::progress::record(&store.rows().unwrap_or_default(), cfg.score.metric.as_str());
    let plan = crate::progress::Plan::new(2 * seq.max_measured_pairs(), &record);
    let measured = {
        let mut tracked = crate::events::Tracking::new(&mut *fx.events, plan);
        let session = Session {
            cfg: &cfg,
            exec,
            events: &mut tracked,
            cancel: fx.cancel.clone(),
            id: &id_str,
            runs_dir: exp_dir.join("runs"),
            repo_root: repo.root(),
            state_dir: &state_dir,
            python_dir: &python_dir,
            deep: opts.deep,
            store: Some(store),
            incumbent: Checkout { dir: &inc_dir, commit: incumbent.to_string() },
            candidate: Checkout { dir: repo.root(), commit: candidate.to_string() },
            records: vec![],
        }
        .start(2 * seq.max_measured_pairs());
        drive(session, &seq, cfg.score.direction(), elasticity, false)
    };
    // Whatever appeared untracked while the benchmark ran was written by it (the hypothesis's
    // own new files are committed by now): keep it out of every later hypothesis.
    // One status walk: what the benchmark wrote, and what was edited meanwhile (for the revert).
    let mut scan = repo.after_run_scan().unwrap_or_default();
    // The hypothesis's own files are compared by content too: a write no event reported (through
    // a memory mapping, or a hard link from outside) must be saved, never checked out over.
    if let Ok(unseen) = repo.unseen_edits(incumbent, candidate) {
        scan.edited.extend(unseen);
        scan.edited.sort();
        scan.edited.dedup();
    }
    let outputs = scan.untracked.clone();
    if !outputs.is_empty() {
        fx.note(format!(
            "the benchmark wrote into the repo: {}; ratchet leaves these out of hypotheses (listed in .ratchet/outputs; git \
             add one to make it part of the next hypothesis)",
            vcs::some_of(&outputs, 10)
        ));
    }
    repo.exclude_benchmark_outputs(&outputs)?;
    if !scan.unnamed.is_empty() {
        let shown: Vec<String> = scan.unnamed.iter().map(|p| crate::printable::bytes(p)).collect();
        fx.note(format!(
            "{} appeared or changed while experiment {id} ran; names that are not UTF-8 can neither be listed as the \
             benchmark's outputs nor set aside, so they stay in the work tree as they are, and the next experiment refuses \
             to start until they are renamed or removed",
            vcs::some_of(&shown, 5)
        ));
    }
    let (records, ended, (main_d, confirm_d), (main_s, confirm_s)) = match measured {
        Ok((_, Ended::Stopped(Stop::Infrastructure(why)), _, _)) => {
            return Err(give_back(repo, store, &state_dir, &id_str, candidate, incumbent, &why));
        }
        Err(e) if bench::infra::says_no_space(&e.to_string()) => {
            return Err(give_back(repo, store, &state_dir, &id_str, candidate, incumbent, &e.to_string()));
        }
        Ok(v) => v,
        Err(e) if repo.head_oid().is_ok_and(|h| h == candidate) => {
            // Nothing was decided: the hypothesis goes back into the work tree, uncommitted, as
            // for a machine's failure, never parked where following the hint finds nothing to test.
            let back = put_back(repo, store, &state_dir, &id_str, candidate, incumbent);
            let said = e.hint.clone().map_or(String::new(), |h| format!("{h}; "));
            return Err(match back {
                Ok(()) => e.hint(format!("{said}the hypothesis is back in the work tree, uncommitted; nothing was recorded")),
                Err(undo) => {
                    e.hint(format!("{said}giving the hypothesis back failed ({undo}): run `ratchet recover`, which rolls it back"))
                }
            });
        }
        Err(e) => {
            // HEAD moved meanwhile: park the hypothesis rather than reset someone else's commit.
            let _ = revert(repo, &id_str, candidate, incumbent, None, fx);
            return Err(e);
        }
    };

    let ctx = RowContext {
        id,
        candidate: candidate.to_string(),
        incumbent: incumbent.to_string(),
        opts,
        cfg: &cfg,
        elasticity,
        wall_s: started.elapsed().as_secs_f64(),
    };
    let (row, decision) = summarize(&ctx, &records, ended);
    let status = row.status;

    fault::point("before-decision");
    entry.phase = journal::Phase::Decided;
    entry.row = Some(row.clone());
    journal::write(&state_dir, &entry)?;
    fault::point("after-decision");
    let discarded_ref = if status == Status::Keep {
        // The kept commit is what was measured; a tracked file changed while it ran (a benchmark
        // rewriting a cache, an edit) is set aside, never left to slip into the next commit.
        match repo.set_aside_edits(&id_str, &scan.edited) {
            Ok(Some(name)) => fx.note(format!(
                "{} changed while experiment {id} ran and {} not part of the kept commit: saved in {name} and taken out of \
                 the work tree (git restore --source {name} -- FILE brings one back)",
                vcs::some_of(&scan.edited, 5),
                if scan.edited.len() == 1 { "is" } else { "are" }
            )),
            Ok(None) => {}
            Err(e) => fx.note(format!(
                "{} changed while experiment {id} ran and could not be set aside ({}); they are still in the work tree, \
                 uncommitted: check them with git diff before the next experiment",
                vcs::some_of(&scan.edited, 5),
                e.message
            )),
        }
        state.incumbents.insert(branch.clone(), candidate.to_string());
        state.save(&state_dir)?;
        None
    } else {
        let r = revert(repo, &id_str, candidate, incumbent, Some(&scan.edited), fx).map_err(|e| {
            let fix = if bench::infra::says_no_space(&e.to_string()) { "free disk space, then " } else { "" };
            let hint = format!("{fix}run `ratchet recover`: it finishes the rollback (the decision is in the journal)");
            if e.hint.is_none() {
                e.hint(hint)
            } else {
                e
            }
        })?;
        state.incumbents.insert(branch.clone(), incumbent.to_string());
        state.save(&state_dir)?;
        Some(r)
    };
    if decision.is_some() {
        // The rule beside the runs, so the decision replays (`ratchet replay`) after noise.json
        // and ratchet.toml have moved on; losing it costs the replay, never the experiment.
        let rec = crate::replay::DecisionRecord::new(id, &row.commit, &seq, cfg.score.direction(), elasticity, true);
        if let Err(err) = store.append_decision(&rec) {
            fx.note(format!("could not record the decision's rule in {}: {}", crate::replay::DECISIONS_JSONL, err.message));
        }
    }
    fault::point("before-append");
    crate::signals::inject("before-append");
    store.append_row(&row)?;
    fault::point("after-append");
    journal::clear(&state_dir)?;
    if decision.is_some() {
        // The residuals feed the next experiments' noise scale; losing them costs runs, never
        // validity, so a failure to write is only a note.
        let batches = [(&main_d[..], &main_s[..]), (&confirm_d[..], &confirm_s[..])];
        if let Some(e) = history::entry_beside(&row.time, &format!("experiment {id}"), &batches, seq.borrowed.as_ref().map(|b| b.scale.sd))
        {
            if let Err(err) = history::record(&state_dir, &noise_key, e) {
                fx.note(format!("could not record the noise history: {}", err.message));
            }
        }
    }
    let outcome = Outcome {
        row,
        decision,
        discarded_ref,
        runs_dir: records.last().and_then(|r| r.out_dir.parent().map(PathBuf::from)),
        elasticity,
        // The signal came while the decision was being recorded: that finished, and the exit
        // code still says the user stopped ratchet (a sweep stops here too).
        signalled: status != Status::Interrupted && fx.cancel.is_cancelled(),
    };
    // The test's looks beside the runs, for `ratchet plot`; a failure costs only the picture.
    if let Err(err) = outcome.write_looks() {
        fx.note(format!("could not record the sequential test's looks: {}", err.message));
    }
    fx.emit(Event::ExperimentFinished { outcome: Box::new(outcome.clone()) });
    Ok(outcome)
}

/// Undo an experiment that failed for the machine's reasons: the branch goes back to the
/// incumbent with the hypothesis's changes left in the work tree, uncommitted (a mixed reset),
/// its runs are dropped, and its journal cleared, so no id is used up. Returns the error to exit with.
fn give_back(repo: &Repo, store: &Store, state_dir: &Path, id: &str, candidate: git2::Oid, incumbent: git2::Oid, why: &str) -> Error {
    let undo = || put_back(repo, store, state_dir, id, candidate, incumbent);
    let logs = crate::layout::experiment_dir(state_dir, id);
    let hint = format!(
        "{}; then run the same command again. The hypothesis is back in the work tree, uncommitted; nothing was recorded \
         (the runs' logs are in {})",
        bench::infra::fix_for(why),
        logs.display()
    );
    match undo() {
        Ok(()) => Error::new(crate::error::Kind::Infrastructure, format!("not the hypothesis's fault: {why}")).hint(hint),
        Err(e) => Error::new(
            crate::error::Kind::Infrastructure,
            format!("not the hypothesis's fault: {why}; and giving the hypothesis back failed: {e}"),
        )
        .hint(format!("{}; then run `ratchet recover`, which rolls the experiment back", bench::infra::fix_for(why))),
    }
}

/// The branch back on the incumbent with the hypothesis left in the work tree, uncommitted (a
/// mixed reset), the experiment's runs dropped and its journal cleared, its id released.
fn put_back(repo: &Repo, store: &Store, state_dir: &Path, id: &str, candidate: git2::Oid, incumbent: git2::Oid) -> Result<()> {
    if repo.head_oid()? == candidate {
        let target = repo.repo.find_object(incumbent, None)?;
        repo.repo.reset(&target, git2::ResetType::Mixed, None)?;
    }
    store.drop_runs(id)?;
    crate::journal::clear(state_dir)?;
    // Nothing names this id any more (no row, no parked ref): it is not used up.
    if let Ok(n) = id.parse::<u64>() {
        crate::journal::release_id(repo, n)?;
    }
    Ok(())
}

/// What the row needs besides the runs.
pub(crate) struct RowContext<'a> {
    pub(crate) id: u64,
    pub(crate) candidate: String,
    pub(crate) incumbent: String,
    pub(crate) opts: &'a Options,
    pub(crate) cfg: &'a Config,
    pub(crate) elasticity: f64,
    pub(crate) wall_s: f64,
}

/// The experiment's row and decision from its runs and how the measuring ended: pure (no I/O,
/// the time stamp aside), so what a row says is decided in one place.
pub(crate) fn summarize(c: &RowContext, records: &[RunRecord], ended: Ended) -> (ResultRow, Option<Decision>) {
    let (status, decision, note) = match ended {
        Ended::Stopped(Stop::Candidate(status, why)) => (status, None, why),
        Ended::Stopped(Stop::Incumbent(why)) => {
            (Status::Error, None, format!("the incumbent's benchmark failed, so nothing could be compared: {why}"))
        }
        Ended::Stopped(Stop::Interrupted) => (Status::Interrupted, None, "interrupted by a signal".to_string()),
        Ended::Stopped(Stop::Infrastructure(why)) => (Status::Error, None, why),
        Ended::NoOp(why) => (Status::NoOp, None, why),
        Ended::Decided(d) => {
            let status = match d.verdict {
                Verdict::Keep => Status::Keep,
                Verdict::Revert => Status::Revert,
                Verdict::Inconclusive => Status::Inconclusive,
                Verdict::Unconfirmed => Status::Unconfirmed,
            };
            let note = d.reason.clone();
            (status, Some(d), note)
        }
    };

    // An experiment stopped before anything was decided about the kernel (interrupted, an
    // error) has no figures: its runs so far are in runs.jsonl, but a roofline point or a
    // latency from half an experiment would read as a result in one view and not another.
    let decided = status.class() != crate::store::StatusClass::NotRun;
    let used = |side| records.iter().filter(move |r: &&RunRecord| decided && r.side == side && r.status == RunStatus::Ok && !r.superseded);
    let cand_runs: Vec<&RunRecord> = used(Side::Candidate).collect();
    let inc_runs: Vec<&RunRecord> = used(Side::Incumbent).collect();
    let conf = decision.as_ref().and_then(|d| d.confirmation.as_ref());
    let borrowed = decision.as_ref().and_then(|d| d.borrowed.as_ref());
    let m = summary_metrics(&cand_runs, c.cfg.hardware().as_ref());
    let hlo = records.iter().rev().filter(|r| r.side == Side::Candidate).find_map(|r| r.hlo_stats.as_ref());
    let value = metrics::median(&cand_runs.iter().filter_map(|r| r.value).collect::<Vec<_>>());
    let incumbent_value = metrics::median(&inc_runs.iter().filter_map(|r| r.value).collect::<Vec<_>>());
    // What the row reports as the speed-up is the robust paired estimate of every pair (first
    // phase and confirmation), not the decision's mean: a few wild runs must not carry it.
    let shown = decision.as_ref().and_then(|d| {
        let logs = effect::speedup_logs(&crate::bench::pairs_of(records), c.cfg.score.direction(), c.elasticity);
        let split = d.pairs.min(logs.len());
        // A rescue's keep rests on its pairs less the wild ones it set aside: the row shows theirs.
        let all = match d.rescue.as_ref().filter(|r| d.procedure == crate::stats::Procedure::Rescue && !r.set_aside_pairs.is_empty()) {
            Some(r) => {
                let read: Vec<f64> =
                    logs.iter().take(r.pairs).enumerate().filter(|(i, _)| !r.set_aside_pairs.contains(i)).map(|(_, &x)| x).collect();
                effect::shown_interval(&read, d)?
            }
            None => effect::shown_interval(&logs, d)?,
        };
        // The confirmation's own pairs: the rescue's, measured after them, are not its.
        let end = conf.map_or(logs.len(), |c| (split + c.pairs).min(logs.len()));
        let confirm = conf.and_then(|_| effect::decision_interval(&logs[split..end], d.ci_level));
        Some((all, confirm))
    });
    // Each interval's level as it holds: the decision's, or with too few pairs for that the
    // lower coverage of the Walsh averages' range (an interval is never shown above its level).
    let level_pct = |e: &effect::Effect| e.coverage.min(decision.as_ref().map_or(1.0, |d| d.ci_level)) * 100.0;
    let shown_confirm = shown.and_then(|(_, k)| k);
    let shown = shown.map(|(e, _)| e);
    let metric_pct = |x: f64| crate::stats::metric_pct(x, c.elasticity);
    let (status, note) = too_noisy_to_tell(status, note, shown.map(|e| e.pct()), c.cfg.decision.min_effect_pct);
    let row = ResultRow {
        id: c.id,
        time: crate::fsutil::now(),
        commit: c.candidate.clone(),
        incumbent: c.incumbent.clone(),
        message: c.opts.message.clone(),
        status,
        metric: c.cfg.score.metric.as_str().into(),
        value,
        incumbent_value,
        delta_pct: shown.map(|e| metric_pct(e.pct().0)),
        ci_low_pct: shown.map(|e| metric_pct(e.pct().1)),
        ci_high_pct: shown.map(|e| metric_pct(e.pct().2)),
        p_value: decision.as_ref().map(|d| d.p_value),
        score: m.as_ref().and_then(|m| m.score).or_else(|| reported_median(&cand_runs, |r| r.score)),
        latency_ms: m.as_ref().map(|m| m.latency_ms),
        util_pct: m.as_ref().and_then(|m| m.util_pct).or_else(|| reported_median(&cand_runs, |r| r.util_pct)),
        tflops: m.as_ref().and_then(|m| m.tflops).or_else(|| reported_median(&cand_runs, |r| r.tflops)),
        intensity: m.as_ref().and_then(|m| m.intensity).or_else(|| reported_median(&cand_runs, |r| r.intensity)),
        bw_pct: m.as_ref().and_then(|m| m.bw_pct).or_else(|| reported_median(&cand_runs, |r| r.bw_pct)),
        regime: m
            .as_ref()
            .and_then(|m| m.regime_word().map(str::to_string))
            .or_else(|| cand_runs.iter().rev().find_map(|r| r.reported.as_ref().and_then(|x| x.regime.clone()))),
        gap_ms: m.as_ref().and_then(|m| m.gap_ms),
        runs: records.len() as u32,
        wall_s: c.wall_s,
        latency_source: cand_runs.first().and_then(|r| r.latency_source.clone()),
        host_latency_ms: metrics::median(&cand_runs.iter().filter_map(|r| r.host_latency_ms).collect::<Vec<_>>()),
        kernel: cand_runs.iter().rev().find_map(|r| r.trace_kernel.as_ref().map(|k| k.name.clone())),
        hlo_dot: hlo.map(|h| h.dot as u32),
        hlo_exp: hlo.map(|h| h.exponential as u32),
        hlo_reduce: hlo.map(|h| h.reduce as u32),
        hlo_copy: hlo.map(|h| h.copy as u32),
        hlo_fusion: hlo.map(|h| h.fusion as u32),
        hlo_custom_call: hlo.map(|h| h.custom_call as u32),
        hypothesis: c.opts.hypothesis.clone().unwrap_or_default(),
        tags: c.opts.tags.join(";"),
        note,
        p_threshold: decision.as_ref().map(|d| d.p_threshold),
        p_adjusted: decision.as_ref().map(|d| d.p_adjusted),
        speedup_pct: shown.map(|e| e.pct().0),
        confirm_delta_pct: shown_confirm.map(|k| metric_pct(k.pct().0)),
        confirm_ci_low_pct: shown_confirm.map(|k| metric_pct(k.pct().1)),
        confirm_ci_high_pct: shown_confirm.map(|k| metric_pct(k.pct().2)),
        noise_scale: decision.as_ref().map(|d| d.scale.clone()).unwrap_or_default(),
        noise_sd_pct: decision.as_ref().map(|d| d.noise_sd_pct),
        hlo_loop_copy: hlo.map(|h| h.loop_copies as u32),
        kernel_ops: crate::diagnose::columns::kernel_ops_cell(&cand_runs),
        meta: crate::diagnose::columns::meta_cell(&cand_runs),
        p_conditional: decision.as_ref().is_some_and(|d| d.scale == "history"),
        borrowed_sd_pct: borrowed.map(|b| b.sd_pct),
        borrowed_df: borrowed.map(|b| b.df),
        borrowed_sums_sd_pct: borrowed.and_then(|b| b.sums_sd_pct),
        borrowed_sums_df: borrowed.and_then(|b| b.sums_df),
        borrowed_from: borrowed.map(|b| b.source.clone()).unwrap_or_default(),
        ci_level_pct: shown.as_ref().map(level_pct),
        confirm_ci_level_pct: shown_confirm.as_ref().map(level_pct),
    };
    (row, decision)
}

/// The noisy-machine warning for a benchmark's noise history (`None` without enough history,
/// or when the budget can see the minimum effect): shown when an experiment starts and by
/// `ratchet status`.
pub fn noise_alarm(hist: &history::Benchmark, params: &crate::stats::sequential::Params, cfg: &Config) -> Option<String> {
    let b = history::borrowed(&hist.entries)?;
    let s = b.scale;
    crate::stats::noise::alarm(
        params,
        s.sd,
        &format!("{:.0} df of history on {}", s.df, hist.host),
        params.deciding_ratio(Some(&b)).as_ref(),
        deciding_calls(cfg, None),
    )
}

/// The `[benchmark]` key whose calls make a run's time: `profile_iters` when the kernel time
/// is read from the trace (a run that read it, or the config's default where none ran yet),
/// else `iters`.
pub fn deciding_calls(cfg: &Config, run: Option<&crate::bench::RunRecord>) -> &'static str {
    let traced = match run {
        Some(r) => r.latency_source.as_deref() == Some("trace"),
        None => cfg.trace.latency != crate::config::LatencySource::Host && cfg.benchmark.profile_iters > 0,
    };
    if traced {
        "profile_iters"
    } else {
        "iters"
    }
}

/// A revert whose shown interval still reaches the minimum effect did not show the idea is not
/// worth it, only that these pairs could not tell (a futility stop on few or noisy pairs): it
/// stays a `revert` (the decision rule is the test's), but its note starts with
/// [`crate::report::TOO_NOISY`], which the views and the JSON's `worth_rerun` read.
/// `shown` is the row's speed-up (estimate, low, high) in percent.
fn too_noisy_to_tell(status: Status, note: String, shown: Option<(f64, f64, f64)>, min_effect_pct: f64) -> (Status, String) {
    match shown {
        Some((_, lo, hi)) if status == Status::Revert && hi >= min_effect_pct => (
            status,
            format!(
                "{}: the interval of the speed-up ({} to {}) still includes gains of {min_effect_pct}% or more, \
                 so this is not evidence against the idea; worth a rerun with more pairs or on a quieter machine \
                 (`ratchet calibrate` measures the noise). The test said: {note}",
                crate::report::TOO_NOISY,
                crate::report::pct1(lo),
                crate::report::pct1(hi)
            ),
        ),
        _ => (status, note),
    }
}

/// Park the candidate under refs/ratchet/discarded/<id> (with any edits made meanwhile on top)
/// and bring the branch and working tree back to the incumbent.
fn revert(
    repo: &Repo,
    id: &str,
    candidate: git2::Oid,
    incumbent: git2::Oid,
    edited: Option<&[String]>,
    fx: &mut Effects,
) -> Result<String> {
    let head = repo.head_oid()?;
    if head != candidate {
        let name = repo.mark_discarded(id, candidate)?;
        return Err(Error::repo(format!(
            "HEAD moved during the experiment (now {}), so ratchet did not reset it; the hypothesis is kept at {name}",
            short(&head.to_string())
        )));
    }
    let message = format!("ratchet: edits made during experiment {id}");
    let snapshot = match edited {
        Some(paths) => repo.snapshot_paths(&message, paths)?,
        None => repo.snapshot_edits(&message)?,
    };
    let tip = match snapshot {
        Some(snap) => {
            fx.note(format!("files changed while experiment {id} ran; they are saved in {}{id}", vcs::DISCARDED_PREFIX));
            snap
        }
        None => candidate,
    };
    let name = repo.mark_discarded(id, tip)?;
    fault::point("mid-revert");
    repo.revert_to(incumbent, tip)?;
    Ok(name)
}

/// How the measuring ended.
// `Decided` is built once per experiment; boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Ended {
    Decided(Decision),
    /// The candidate's compiled HLO is the incumbent's program (metadata aside).
    NoOp(String),
    Stopped(Stop),
}

/// Each phase's values, one per pair: (first phase, confirmation).
pub(crate) type Batches = (Vec<f64>, Vec<f64>);

/// The key of a benchmark's noise history: its command, the deciding metric and the latency
/// source (each changes the noise), on this host (`history` adds it).
pub fn history_key(cfg: &Config) -> String {
    format!("{} [{}, latency {:?}]", cfg.benchmark.command, cfg.score.metric.as_str(), cfg.trace.latency).to_lowercase()
}

/// The driver: ask the sequential procedure what to measure, measure it (pairs in the order
/// the procedure's phase gives, AB/BA alternating, the confirmation reversed), and repeat until
/// it decides or a run fails. After the first pair, identical compiled HLO on both sides ends
/// the experiment at once as a no-op. With `mirrored`, the incumbent's speed-up over the
/// candidate is tested (`ratchet gate`'s regression test: its "keep" is "the candidate is
/// significantly slower"), which never ends as a no-op (identical kernels simply show no
/// regression). Returns the runs, how it ended, each phase's log-ratios, and each phase's
/// log-sums (the pairs' ln incumbent + ln candidate in speed-up terms:
/// `sequential::log_sums`), which the procedure's variance guard reads beside the log-ratios and
/// the noise history records.
pub(crate) fn drive(
    mut s: Session,
    seq: &Sequential,
    direction: config::Direction,
    elasticity: f64,
    mirrored: bool,
) -> Result<(Vec<RunRecord>, Ended, Batches, Batches)> {
    let (mut main, mut confirm): (Vec<f64>, Vec<f64>) = (vec![], vec![]);
    let (mut main_s, mut confirm_s): (Vec<f64>, Vec<f64>) = (vec![], vec![]);
    // Without a history the start has no noise to warn about: the experiment's own first pairs
    // are the first measure of it.
    let mut alarm_due = seq.borrowed.is_none() && !mirrored;
    let ended = 'measure: loop {
        let (phase, pairs) = match seq.next_runs(&main, &confirm, &main_s, &confirm_s) {
            Next::Done(d) => break Ended::Decided(d),
            Next::Measure { phase, pairs } => {
                s.events.emit(Event::RunsAhead { runs: 2 * pairs });
                (phase, pairs)
            }
        };
        let rescue = phase == Phase::Confirm && seq.in_rescue(&main, &confirm, &main_s, &confirm_s);
        for _ in 0..pairs {
            let v = if phase == Phase::Main { &mut main } else { &mut confirm };
            let i = v.len();
            let label = match phase {
                Phase::Main => format!("pair {i}"),
                Phase::Confirm if rescue => format!("rescue pair {i}"),
                Phase::Confirm => format!("confirmation pair {i}"),
            };
            let (a, b) = match s.pair(phase, i, &label)? {
                Ok(ab) => ab,
                Err(stop) => break 'measure Ended::Stopped(stop),
            };
            let (inc, cand) = (&s.records[a], &s.records[b]);
            let (x, y) = (inc.value.unwrap_or(f64::NAN), cand.value.unwrap_or(f64::NAN));
            let pair = [if mirrored { (y, x) } else { (x, y) }];
            // In speed-up terms: the procedure's unit whatever the metric.
            v.extend(crate::stats::log_ratios(&pair, direction).into_iter().map(|x| x / elasticity));
            let sums = if phase == Phase::Main { &mut main_s } else { &mut confirm_s };
            sums.extend(crate::stats::sequential::log_sums(&pair, direction, elasticity));
            if alarm_due && main.len() == crate::stats::noise::OWN_ALARM_PAIRS {
                alarm_due = false;
                if let Some(text) = crate::stats::noise::own_alarm(&seq.params, &main, deciding_calls(s.cfg, Some(cand))) {
                    s.events.emit(Event::Note { text });
                }
            }
            if phase == Phase::Main && i == 0 && !mirrored {
                if let Some(why) = same_hlo(inc, cand) {
                    break 'measure Ended::NoOp(why);
                }
            }
        }
    };
    s.finish();
    Ok((s.records, ended, (main, confirm), (main_s, confirm_s)))
}

/// Both runs dumped their compiled HLO and the programs are the same: byte-identical, or equal
/// once metadata and source tables are dropped (`hlo_without_metadata`). The second case is
/// what a cold compilation cache gives: the same program dumped with other stack-frame and
/// source-location tables, which cannot change the kernel.
fn same_hlo(inc: &RunRecord, cand: &RunRecord) -> Option<String> {
    let (a, b) = (inc.hlo.as_ref()?, cand.hlo.as_ref()?);
    let cap = crate::safe_read::MAX_HLO_BYTES;
    let (ta, tb) = (crate::safe_read::read_capped(a, cap).ok()?, crate::safe_read::read_capped(b, cap).ok()?);
    if ta == tb {
        return Some(format!(
            "the candidate's compiled HLO is byte-identical to the incumbent's ({} bytes): the change cannot alter the kernel",
            ta.len()
        ));
    }
    let (sa, sb) = (String::from_utf8_lossy(&ta), String::from_utf8_lossy(&tb));
    let bare = crate::trace::hlo::hlo_without_metadata(&sa);
    (bare == crate::trace::hlo::hlo_without_metadata(&sb)).then(|| {
        format!(
            "the candidate's compiled HLO is the incumbent's program ({} bytes without metadata), differing only in \
             metadata and source-location tables: the change cannot alter the kernel",
            bare.len()
        )
    })
}

/// Roofline figures at the candidate's median latency.
fn summary_metrics(runs: &[&RunRecord], hw: Option<&crate::hardware::Hardware>) -> Option<Metrics> {
    let lat = metrics::median(&runs.iter().filter_map(|r| r.latency_ms).collect::<Vec<_>>())?;
    let last = runs.last()?;
    match hw {
        Some(hw) => Some(metrics::roofline(last.flops, last.bytes, last.min_bytes, lat, hw)),
        None => Some(Metrics { latency_ms: lat, ..Default::default() }),
    }
}

fn reported_median(runs: &[&RunRecord], f: fn(&bench::protocol::LegacyResult) -> Option<f64>) -> Option<f64> {
    metrics::median(&runs.iter().filter_map(|r| r.reported.as_ref().and_then(f)).collect::<Vec<_>>())
}
