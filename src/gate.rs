//! The CI gate: measures a head commit against a base commit in two throw-away detached
//! checkouts, interleaved as an experiment, and asks the experiments' decision rule the
//! mirrored question "is the base faster than the head by at least the threshold?". A yes fails
//! the build (exit 7, from [`regression_error`]); nothing is committed, reset or recorded on the
//! user's branch. `cli::gate` is its command-line face.

use crate::bench::executor::Executor;
use crate::bench::{RunRecord, RunStatus, Side};
use crate::config::{self, Config};
use crate::error::{Error, Kind, Result};
use crate::session::{Checkout, Session, Stop};
use crate::stats::effect;
use crate::stats::history;
use crate::stats::sequential::Sequential;
use crate::stats::Verdict;
use crate::vcs::{self, short, Repo};
use crate::workspace::Locked;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What the gate concluded, as data (`--json` prints it; the Markdown renders it).
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// `regression` (fails), `gain`, `neutral` or `inconclusive` (all three pass).
    pub verdict: String,
    pub passed: bool,
    pub base: String,
    pub head: String,
    pub metric: String,
    pub base_value: Option<f64>,
    pub head_value: Option<f64>,
    pub base_latency_ms: Option<f64>,
    pub head_latency_ms: Option<f64>,
    /// The head's speed-up over the base in percent (negative: slower), with its interval.
    pub speedup_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// The interval's level in percent, as the results rows give theirs (`ci_level_pct`).
    pub ci_level_pct: f64,
    /// The same as a fraction, as schema 1 first gave it (kept for its readers).
    pub ci_level: f64,
    /// One-sided p-value for "the base is faster than the head", and the level it was tested at.
    pub p_regression: f64,
    pub p_threshold: f64,
    pub threshold_pct: f64,
    pub pairs: usize,
    pub confirmation_pairs: usize,
    pub runs: usize,
    pub reason: String,
    /// Protected harness files that differ between base and head (the comparison then also
    /// measures a change of the measuring stick).
    pub harness_changed: Vec<String>,
    pub markdown: String,
}

/// Measure `--head` against `--base` in the locked workspace (it runs benchmarks, which record
/// their process group in the state dir: one ratchet at a time).
/// What to gate: `base` and `head` revisions, the slowdown that fails (percent, speed-up terms;
/// default the config's minimum effect) and the pair budget (default the config's).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub base: String,
    pub head: String,
    pub threshold: Option<f64>,
    pub pairs: Option<u32>,
}

