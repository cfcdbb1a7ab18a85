//! The git side of the ratchet (git2): refuse unsafe repo states, commit the working tree's
//! change as a hypothesis, keep it or revert to the incumbent (keeping the discarded commit under
//! `refs/ratchet/discarded/<id>`), and keep a detached worktree of the incumbent to measure it.

use crate::error::{Error, Result};
use git2::{build::CheckoutBuilder, BranchType, IndexAddOption, Oid, Repository, RepositoryState, ResetType, Signature, StatusOptions};
use std::path::{Path, PathBuf};

/// ratchet's own directories in the user's repo: never committed, never touched by keep/revert.
pub const STATE_DIR: &str = ".ratchet";
pub const RESULTS_DIR: &str = "results";
pub const DISCARDED_PREFIX: &str = "refs/ratchet/discarded/";
const WORKTREE_NAME: &str = "ratchet-incumbent";

pub struct Repo {
    pub repo: Repository,
    root: PathBuf,
}

/// The first 8 hex digits of a commit id, as messages show it.
pub fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}

/// Whether `path` (relative to the repo root) belongs to ratchet rather than to the hypothesis.
pub fn is_ratchet_path(path: &str) -> bool {
    let p = path.trim_start_matches("./");
    [STATE_DIR, RESULTS_DIR].iter().any(|d| p == *d || p.starts_with(&format!("{d}/")))
}

impl Repo {
    /// The repository containing `dir`.
    pub fn discover(dir: &Path) -> Result<Repo> {
        let repo = Repository::discover(dir).map_err(|_| {
            Error::repo(format!("{} is not inside a git repository", dir.display()))
                .hint("run ratchet from your kernel's repo (or `git init` and commit it first)")
        })?;
        let root = repo.workdir().ok_or_else(|| Error::repo("the repository is bare; ratchet needs a working tree"))?.to_path_buf();
        let root = root.canonicalize().unwrap_or(root);
        Ok(Repo { repo, root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// Refuse states where committing is unsafe. Returns the branch name and its commit.
    pub fn check_safe(&self) -> Result<(String, Oid)> {
        let head = match self.repo.head() {
            Ok(h) => h,
            Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
                return Err(Error::repo("the current branch has no commits yet, so there is no incumbent to compare with")
                    .hint("commit the kernel as it is first (git add -A && git commit -m baseline)"));
            }
            Err(e) => return Err(e.into()),
        };
        if self.repo.head_detached()? {
            return Err(Error::repo("HEAD is detached: kept commits would belong to no branch")
                .hint("check out a branch first, e.g. `git switch -c kernel-opt`"));
        }
        let state = self.repo.state();
        if state != RepositoryState::Clean {
            return Err(Error::repo(format!("a git operation is in progress ({state:?})"))
                .hint("finish or abort it first (e.g. `git merge --abort`, `git rebase --continue`)"));
        }
        let name = head.shorthand().unwrap_or("HEAD").to_string();
        let oid = head.target().ok_or_else(|| Error::repo("HEAD points nowhere"))?;
        // A tracked file under ratchet's directories would be clobbered by a revert.
        let index = self.repo.index()?;
        if let Some(e) = index.iter().find(|e| is_ratchet_path(&String::from_utf8_lossy(&e.path))) {
            return Err(Error::repo(format!(
                "{} is tracked by git, but {STATE_DIR}/ and {RESULTS_DIR}/ belong to ratchet, which never commits them",
                String::from_utf8_lossy(&e.path)
            ))
            .hint(format!("untrack them: git rm -r --cached {RESULTS_DIR} {STATE_DIR} && git commit -m 'untrack ratchet output'")));
        }
        Ok((name, oid))
    }

    /// Add ratchet's directories to `.git/info/exclude`, once.
    pub fn ensure_excludes(&self) -> Result<()> {
        let path = self.repo.commondir().join("info").join("exclude");
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        let wanted = [format!("/{STATE_DIR}/"), format!("/{RESULTS_DIR}/")];
        let missing: Vec<&String> = wanted.iter().filter(|w| !current.lines().any(|l| l.trim() == w.as_str())).collect();
        if missing.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(path.parent().unwrap())?;
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# ratchet's state and results: never part of a hypothesis\n");
        for m in missing {
            text.push_str(m);
            text.push('\n');
        }
        std::fs::write(&path, text)?;
        Ok(())
    }

    /// Paths with changes that would go into a hypothesis commit (tracked changes and untracked,
    /// not ignored files), ratchet's own directories left out.
    pub fn changes(&self) -> Result<Vec<String>> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true).include_ignored(false).exclude_submodules(true);
        let statuses = self.repo.statuses(Some(&mut opts))?;
        Ok(statuses
            .iter()
            .filter(|s| !s.status().is_ignored())
            .filter_map(|s| s.path().map(str::to_string))
            .filter(|p| !is_ratchet_path(p))
            .collect())
    }

