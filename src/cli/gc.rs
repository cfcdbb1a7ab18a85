//! `ratchet gc`: bound the disk that `.ratchet/` takes. Retention: the run directories (traces,
//! HLO, snapshots) of kept experiments and of the last N experiments stay; the others go. The
//! rows of results.csv and the raw runs of runs.jsonl always stay, so tables, charts and the
//! statistics are unchanged; `ratchet show` of a collected experiment says its traces are gone.
//! Each directory's `looks.json` (the sequential test's record, a few KB) stays too: the record
//! of a decision cannot be rebuilt from the runs, and `ratchet plot --looks` draws it.

use crate::cli::args::GcArgs;
use crate::error::{Result, WithPath};
use crate::store::Status;
use crate::vcs::{self, Repo};
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};

/// Bytes under `path`, symlinks not followed (0 when it does not exist).
pub fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path).map(|rd| rd.flatten().map(|e| du(&e.path())).sum()).unwrap_or(0)
}

/// What `gc` keeps of a collected experiment's directory.
fn kept_file(name: &std::ffi::OsStr) -> bool {
    name == crate::outcome::LOOKS_FILE
}

/// The entries of an experiment directory that `gc` removes, with their total size.
fn removable(dir: &Path) -> (Vec<PathBuf>, u64) {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter(|e| !kept_file(&e.file_name())).map(|e| e.path()).collect())
        .unwrap_or_default();
    let size = entries.iter().map(|p| du(p)).sum();
    (entries, size)
}

/// The experiment directories `gc` would empty, with the bytes it would free: every
/// `experiments/<id>` that is neither kept, nor among the last `keep_last` ids, nor the one an
/// unfinished journal names, and that still holds more than its `looks.json`.
pub fn collectable(state_dir: &Path, rows: &[crate::store::ResultRow], keep_last: usize) -> Vec<(u64, PathBuf, u64)> {
    let mut ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    let recent: Vec<u64> = ids.iter().rev().take(keep_last).cloned().collect();
    let kept: Vec<u64> = rows.iter().filter(|r| r.status == Status::Keep).map(|r| r.id).collect();
    let in_flight = crate::journal::load(state_dir).map(|j| j.id);
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(crate::layout::experiments_dir(state_dir)) else { return out };
    for e in rd.flatten() {
        let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else { continue };
        // A symbolic link there was put by someone else: what it points to is not ratchet's.
        if e.file_type().map_or(true, |t| t.is_symlink()) {
            continue;
        }
        // An id with no row yet (an experiment running or left unfinished) is never collected.
        let recorded = ids.contains(&id);
        if !recorded || kept.contains(&id) || recent.contains(&id) || in_flight == Some(id) {
            continue;
        }
        let (entries, size) = removable(&e.path());
        if !entries.is_empty() {
            out.push((id, e.path(), size));
        }
    }
    out.sort();
    out
}

/// The trial directories of parallel sweeps (`.ratchet/trials/<t>`) that `gc` would remove, with
/// their sizes, under the same retention: a recorded trial (its `experiment` file, runs that
/// name it, or runs whose traces it holds) goes when none of its experiments is kept or among the last `keep_last`; an
/// unrecorded one goes when the journal no longer tracks it (a forgotten one). A trial the
/// journal tracks always stays.
pub fn collectable_trials(
    state_dir: &Path,
    rows: &[crate::store::ResultRow],
    runs: &[crate::bench::RunRecord],
    keep_last: usize,
) -> Vec<(String, PathBuf, u64)> {
    let mut ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    let stay: Vec<String> = ids
        .iter()
        .rev()
        .take(keep_last)
        .cloned()
        .chain(rows.iter().filter(|r| r.status == Status::Keep).map(|r| r.id))
        .map(|i| i.to_string())
        .collect();
    let tracked = crate::scale::controller::journaled_trials(state_dir);
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(crate::layout::trials_dir(state_dir)) else { return out };
    for e in rd.flatten() {
        let (name, dir) = (e.file_name().to_string_lossy().into_owned(), e.path());
        if tracked.contains(&name) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let inside = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| p.starts_with(&dir));
        // A recorded trial's runs name it (`trial`); its traces and HLO lie inside it.
        let mut owners: Vec<String> = runs
            .iter()
            .filter(|r| r.trial.as_deref() == Some(name.as_str()) || inside(&r.trace) || inside(&r.hlo))
            .map(|r| r.experiment.clone())
            .collect();
        if let Ok(id) = std::fs::read_to_string(dir.join(crate::scale::controller::RECORDED_AS)) {
            owners.push(id.trim().to_string());
        }
        if owners.iter().any(|o| stay.iter().any(|s| s == o)) {
            continue;
        }
        out.push((name, dir.clone(), du(&dir)));
    }
    out.sort();
    out
}

