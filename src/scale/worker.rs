//! The worker's trial (`ratchet worker`): check both commits out of the repository into the
//! worker's own directory, measure them in interleaved pairs with the experiments' measuring loop
//! and stopping rule, and write the run directory (`trial.json` last). It decides nothing and
//! never writes to the repository it reads.

use super::trial::{self, TrialEnd, TrialResult, WorkerPid};
use crate::bench::executor::Executor;
use crate::config::Config;
use crate::error::{Error, Result, WithPath};
use crate::events::Effects;
use crate::experiment::Ended;
use crate::session::{Checkout, Session, Stop};
use crate::stats::sequential::{Borrowed, NoiseScale, Sequential};
use git2::Oid;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The environment variable naming a reusable per-slot work directory (checkouts, the worker's
/// state); without it the worker uses `<out>/work` and removes its checkouts at the end.
pub const WORK_DIR_VAR: &str = "RATCHET_WORKER_DIR";
/// The slot index an engine with local slots gives its worker (recorded in `trial.json`).
pub const SLOT_VAR: &str = "RATCHET_SLOT";
/// Prefixes of the environment variables that bind a device, recorded in `trial.json`.
const DEVICE_ENV: [&str; 5] = ["CUDA_", "TPU_", "HIP_", "ROCR_", "NVIDIA_"];

/// One trial to measure (the worker's command line).
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub repo: PathBuf,
    pub incumbent: String,
    pub candidate: String,
    pub out: PathBuf,
    pub id: Option<String>,
    /// ratchet.toml to use (default: the incumbent checkout's).
    pub config: Option<PathBuf>,
    pub pairs: Option<u32>,
    pub noise_scale: Option<NoiseScale>,
    /// The history's spread of the pairs' log-sums (`--sums-scale`), which the variance guard
    /// reads beside the log-ratios, as in the serial loop.
    pub sums_scale: Option<NoiseScale>,
    pub recheck: bool,
    pub deep: bool,
    /// Work directory (default: `$RATCHET_WORKER_DIR`, else `<out>/work`).
    pub work: Option<PathBuf>,
}

/// The stopping rule of a trial: the serial loop's sequential procedure, for a stale winner's
/// recheck too. Its minimum effect and levels are what bound a keep of a gain that another keep
/// made vanish or shrink (a lighter look, at 5% for any gain > 0, kept 5% of vanished gains).
pub fn stopping_rule(cfg: &Config, pairs: Option<u32>, noise: Option<NoiseScale>, sums: Option<NoiseScale>) -> Sequential {
    Sequential::new(cfg.decision.params(pairs)).with_history(noise.map(|n| Borrowed::new(n).with_sums(sums)))
}