pub fn run(ws: &Locked, args: &Options, exec: &mut dyn Executor, fx: &mut crate::events::Effects) -> Result<GateReport> {
    let repo = &ws.repo;
    let base = resolve(repo, &args.base, "--base")?;
    let head = resolve(repo, &args.head, "--head")?;
    let cfg = Config::load(&config::path_in(repo.root()))?;
    if let Some(pairs) = args.pairs.filter(|&p| !(2..=config::MAX_PAIRS).contains(&p)) {
        return Err(Error::usage(format!("--pairs {pairs}: must be between 2 (a paired test needs two pairs) and {}", config::MAX_PAIRS)));
    }
    // The experiments' own rule (the config's method, its budget or `--pairs`) asks the
    // mirrored question.
    let mut params = cfg.decision.params(args.pairs);
    let threshold = args.threshold.unwrap_or(params.min_effect_pct);
    if !(0.0..100.0).contains(&threshold) || !threshold.is_finite() {
        return Err(Error::usage(format!("--threshold {threshold}: must be a percentage in [0, 100)"))
            .hint("e.g. --threshold 2 fails the build on a significant slowdown of 2% or more"));
    }
    params.min_effect_pct = threshold;
    // Under the earlier rule a gate answers within its two phases' pairs: an unsettled answer
    // says so (inconclusive) rather than measuring on to the rescue's. The robust ratio's budget
    // t-test is part of its rule and stays.
    params.rescue_pairs = 0;
    let state_dir = repo.state_dir();
    let hist = history::load(&state_dir, &crate::experiment::history_key(&cfg));
    let seq = Sequential::new(params).with_history(history::borrowed(&hist.entries));
    let elasticity = crate::stats::elasticity(cfg.score.metric);
    repo.ensure_excludes()?;
    std::fs::create_dir_all(&state_dir)?;
    let python_dir = crate::pyhelper::install(&state_dir)?;
    crate::bench::infra::preflight(&cfg, repo.root(), &state_dir, &python_dir)?;

    if repo.changes().is_ok_and(|c| !c.is_empty()) {
        eprintln!("note: the gate measures commits: the working tree's uncommitted changes are not part of the comparison");
    }
    let harness_changed = harness_diff(repo, &cfg, base, head)?;
    let gate_dir = crate::layout::gate_dir(&state_dir);
    if gate_dir.exists() {
        std::fs::remove_dir_all(&gate_dir)?;
    }
    let checkouts = Checkouts::new(&repo.repo, &gate_dir, base, head)?;
    eprintln!(
        "gate: head {} vs base {}; fails on a significant slowdown of at least {threshold}% (up to {} interleaved pairs; the runs say incumbent for the base, candidate for the head)",
        short(&head.to_string()),
        short(&base.to_string()),
        seq.max_measured_pairs()
    );
    let session = Session {
        cfg: &cfg,
        exec,
        events: &mut *fx.events,
        cancel: fx.cancel.clone(),
        id: "gate",
        runs_dir: gate_dir.join("runs"),
        repo_root: repo.root(),
        state_dir: &state_dir,
        python_dir: &python_dir,
        deep: false,
        store: None,
        incumbent: Checkout { dir: &checkouts.paths[0], commit: base.to_string() },
        candidate: Checkout { dir: &checkouts.paths[1], commit: head.to_string() },
        records: vec![],
    }
    .start(2 * seq.max_measured_pairs());
    // The samples are the base's speed-up over the head, so the procedure's "keep" is "the head
    // is significantly slower by at least the threshold".
    let (records, ended, _, _) = crate::experiment::drive(session, &seq, cfg.score.direction(), elasticity, true)?;
    let ended = match ended {
        crate::experiment::Ended::Decided(d) => Ok(d),
        crate::experiment::Ended::Stopped(stop) => Err(stop),
        crate::experiment::Ended::NoOp(_) => unreachable!("a mirrored drive never ends as a no-op"),
    };
    drop(checkouts);
    let d = match ended {
        Ok(d) => d,
        Err(Stop::Interrupted) => return Err(Error::interrupted().hint("the gate stopped; nothing was changed")),
        Err(Stop::Candidate(status, why)) => {
            return Err(Error::failure(format!("the head commit's benchmark failed ({}): {why}", status.as_str()))
                .hint(format!("its logs are under {}", gate_dir.join("runs").display())))
        }
        Err(Stop::Incumbent(why)) => {
            return Err(Error::failure(format!("the base commit's benchmark failed, so nothing could be compared: {why}"))
                .hint(format!("its logs are under {}", gate_dir.join("runs").display())))
        }
        Err(Stop::Infrastructure(why)) => return Err(Error::new(Kind::Infrastructure, why)),
    };
    let median = |side| {
        crate::metrics::median(
            &records
                .iter()
                .filter(|r: &&RunRecord| r.side == side && r.status == RunStatus::Ok && !r.superseded)
                .filter_map(|r| r.value)
                .collect::<Vec<_>>(),
        )
    };
    // The procedure tested the base's speed-up over the head (its decision stands); what is
    // shown is the head's speed-up over the base by the one estimate every view reports.
    let flip = |x: f64| 100.0 * (100.0 / (100.0 + x) - 1.0);
    let logs = effect::speedup_logs(&crate::bench::pairs_of(&records), cfg.score.direction(), elasticity);
    // The interval's level as it holds: with too few pairs for the decision's, a lower one. Equal
    // tails, unlike an experiment's row (`effect::decision_interval`): "ruled out at the test's
    // level" rests on the lower end missing with the test's alpha, and the split that answers
    // this test's stop (the mirror image) would loosen that claim.
    let (speedup, lo, hi, ci_level) = match effect::hodges_lehmann(&logs, d.ci_level) {
        Some(e) => {
            let (x, l, h) = e.pct();
            (x, l, h, e.coverage.min(d.ci_level))
        }
        None => (flip(d.effect_pct), flip(d.ci_high_pct), flip(d.ci_low_pct), d.ci_level),
    };
    // "Ruled out" only when the whole shown interval is above a slowdown of the threshold.
    let ruled_out = lo > flip(threshold);
    let verdict = match d.verdict {
        Verdict::Keep => "regression",
        _ if lo > 0.0 => "gain",
        Verdict::Revert if ruled_out => "neutral",
        _ => "inconclusive",
    };
    let confirmed =
        d.confirmation.as_ref().map(|c| format!(", confirmed by {} more pairs in the reversed order", c.pairs)).unwrap_or_default();
    let reason = match verdict {
        "regression" => format!("the slowdown is significant and at least the {threshold}% threshold{confirmed}"),
        "gain" => "the head is significantly faster: the whole interval is above 0".to_string(),
        "inconclusive" if d.verdict == Verdict::Revert => format!(
            "too noisy to tell: no significant slowdown after {} pairs, but the interval still reaches a slowdown of {threshold}% or more, \
             so one is not ruled out; rerun with more --pairs or on a quieter machine for a firmer answer",
            d.pairs
        ),
        "inconclusive" => format!(
            "the budget of {} pairs ran out before a slowdown of {threshold}% could be shown or ruled out; rerun with more --pairs for a firmer answer",
            d.pairs
        ),
        _ => format!("a slowdown of {threshold}% or more is ruled out at the test's level after {} pairs", d.pairs),
    };
    let latency = |side| {
        crate::metrics::median(
            &records
                .iter()
                .filter(|r: &&RunRecord| r.side == side && r.status == RunStatus::Ok && !r.superseded)
                .filter_map(|r| r.latency_ms)
                .collect::<Vec<_>>(),
        )
    };
    let mut report = GateReport {
        verdict: verdict.into(),
        passed: verdict != "regression",
        base: base.to_string(),
        head: head.to_string(),
        metric: cfg.score.metric.as_str().into(),
        base_value: median(Side::Incumbent),
        head_value: median(Side::Candidate),
        speedup_pct: speedup,
        ci_low_pct: lo,
        ci_high_pct: hi,
        ci_level_pct: ci_level * 100.0,
        ci_level,
        p_regression: d.p_value,
        p_threshold: d.p_threshold,
        threshold_pct: threshold,
        pairs: d.pairs,
        confirmation_pairs: d.confirmation.as_ref().map(|c| c.pairs).unwrap_or(0),
        runs: records.len(),
        base_latency_ms: latency(Side::Incumbent),
        head_latency_ms: latency(Side::Candidate),
        reason,
        harness_changed,
        markdown: String::new(),
    };
    report.markdown = markdown(&report);
    let _ = crate::store::write_atomic(&gate_dir.join("report.json"), serde_json::to_string_pretty(&report).expect("json").as_bytes());
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::failure(format!("cannot append to $GITHUB_STEP_SUMMARY ({}): {e}", Path::new(&path).display())))?;
        f.write_all(format!("{}\n", report.markdown).as_bytes())?;
    }
    Ok(report)
}