pub fn run(ws: &Workspace, args: &GcArgs) -> Result<()> {
    let _repo = &ws.repo;
    let state_dir = ws.state_dir.clone();
    let rows = ws.store.rows()?;
    let before = du(&state_dir);
    let victims = collectable(&state_dir, &rows, args.keep_last);
    let freed: u64 = victims.iter().map(|v| v.2).sum();
    let verb = if args.dry_run { "would remove" } else { "removed" };
    let ids: Vec<String> = victims.iter().map(|v| v.0.to_string()).collect();
    if !args.dry_run {
        for (_, path, _) in &victims {
            for entry in removable(path).0 {
                let gone =
                    if entry.is_dir() && !entry.is_symlink() { std::fs::remove_dir_all(&entry) } else { std::fs::remove_file(&entry) };
                gone.with_path(&entry)?;
            }
        }
    }
    println!(
        "retention: the run directories of kept experiments and of the last {} stay; results.csv and runs.jsonl are never touched",
        args.keep_last
    );
    if victims.is_empty() {
        println!("nothing to collect");
    } else {
        println!(
            "{verb} the run directories of {} experiment{} ({}): {}",
            victims.len(),
            if victims.len() == 1 { "" } else { "s" },
            ids.join(", "),
            crate::admit::human(freed)
        );
    }
    let mut freed_total = freed;
    let runs = ws.store.runs()?;
    let trials = collectable_trials(&state_dir, &rows, &runs, args.keep_last);
    if !trials.is_empty() {
        let size: u64 = trials.iter().map(|t| t.2).sum();
        if !args.dry_run {
            for (_, dir, _) in &trials {
                std::fs::remove_dir_all(dir).with_path(dir)?;
            }
        }
        println!(
            "{verb} the run directories of {} parallel-sweep trial{}: {}",
            trials.len(),
            if trials.len() == 1 { "" } else { "s" },
            crate::admit::human(size)
        );
        freed_total += size;
    }
    if args.cache {
        let cache = state_dir.join("cache");
        let size = du(&cache);
        if !args.dry_run && cache.exists() {
            std::fs::remove_dir_all(&cache)?;
        }
        println!("{verb} the compilation cache ({}): the next runs compile afresh", crate::admit::human(size));
        freed_total += size;
    }
    let after = if args.dry_run { before.saturating_sub(freed_total) } else { du(&state_dir) };
    println!(".ratchet: {} -> {}", crate::admit::human(before), crate::admit::human(after));
    Ok(())
}

/// "disk: .ratchet 227.1 MB (experiments 200.3 MB, cache 20.0 MB), results 1.2 MB; `ratchet gc` would free 180.2 MB".
pub fn disk_line(repo: &Repo, rows: &[crate::store::ResultRow]) -> String {
    let state_dir = repo.state_dir();
    let total = du(&state_dir);
    let parts: Vec<String> = ["experiments", "trials", "slots", "cache", "worktrees", "calibration"]
        .iter()
        .map(|d| (d, du(&state_dir.join(d))))
        .filter(|(_, s)| *s > 0)
        .map(|(d, s)| format!("{d} {}", crate::admit::human(s)))
        .collect();
    let results = du(&repo.root().join(vcs::RESULTS_DIR));
    let free: u64 = collectable(&state_dir, rows, crate::cli::args::GC_KEEP_LAST).iter().map(|v| v.2).sum();
    let mut line = format!("disk: .ratchet {}", crate::admit::human(total));
    if !parts.is_empty() {
        line.push_str(&format!(" ({})", parts.join(", ")));
    }
    line.push_str(&format!(", results {}", crate::admit::human(results)));
    if free > 0 {
        line.push_str(&format!("; `ratchet gc` would free {}", crate::admit::human(free)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ResultRow, Status};

    #[test]
    fn a_recorded_trial_stays_by_the_runs_that_name_it_without_its_experiment_file() {
        let d = tempfile::tempdir().unwrap();
        let trials = crate::layout::trials_dir(d.path());
        for t in ["t1", "t2", "t3"] {
            std::fs::create_dir_all(trials.join(t)).unwrap();
        }
        // t1: kept experiment 1, named by its runs alone; t3: by its file alone; t2: nobody's.
        std::fs::write(trials.join("t3").join(crate::scale::controller::RECORDED_AS), "1").unwrap();
        let rows = vec![ResultRow::unmeasured(1, Status::Keep, "m", String::new(), String::new())];
        let run: crate::bench::RunRecord = serde_json::from_str(
            r#"{"experiment":"1","trial":"t1","run":1,"side":"candidate","commit":"c","time":"t","status":"ok","wall_s":1.0,
            "latency_ms":1.0,"latency_source":"host","value":1.0,"flops":null,"bytes":null,"min_bytes":null,"out_dir":"/x"}"#,
        )
        .unwrap();
        let gone: Vec<String> = collectable_trials(d.path(), &rows, &[run], 0).into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(gone, ["t2"]);
    }
}