/// Parse `SD,DF` (the `--noise-scale` argument).
pub fn parse_noise(s: &str) -> std::result::Result<NoiseScale, String> {
    let bad = || format!("{s:?} is not a noise scale; write SD,DF (e.g. 0.012,30)");
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let (sd, df): (f64, f64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if !(sd.is_finite() && sd > 0.0 && df.is_finite() && df >= 1.0) {
        return Err(format!("{s:?}: the sd must be positive and the degrees of freedom at least 1"));
    }
    Ok(NoiseScale { sd, df })
}

/// Run the trial; the result is also written to `<out>/trial.json` (last). `Err`: no result file
/// was written (bad arguments, a checkout that failed).
pub fn run(o: &WorkerOptions, exec: &mut dyn Executor, fx: &mut Effects) -> Result<TrialResult> {
    let started_at = crate::fsutil::now();
    let started = Instant::now();
    let incumbent = parse_oid(&o.incumbent, "--incumbent")?;
    let candidate = parse_oid(&o.candidate, "--candidate")?;
    check_out_dir(&o.out)?;
    std::fs::create_dir_all(&o.out).with_path(&o.out)?;
    let out = o.out.canonicalize().with_path(&o.out)?;
    if out.join(trial::RESULT_FILE).exists() {
        return Err(Error::usage(format!("{} already holds a finished trial ({})", out.display(), trial::RESULT_FILE))
            .hint("give each trial its own --out directory"));
    }
    let throwaway = o.work.is_none() && std::env::var_os(WORK_DIR_VAR).is_none();
    let work = match (&o.work, std::env::var_os(WORK_DIR_VAR)) {
        (Some(w), _) => w.clone(),
        (None, Some(w)) => PathBuf::from(w),
        (None, None) => out.join("work"),
    };
    claim_work_dir(&work)?;
    // One worker per work directory: two sharing checkouts would measure each other's files.
    let _lock = crate::lock::RepoLock::acquire(&work, &crate::workspace::command_line())?;
    let state_dir = work.join("state");
    std::fs::create_dir_all(&state_dir).with_path(&state_dir)?;
    // A later controller kills this worker (and its benchmark) by this record if it is orphaned.
    let me = std::process::id() as i32;
    let pid =
        WorkerPid { pid: me, start: crate::bench::executor::proc_stat(me).map(|s| s.start).unwrap_or(0), state_dir: state_dir.clone() };
    crate::fsutil::write_atomic(&out.join(trial::PID_FILE), &serde_json::to_vec(&pid).expect("pid serializes"))?;

    let (inc_dir, cand_dir) = checkouts(&o.repo, &work, incumbent, candidate)?;
    let config_path = o.config.clone().unwrap_or_else(|| crate::config::path_in(&inc_dir));
    let cfg = Config::load(&config_path)?;
    if let Some(p) = o.pairs.filter(|&p| !(2..=crate::config::MAX_PAIRS).contains(&p)) {
        return Err(Error::usage(format!("--pairs {p}: must be between 2 and {}", crate::config::MAX_PAIRS)));
    }
    let seq = stopping_rule(&cfg, o.pairs, o.noise_scale, o.sums_scale);
    let elasticity = crate::stats::elasticity(cfg.score.metric);
    let python_dir = crate::pyhelper::install(&state_dir)?;
    crate::bench::infra::preflight(&cfg, &cand_dir, &state_dir, &python_dir)?;
    let id = o.id.clone().unwrap_or_else(|| out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trial".into()));
    let runs_dir = out.join("runs");
    // Left by a worker killed mid-trial (check_out_dir let only that through): its runs are stale.
    remove_own(&runs_dir)?;
    let session = Session {
        cfg: &cfg,
        exec,
        events: &mut *fx.events,
        cancel: fx.cancel.clone(),
        id: &id,
        runs_dir,
        repo_root: &cand_dir,
        state_dir: &state_dir,
        python_dir: &python_dir,
        deep: o.deep,
        store: None,
        incumbent: Checkout { dir: &inc_dir, commit: incumbent.to_string() },
        candidate: Checkout { dir: &cand_dir, commit: candidate.to_string() },
        records: vec![],
    }
    .start(2 * seq.max_measured_pairs());
    let measured = crate::experiment::drive(session, &seq, cfg.score.direction(), elasticity, false);
    let (records, ended, (main, confirm), (main_sums, confirm_sums)) = match measured {
        Ok(m) => m,
        Err(e) if crate::bench::infra::says_no_space(&e.to_string()) => {
            (vec![], Ended::Stopped(Stop::Infrastructure(e.to_string())), (vec![], vec![]), (vec![], vec![]))
        }
        Err(e) => return Err(e),
    };
    let end = match ended {
        Ended::Decided(_) => TrialEnd::Decided,
        Ended::NoOp(why) => TrialEnd::NoOp { why },
        Ended::Stopped(Stop::Candidate(status, why)) => TrialEnd::Candidate { status, why },
        Ended::Stopped(Stop::Incumbent(why)) => TrialEnd::Incumbent { why },
        Ended::Stopped(Stop::Infrastructure(why)) => TrialEnd::Infrastructure { why },
        Ended::Stopped(Stop::Interrupted) => TrialEnd::Interrupted,
    };
    let mut lines = String::new();
    for r in &records {
        lines.push_str(&serde_json::to_string(r).expect("run serializes"));
        lines.push('\n');
    }
    crate::fsutil::write_atomic(&out.join(trial::RUNS_FILE), lines.as_bytes())?;
    let traces: Vec<serde_json::Value> = records
        .iter()
        .map(|r| serde_json::json!({"run": r.run, "side": r.side, "trace": r.trace, "hlo": r.hlo, "kernel_body": r.kernel_body, "out_dir": r.out_dir}))
        .collect();
    crate::fsutil::write_atomic(&out.join(trial::TRACES_FILE), &serde_json::to_vec_pretty(&traces).expect("json"))?;
    let device_env = std::env::vars().filter(|(k, _)| DEVICE_ENV.iter().any(|p| k.starts_with(p))).collect();
    let result = TrialResult {
        schema: trial::SCHEMA,
        id,
        incumbent: incumbent.to_string(),
        candidate: candidate.to_string(),
        repo: o.repo.clone(),
        host: crate::stats::history::host(),
        device_env,
        slot: std::env::var(SLOT_VAR).ok().and_then(|s| s.parse().ok()),
        started: started_at,
        finished: crate::fsutil::now(),
        wall_s: started.elapsed().as_secs_f64(),
        params: serde_json::to_value(&seq.params).expect("params serialize"),
        recheck: o.recheck,
        pairs: o.pairs,
        noise_scale: o.noise_scale,
        sums_scale: o.sums_scale,
        end,
        main,
        confirm,
        main_sums,
        confirm_sums,
        runs: records.len(),
    };
    if throwaway {
        for d in [&inc_dir, &cand_dir] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    crate::fault::point("worker-before-result");
    result.write(&out)?;
    crate::fault::point("worker-after-result");
    Ok(result)
}

/// What a worker writes into its `--out` directory and may replace there; other files (the
/// engines' logs: `worker.log`, `slurm.out`) are never touched.
const OUT_ENTRIES: [&str; 4] = ["runs", trial::RUNS_FILE, trial::TRACES_FILE, "work"];
/// The file that marks a work directory as a worker's (`RATCHET_WORKER_DIR`, `<out>/work`): only
/// a marked directory has its checkouts replaced.
pub const WORK_MARK: &str = ".ratchet-worker-dir";

/// Refuse an `--out` directory the worker would clobber: a symbolic link, something other than a
/// directory, or a directory that holds a `runs/`, `runs.jsonl`, `traces.json` or `work/` no
/// worker wrote (no `worker.pid` beside them: a worker writes it before any of them).
fn check_out_dir(out: &Path) -> Result<()> {
    let fresh = "give each trial a directory of its own that does not exist yet (or is empty)";
    if let Some(what) = in_work_tree(out) {
        return Err(Error::usage(format!("--out {} {what}; the worker would write its runs among the repository's files", out.display()))
            .hint(format!(
                "{fresh}, outside the work tree or in a directory git ignores (ratchet's own controller uses .ratchet/trials/)"
            )));
    }
    let meta = match std::fs::symlink_metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_path(out),
    };
    if meta.file_type().is_symlink() {
        return Err(Error::usage(format!(
            "--out {} is a symbolic link; the worker writes and clears only a real directory",
            out.display()
        ))
        .hint(fresh));
    }
    if !meta.is_dir() {
        return Err(Error::usage(format!("--out {} exists and is not a directory", out.display())).hint(fresh));
    }
    let present: Vec<&str> = OUT_ENTRIES.iter().copied().filter(|n| std::fs::symlink_metadata(out.join(n)).is_ok()).collect();
    let linked: Vec<&str> = present.iter().copied().filter(|n| out.join(n).is_symlink()).collect();
    if !linked.is_empty() {
        return Err(Error::usage(format!(
            "--out {}: {} is a symbolic link, which the worker would replace",
            out.display(),
            linked.join(", ")
        ))
        .hint(fresh));
    }
    if !present.is_empty() && !out.join(trial::PID_FILE).is_file() {
        return Err(Error::usage(format!(
            "--out {} already holds {} that no ratchet worker wrote; the worker would replace {}",
            out.display(),
            present.join(", "),
            if present.len() == 1 { "it" } else { "them" }
        ))
        .hint(fresh));
    }
    Ok(())
}

/// Why `out` is no place for a worker's output, if it lies in a git work tree: it holds (or is)
/// a file git tracks, or git does not ignore it, so its runs would show up as the user's
/// untracked files (and in the next hypothesis). `None` outside any work tree, or ignored.
fn in_work_tree(out: &Path) -> Option<String> {
    let base = out.ancestors().find(|a| a.is_dir())?;
    let full = base.canonicalize().ok()?.join(out.strip_prefix(base).ok()?);
    let repo = git2::Repository::discover(base).ok()?;
    let root = repo.workdir()?.canonicalize().ok()?;
    let rel = full.strip_prefix(&root).ok()?.to_str()?.trim_end_matches('/').to_string();
    let index = repo.index().ok()?;
    let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
    if let Some(tracked) = index.iter().map(|e| String::from_utf8_lossy(&e.path).into_owned()).find(|p| *p == rel || p.starts_with(&prefix))
    {
        return Some(format!("holds {tracked}, which git tracks"));
    }
    let ignored = !rel.is_empty() && [rel.clone(), prefix].iter().any(|p| repo.is_path_ignored(p).unwrap_or(false));
    (!ignored).then(|| format!("is in the work tree of {} and git does not ignore it", root.display()))
}

/// Make `work` the worker's work directory: a new or empty one is marked as ratchet's; an
/// existing one must carry the mark (or be one a worker made before marks existed: its bare
/// `git/` and `state/`), so that a directory of the user's never has its `incumbent/` or
/// `candidate/` replaced.
fn claim_work_dir(work: &Path) -> Result<()> {
    let fix = "point RATCHET_WORKER_DIR at a new or empty directory: the worker replaces the checkouts it makes there";
    match std::fs::symlink_metadata(work) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Error::usage(format!("the work directory {} is a symbolic link", work.display())).hint(fix))
        }
        Ok(m) if !m.is_dir() => return Err(Error::usage(format!("the work directory {} is not a directory", work.display())).hint(fix)),
        Ok(_) => {
            // Empty, or holding only the lock of a worker killed right after taking it.
            let names: Vec<std::ffi::OsString> = std::fs::read_dir(work).with_path(work)?.flatten().map(|e| e.file_name()).collect();
            let empty = names.iter().all(|n| n == "lock");
            let legacy = work.join("git/HEAD").is_file() && work.join("state").is_dir();
            if !empty && !legacy && !work.join(WORK_MARK).is_file() {
                return Err(Error::usage(format!(
                    "the work directory {} holds files and was not made by a ratchet worker (no {WORK_MARK} in it)",
                    work.display()
                ))
                .hint(fix));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(work).with_path(work)?,
        Err(e) => return Err(e).with_path(work),
    }
    let mark = work.join(WORK_MARK);
    if !mark.is_file() {
        std::fs::write(&mark, "a ratchet worker's work directory: its incumbent/ and candidate/ checkouts are replaced on each trial\n")
            .with_path(&mark)?;
    }
    Ok(())
}

/// Remove what the worker made at `path`; a symbolic link there is removed itself, never followed.
fn remove_own(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).with_path(path),
        Ok(_) => std::fs::remove_file(path).with_path(path),
        Err(_) => Ok(()),
    }
}

