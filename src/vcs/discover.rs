//! Finding the repository and its work tree as git does. The work tree is the directory that
//! holds the `.git` that discovery followed (a directory, a `gitdir:` file, or a symbolic link to
//! a git directory elsewhere), unless `core.worktree` says otherwise. libgit2 takes the git
//! directory's parent instead when it resolved a `gitdir:` file or a link to a directory outside
//! the work tree (`git init --separate-git-dir`), so ratchet would read its config and make
//! `.ratchet/` and `results/` beside the git directory.

use crate::error::Error;
use git2::{ErrorCode, Repository};
use std::path::{Path, PathBuf};

/// The first directory from `start` upwards that holds a `.git` entry of any kind: where git's
/// discovery stops.
pub fn dot_git_holder(start: &Path) -> Option<PathBuf> {
    let start = start.canonicalize().ok()?;
    start.ancestors().find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok()).map(Path::to_path_buf)
}

/// The git directory that `holder/.git` leads to (canonical), following a symbolic link or a
/// `gitdir:` file.
fn git_dir_of(holder: &Path) -> Option<PathBuf> {
    let dot_git = holder.join(".git");
    if std::fs::metadata(&dot_git).ok()?.is_dir() {
        return dot_git.canonicalize().ok();
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let named = Path::new(text.lines().next()?.strip_prefix("gitdir:")?.trim());
    holder.join(named).canonicalize().ok()
}

/// The repository containing `dir`, with its work tree where git puts it.
pub fn open(dir: &Path) -> Result<Repository, git2::Error> {
    let repo = Repository::discover(dir)?;
    // core.worktree is honoured by libgit2 (submodules set it); a bare repository has no tree.
    if repo.is_bare() || repo.config().and_then(|c| c.get_path("core.worktree")).is_ok() {
        return Ok(repo);
    }
    let Some(holder) = dot_git_holder(dir) else { return Ok(repo) };
    let followed = git_dir_of(&holder).is_some_and(|g| repo.path().canonicalize().is_ok_and(|p| p == g));
    let misread = repo.workdir().and_then(|w| w.canonicalize().ok()).as_deref() != Some(holder.as_path());
    if followed && misread {
        // In memory only: nothing is written to the repository's config.
        repo.set_workdir(&holder, false)?;
    }
    Ok(repo)
}

/// What to tell the user when no repository could be opened from `dir`.
pub fn refusal(dir: &Path, e: &git2::Error) -> Error {
    if e.code() == ErrorCode::Owner {
        // git's own check and fix, worded as git words them (`safe.directory`).
        let at = dot_git_holder(dir).unwrap_or_else(|| dir.to_path_buf());
        return Error::repo(format!(
            "detected dubious ownership in repository at {}: it is owned by someone else, so git (and ratchet) will not work in it",
            at.display()
        ))
        .hint(format!("if you trust it, add an exception, as git says: git config --global --add safe.directory {}", at.display()));
    }
    Error::repo(format!("{} is not inside a git repository", dir.display()))
        .hint("run ratchet from your kernel's repo (or `git init` and commit it first)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_of_another_owner_gets_gits_message_and_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        let at = dir.path().canonicalize().unwrap();
        let e = git2::Error::new(ErrorCode::Owner, git2::ErrorClass::Config, "repository path is not owned by current user");
        let err = refusal(&at.join("sub"), &e);
        assert!(err.message.contains("owned by someone else"), "{}", err.message);
        let hint = err.hint.unwrap();
        assert!(hint.ends_with(&format!("git config --global --add safe.directory {}", at.display())), "{hint}");

        let e = git2::Error::new(ErrorCode::NotFound, git2::ErrorClass::Repository, "could not find repository");
        assert!(refusal(dir.path(), &e).message.contains("is not inside a git repository"));
    }
}
