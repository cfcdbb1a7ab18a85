//! `ratchet retry ID`: put a parked hypothesis (`refs/ratchet/discarded/ID`) back into the
//! working tree as an uncommitted change on top of HEAD, ready to run again; with `--run` or
//! `--pairs N` it runs at once. Unlike `git cherry-pick`, nothing is committed: the change
//! goes through the ratchet again instead of becoming the incumbent untested.

use crate::cli::args::RetryArgs;
use crate::error::{Error, Result};
use crate::store::Status;
use crate::vcs::{self};
use crate::workspace::Workspace;

/// Apply experiment `args.id`'s parked change to the working tree; returns the message to run
/// it under (`<its message> (retry of <id>)`).
pub fn apply(ws: &Workspace, args: &RetryArgs) -> Result<String> {
    let repo = &ws.repo;
    let store = &ws.store;
    let rows = store.rows()?;
    let row = rows
        .iter()
        .find(|r| r.id == args.id)
        .ok_or_else(|| Error::usage(format!("no experiment {} in results/results.csv", args.id)).hint("`ratchet results` lists the ids"))?;
    if row.status == Status::Keep {
        return Err(Error::usage(format!("experiment {} was kept: its change is in the history already", args.id))
            .hint("to measure HEAD again: ratchet \"experiment: re-measure\" --allow-empty"));
    }
    // Opened as git finds the work tree (a separate git dir too): the patch is applied there.
    let git = crate::vcs::open_repository(repo.root())?;
    let name = vcs::discarded_ref(&args.id.to_string());
    let parked = match git.find_reference(&name).and_then(|r| r.peel_to_commit()) {
        Ok(c) => c,
        Err(_) => {
            return Err(Error::usage(format!("experiment {} ({}) has no parked hypothesis at {name}", args.id, row.status.as_str()))
                .hint("only a measured, reverted hypothesis is parked; one skipped or refused never made a commit"));
        }
    };
    let changes = repo.changes()?;
    if !changes.is_empty() {
        return Err(Error::repo(format!(
            "the working tree has changes ({}): a retry would mix them into the hypothesis",
            changes.join(", ")
        ))
        .hint("commit or stash them first (git stash), then retry"));
    }
    let parent = parked.parent(0)?;
    let mut opts = git2::DiffOptions::new();
    opts.show_binary(true);
    let diff = git.diff_tree_to_tree(Some(&parent.tree()?), Some(&parked.tree()?), Some(&mut opts))?;
    let files: Vec<String> =
        diff.deltas().filter_map(|d| d.new_file().path().or(d.old_file().path()).map(|p| p.display().to_string())).collect();
    refuse_clobber(ws, &git, &diff, args.id)?;
    // libgit2 checks every hunk before it writes: a change that no longer applies leaves the
    // working tree as it was.
    git.apply(&diff, git2::ApplyLocation::WorkDir, None).map_err(|e| {
        Error::repo(format!("experiment {}'s change does not apply to HEAD any more: {}", args.id, e.message()))
            .hint(format!("see it with git show {name}, and redo the edit by hand"))
    })?;
    // File names and the message are the hypothesis's: printable, each on its line.
    let shown: Vec<String> = files.iter().map(|f| crate::printable::line(f).into_owned()).collect();
    println!("re-applied experiment {} ({}) to the working tree: {}", args.id, row.status.as_str(), shown.join(", "));
    let message = format!("{} (retry of {})", row.message.lines().next().unwrap_or("").trim(), args.id);
    if !(args.run || args.pairs.is_some()) {
        let pairs = row.runs.max(16) / 2 * 2;
        println!(
            "run it with: ratchet retry {} --run   (or with more pairs: ratchet \"{}\" --pairs {pairs})",
            args.id,
            crate::printable::line(&message)
        );
        println!("drop it with: git checkout -- {}", shown.join(" "));
    }
    Ok(message)
}

/// Refuse a retry that would write over a file git does not track: libgit2 writes an added path
/// whatever lies there, and an ignored file (a local config, data) is not among the changes
/// checked above. A path through a symbolic link is refused too, as the sweep's edits are.
fn refuse_clobber(ws: &Workspace, git: &git2::Repository, diff: &git2::Diff, id: u64) -> Result<()> {
    let root = ws.repo.root();
    let head = git.head()?.peel_to_tree()?;
    for d in diff.deltas() {
        let Some(rel) = d.new_file().path().filter(|_| d.status() != git2::Delta::Deleted) else { continue };
        let tracked = head.get_path(rel).is_ok();
        let full = root.join(rel);
        let through_link = rel
            .ancestors()
            .skip(1)
            .filter(|a| !a.as_os_str().is_empty())
            .find(|a| std::fs::symlink_metadata(root.join(a)).is_ok_and(|m| m.file_type().is_symlink()));
        if let Some(link) = through_link {
            return Err(Error::repo(format!(
                "experiment {id}'s change writes {}, but {} is a symbolic link, which retry will not write through",
                rel.display(),
                link.display()
            ))
            .hint("replace the link with a directory (or move it away), then retry; nothing was changed"));
        }
        if !tracked && std::fs::symlink_metadata(&full).is_ok() {
            let ignored = git.is_path_ignored(rel).unwrap_or(false);
            return Err(Error::repo(format!(
                "experiment {id}'s change adds {}, but {} file is there already, which retry would overwrite",
                rel.display(),
                if ignored { "an ignored" } else { "an untracked" }
            ))
            .hint(format!(
                "move it out of the work tree first (e.g. mv {0} ../{1}.saved), then retry; nothing was changed",
                rel.display(),
                rel.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
            )));
        }
    }
    Ok(())
}