/// The worker's bare git directory under `work`, whole. A worker killed while making it leaves
/// libgit2's `HEAD.lock` or `config.lock` and no HEAD; one killed while fetching a bundle leaves
/// a ref's `.lock`: either made every later trial on the slot fail. So it is made aside and
/// renamed into place, a half-made one is made again, and lock files in it are removed: the
/// caller holds the work directory's lock, so no live process uses it.
fn git_dir(work: &Path) -> Result<PathBuf> {
    let git_dir = work.join("git");
    let whole = git_dir.join("HEAD").is_file() && git_dir.join("config").is_file() && git2::Repository::open_bare(&git_dir).is_ok();
    // What a worker killed while making one aside left.
    let fresh = work.join("git.new");
    remove_own(&fresh)?;
    if !whole {
        remove_own(&git_dir)?;
        git2::Repository::init_bare(&fresh)?;
        crate::fault::point("worker-mid-git-init");
        std::fs::rename(&fresh, &git_dir).with_path(&git_dir)?;
    }
    remove_locks(&git_dir)?;
    Ok(git_dir)
}

/// Remove every `*.lock` file under a git directory (its object store aside: it holds none).
fn remove_locks(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).with_path(dir)?.flatten() {
        let (path, name) = (e.path(), e.file_name());
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() && name != "objects" {
            remove_locks(&path)?;
        } else if kind.is_file() && name.to_string_lossy().ends_with(".lock") {
            std::fs::remove_file(&path).with_path(&path)?;
        }
    }
    Ok(())
}