/// The error that fails the build, for a report whose verdict is a regression.
pub fn regression_error(r: &GateReport) -> Error {
    Error::new(
        Kind::Regression,
        format!(
            "{} is a significant regression: {:+.2}% [{:+.2}, {:+.2}] against {} (threshold {}%)",
            short(&r.head),
            r.speedup_pct,
            r.ci_low_pct,
            r.ci_high_pct,
            short(&r.base),
            r.threshold_pct
        ),
    )
    .hint("the Markdown summary above has the figures; the runs are under .ratchet/gate/runs/")
}

fn resolve(repo: &Repo, rev: &str, flag: &str) -> Result<git2::Oid> {
    let obj = repo.repo.revparse_single(rev).map_err(|e| {
        Error::usage(format!("{flag} {rev}: not a commit in this repository ({})", e.message()))
            .hint("fetch it first (in CI: actions/checkout with fetch-depth: 0, or git fetch origin main)")
    })?;
    Ok(obj.peel_to_commit().map_err(|_| Error::usage(format!("{flag} {rev}: does not name a commit")))?.id())
}

/// The protected harness paths the head changes against the base.
fn harness_diff(repo: &Repo, cfg: &Config, base: git2::Oid, head: git2::Oid) -> Result<Vec<String>> {
    let (a, b) = (repo.repo.find_commit(base)?.tree()?, repo.repo.find_commit(head)?.tree()?);
    let protected = config::protected_paths(cfg, repo.root());
    Ok(vcs::changed_paths(&repo.repo, &a, &b)?.into_iter().filter(|p| config::is_protected(p, &protected)).collect())
}

/// The two detached checkouts (base, head) under `.ratchet/gate/`, registered as git worktrees
/// while they exist and removed (directory and registration) when dropped.
struct Checkouts<'r> {
    repo: &'r git2::Repository,
    names: Vec<String>,
    paths: Vec<PathBuf>,
}

impl<'r> Checkouts<'r> {
    fn new(repo: &'r git2::Repository, dir: &Path, base: git2::Oid, head: git2::Oid) -> Result<Self> {
        let mut c = Checkouts { repo, names: vec![], paths: vec![] };
        std::fs::create_dir_all(dir)?;
        for (side, commit) in [("base", base), ("head", head)] {
            let name = format!("ratchet-gate-{side}");
            let path = dir.join(side);
            if let Some(theirs) = foreign_worktree(repo, &name, dir) {
                return Err(Error::repo(format!(
                    "a git worktree named {name} exists at {} and ratchet did not make it; the gate needs that name for its throw-away checkout",
                    theirs.display()
                ))
                .hint("move your worktree aside under another name (git worktree remove, then git worktree add with another directory name); ratchet never removes it"));
            }
            prune(repo, &name);
            let added = vcs::add_detached_worktree(repo, &name, &path, commit);
            c.names.push(name);
            c.paths.push(path);
            added?;
        }
        Ok(c)
    }
}