    /// Untracked, not ignored entries (a new directory is one entry, `dir/`), ratchet's own left out.
    pub fn untracked_entries(&self) -> Result<Vec<String>> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(false).include_ignored(false).exclude_submodules(true);
        let statuses = self.repo.statuses(Some(&mut opts))?;
        Ok(statuses
            .iter()
            .filter(|s| s.status().is_wt_new())
            .filter_map(|s| s.path().map(str::to_string))
            .filter(|p| !is_ratchet_path(p))
            .collect())
    }

    /// Add `paths` (written into the repo by the benchmark) to `.git/info/exclude`, so that they
    /// never leak into a hypothesis commit; they are left on disk.
    pub fn exclude_benchmark_outputs(&self, paths: &[String]) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let path = self.repo.commondir().join("info").join("exclude");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# written into the repo by the benchmark (ratchet keeps them out of hypotheses)\n");
        for p in paths {
            text.push('/');
            text.push_str(p);
            text.push('\n');
        }
        std::fs::create_dir_all(path.parent().unwrap())?;
        crate::store::write_atomic(&path, text.as_bytes())
    }

    /// Tracked files whose content differs from HEAD (what a hard reset would overwrite).
    pub fn tracked_changes(&self) -> Result<Vec<String>> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(false).exclude_submodules(true);
        let statuses = self.repo.statuses(Some(&mut opts))?;
        Ok(statuses.iter().filter_map(|s| s.path().map(str::to_string)).filter(|p| !is_ratchet_path(p)).collect())
    }

    fn signature(&self) -> Result<Signature<'static>> {
        Ok(match self.repo.signature() {
            Ok(s) => s.to_owned(),
            Err(_) => Signature::now("ratchet", "ratchet@localhost")?,
        })
    }

    /// Stage the whole working tree (ratchet's directories excepted) into a tree.
    fn stage_all(&self) -> Result<Oid> {
        let mut index = self.repo.index()?;
        let mut skip = |path: &Path, _: &[u8]| -> i32 {
            if is_ratchet_path(&path.to_string_lossy()) {
                1
            } else {
                0
            }
        };
        index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))?;
        index.update_all(["*"], Some(&mut skip))?;
        index.write()?;
        Ok(index.write_tree()?)
    }

    /// Commit the working tree's change on top of HEAD, with `message`. With `allow_empty`, a
    /// clean tree gives an empty commit (to re-measure).
    pub fn commit_hypothesis(&self, message: &str, allow_empty: bool) -> Result<Oid> {
        let parent = self.repo.head()?.peel_to_commit()?;
        let tree_id = self.stage_all()?;
        if tree_id == parent.tree_id() && !allow_empty {
            return Err(Error::repo("nothing to test: the working tree has no change against HEAD")
                .hint("edit the kernel first, or pass --allow-empty to re-measure HEAD as it is"));
        }
        let tree = self.repo.find_tree(tree_id)?;
        let sig = self.signature()?;
        Ok(self.repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])?)
    }

    /// Snapshot uncommitted tracked edits (made while the experiment ran) as a commit on top of
    /// HEAD, so a revert cannot lose them. `None` when there are none.
    pub fn snapshot_edits(&self, message: &str) -> Result<Option<Oid>> {
        if self.tracked_changes()?.is_empty() {
            return Ok(None);
        }
        let parent = self.repo.head()?.peel_to_commit()?;
        let tree_id = self.stage_all()?;
        let tree = self.repo.find_tree(tree_id)?;
        let sig = self.signature()?;
        Ok(Some(self.repo.commit(None, &sig, &sig, message, &tree, &[&parent])?))
    }

    /// Point `refs/ratchet/discarded/<id>` at `commit`.
    pub fn mark_discarded(&self, id: &str, commit: Oid) -> Result<String> {
        let name = format!("{DISCARDED_PREFIX}{id}");
        self.repo.reference(&name, commit, true, &format!("ratchet: discard experiment {id}"))?;
        Ok(name)
    }

    /// Move the branch, index and working tree back to `incumbent`. Untracked and ignored files
    /// (ratchet's directories among them) are left alone.
    pub fn reset_to(&self, incumbent: Oid) -> Result<()> {
        let obj = self.repo.find_object(incumbent, None)?;
        let mut co = CheckoutBuilder::new();
        co.force();
        self.repo.reset(&obj, ResetType::Hard, Some(&mut co))?;
        Ok(())
    }

    pub fn head_oid(&self) -> Result<Oid> {
        Ok(self.repo.head()?.peel_to_commit()?.id())
    }

    pub fn is_ancestor(&self, ancestor: Oid, of: Oid) -> bool {
        ancestor == of || self.repo.graph_descendant_of(of, ancestor).unwrap_or(false)
    }

    /// A detached git worktree at `commit` under `.ratchet/worktrees/incumbent`, created once and
    /// moved to each new incumbent.
    pub fn incumbent_worktree(&self, commit: Oid) -> Result<PathBuf> {
        let path = self.state_dir().join("worktrees").join("incumbent");
        let wt_repo = match Repository::open(&path) {
            Ok(r) if r.is_worktree() => r,
            _ => self.create_worktree(&path, commit)?,
        };
        if wt_repo.head().ok().and_then(|h| h.target()) != Some(commit) || !wt_repo.head_detached()? {
            wt_repo.set_head_detached(commit)?;
        }
        let mut co = CheckoutBuilder::new();
        co.force().remove_untracked(false);
        wt_repo.checkout_head(Some(&mut co))?;
        Ok(path)
    }

    fn create_worktree(&self, path: &Path, commit: Oid) -> Result<Repository> {
        // A stale registration (the directory was deleted) blocks a new worktree of that name.
        if let Ok(wt) = self.repo.find_worktree(WORKTREE_NAME) {
            let mut prune = git2::WorktreePruneOptions::new();
            prune.valid(true).working_tree(true).locked(true);
            wt.prune(Some(&mut prune))?;
        }
        if path.exists() {
            std::fs::remove_dir_all(path)?;
        }
        std::fs::create_dir_all(path.parent().unwrap())?;
        // libgit2 adds worktrees on a branch only; use a scratch branch, then detach and drop it.
        let scratch = format!("{WORKTREE_NAME}-tmp");
        let c = self.repo.find_commit(commit)?;
        let branch = self.repo.branch(&scratch, &c, true)?;
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(branch.get()));
        let wt = self.repo.worktree(WORKTREE_NAME, path, Some(&opts))?;
        let wt_repo = Repository::open_from_worktree(&wt)?;
        wt_repo.set_head_detached(commit)?;
        self.repo.find_branch(&scratch, BranchType::Local)?.delete()?;
        Ok(wt_repo)
    }

    /// `git diff --stat`-like summary of `commit` against its first parent.
    pub fn diff_stat(&self, commit: Oid) -> Result<String> {
        let c = self.repo.find_commit(commit)?;
        let tree = c.tree()?;
        let parent = c.parent(0).ok().map(|p| p.tree()).transpose()?;
        let diff = self.repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), None)?;
        let stats = diff.stats()?;
        let buf = stats.to_buf(git2::DiffStatsFormat::FULL, 80)?;
        Ok(buf.as_str().unwrap_or("").to_string())
    }
}