fn parse_oid(s: &str, flag: &str) -> Result<Oid> {
    if s.len() != 40 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::usage(format!("{flag} {s:?}: give the full 40-hex-digit commit id")));
    }
    Oid::from_str(s).map_err(|e| Error::usage(format!("{flag} {s:?}: {}", e.message())))
}

/// Both commits checked out fresh under `work` (`incumbent/`, `candidate/`), from a git directory
/// of the worker's own that reads the repository's objects in place (git alternates) or, for a
/// bundle, fetches it: the repository itself is only read.
fn checkouts(repo: &Path, work: &Path, incumbent: Oid, candidate: Oid) -> Result<(PathBuf, PathBuf)> {
    let git_dir = git_dir(work)?;
    if repo.is_file() {
        // A bundle (`git bundle create`): libgit2 cannot read one, git can.
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&git_dir)
            .args(["fetch", "--quiet"])
            .arg(repo)
            .arg("+refs/*:refs/bundle/*")
            .output()
            .map_err(|e| Error::failure(format!("cannot run git to read the bundle {}: {e}", repo.display())))?;
        if !out.status.success() {
            return Err(Error::repo(format!(
                "git could not read the bundle {}: {}",
                repo.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    } else {
        let src = git2::Repository::open(repo)
            .map_err(|e| Error::repo(format!("--repo {}: not a git repository ({})", repo.display(), e.message())))?;
        let objects = src.commondir().join("objects").canonicalize().with_path(src.commondir())?;
        let alt = git_dir.join("objects/info/alternates");
        std::fs::create_dir_all(alt.parent().expect("has a parent")).with_path(&alt)?;
        crate::fsutil::write_atomic(&alt, format!("{}\n", objects.display()).as_bytes())?;
    }
    let r = git2::Repository::open_bare(&git_dir)?;
    let mut dirs = vec![];
    for (name, oid) in [("incumbent", incumbent), ("candidate", candidate)] {
        let commit = r.find_commit(oid).map_err(|_| {
            Error::repo(format!("the {name} commit {oid} is not in {}", repo.display()))
                .hint("the controller must make both commits reachable there (push them, or rebuild the bundle)")
        })?;
        let dir = work.join(name);
        remove_own(&dir)?;
        std::fs::create_dir_all(&dir).with_path(&dir)?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.force().target_dir(&dir).update_index(false);
        r.checkout_tree(commit.tree()?.as_object(), Some(&mut co))?;
        crate::fault::point(&format!("worker-after-{name}-checkout"));
        dirs.push(dir);
    }
    let cand = dirs.pop().expect("two checkouts");
    Ok((dirs.pop().expect("two checkouts"), cand))
}