/// The path of the worktree `name` when it is not the gate's own checkout (a user's worktree
/// that happens to carry the name): the gate's live only at `<gate_dir>/base` and `/head`.
fn foreign_worktree(repo: &git2::Repository, name: &str, gate_dir: &Path) -> Option<PathBuf> {
    let wt = repo.find_worktree(name).ok()?;
    let side = name.strip_prefix("ratchet-gate-").unwrap_or(name);
    let (theirs, ours) = (wt.path().to_path_buf(), gate_dir.join(side));
    let trim = |p: &Path| p.to_string_lossy().trim_end_matches('/').to_string();
    let same =
        trim(&theirs) == trim(&ours) || matches!((theirs.canonicalize(), gate_dir.canonicalize()), (Ok(a), Ok(g)) if a == g.join(side));
    (!same).then_some(theirs)
}

/// The checkouts a killed gate left registered (its names), for `ratchet status`; a worktree of
/// the same name elsewhere is the user's and not counted.
pub fn leftovers(repo: &git2::Repository, gate_dir: &Path) -> Vec<String> {
    ["base", "head"]
        .iter()
        .map(|side| format!("ratchet-gate-{side}"))
        .filter(|n| repo.find_worktree(n).is_ok() && foreign_worktree(repo, n, gate_dir).is_none())
        .collect()
}

/// Remove what a killed gate left: its checkouts' registrations, directories and scratch branches.
pub fn remove_leftovers(repo: &Repo) -> Option<String> {
    let names = leftovers(&repo.repo, &crate::layout::gate_dir(&repo.state_dir()));
    for name in &names {
        prune(&repo.repo, name);
    }
    let dir = crate::layout::gate_dir(&repo.state_dir());
    for side in ["base", "head"] {
        let _ = std::fs::remove_dir_all(dir.join(side));
    }
    (!names.is_empty()).then(|| format!("removed the throw-away checkouts a stopped `ratchet gate` left ({})", names.join(", ")))
}

fn prune(repo: &git2::Repository, name: &str) {
    let _ = vcs::prune_worktree(repo, name, true);
    vcs::drop_scratch_branches(repo, name);
}

impl Drop for Checkouts<'_> {
    fn drop(&mut self) {
        for (name, path) in self.names.iter().zip(&self.paths) {
            prune(self.repo, name);
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

fn markdown(r: &GateReport) -> String {
    let title = match r.verdict.as_str() {
        "regression" => "regression: fails the build",
        "gain" => "significant gain",
        "inconclusive" => "inconclusive: passes (no significant regression shown, none ruled out)",
        _ => "no significant regression",
    };
    let fmt = |v: Option<f64>| v.map(|x| crate::report::sig(x, 4)).unwrap_or_else(|| "-".into());
    let mut md = format!(
        "### ratchet gate: {title}\n\n\
         | | base `{}` | head `{}` |\n|---|---|---|\n| {} (median) | {} | {} |\n{}\n\
         **Speed-up of head over base: {:+.2}%** ({}% CI {:+.2} to {:+.2}) over {} interleaved pairs{}.\n\n\
         Regression test (is the base faster than the head by at least {}%?): p = {} (<= {} to fail); {}.\n",
        short(&r.base),
        short(&r.head),
        r.metric,
        fmt(r.base_value),
        fmt(r.head_value),
        match (r.metric.as_str(), r.base_latency_ms, r.head_latency_ms) {
            ("latency", _, _) | (_, None, _) | (_, _, None) => String::new(),
            (_, b, h) => format!("| latency ms (median) | {} | {} |\n", fmt(b), fmt(h)),
        },
        r.speedup_pct,
        crate::stats::fmt_level(r.ci_level_pct),
        r.ci_low_pct,
        r.ci_high_pct,
        r.pairs,
        if r.confirmation_pairs > 0 { format!(" + {} confirmation pairs", r.confirmation_pairs) } else { String::new() },
        r.threshold_pct,
        crate::stats::fmt_p(r.p_regression),
        crate::stats::fmt_p(r.p_threshold),
        r.reason
    );
    if !r.harness_changed.is_empty() {
        md.push_str(&format!(
            "\n**Note:** the head changes the benchmark harness ({}): the comparison also measures that change.\n",
            r.harness_changed.join(", ")
        ));
    }
    md
}
