//! The git side of the ratchet (git2): refuse unsafe repo states, commit the working tree's
//! change as a hypothesis (HEAD's tree plus exactly the changed paths), keep it or revert to the
//! incumbent along the changed paths only (parking the discarded commit under
//! `refs/ratchet/discarded/<id>`, never overwritten), and keep a detached worktree of the
//! incumbent, updated along changed paths, to measure it.

use crate::error::{Error, Result};
use git2::build::{CheckoutBuilder, TreeUpdateBuilder};
use git2::{BranchType, FileMode, Oid, Repository, RepositoryState, Signature, StatusOptions, Tree};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod blind;
mod discover;
mod outputs;
mod walk;
mod watch;

pub use discover::open as open_repository;
pub use outputs::Outputs;

/// ratchet's own directories in the user's repo: never committed, never touched by keep/revert.
pub const STATE_DIR: &str = ".ratchet";
pub const RESULTS_DIR: &str = "results";
pub const DISCARDED_PREFIX: &str = "refs/ratchet/discarded/";
/// Tracked files changed while a kept experiment ran, set aside on top of the kept commit.
pub const MEANWHILE_PREFIX: &str = "refs/ratchet/meanwhile/";
const WORKTREE_NAME: &str = "ratchet-incumbent";
/// Index entry flag (extended flags) of a path outside the sparse-checkout cone. Source: libgit2
/// include/git2/index.h, `GIT_INDEX_ENTRY_SKIP_WORKTREE = (1 << 14)`.
const SKIP_WORKTREE: u16 = 1 << 14;
/// Largest attributes file read for filter drivers.
const ATTRIBUTES_CAP: u64 = 16 << 20;
/// Git config switches that let ratchet commit although hooks or signing are configured.
pub const SKIP_HOOKS_KEY: &str = "ratchet.skipHooks";
pub const UNSIGNED_KEY: &str = "ratchet.unsignedCommits";

/// The parked-hypothesis ref of experiment `id` (ids are unique across the repository's worktrees).
pub fn discarded_ref(id: &str) -> String {
    format!("{DISCARDED_PREFIX}{id}")
}

/// Whether a path component names git's directory, as git itself guards it: case folded, and with
/// the trailing dots/spaces and ignorable code points that NTFS and HFS+ drop (git's
/// `verify_dotfile`), so `.GIT`, `.git.` and `.g\u{200c}it` all count.
fn is_git_component(c: &str) -> bool {
    let ignorable = |ch: char| matches!(ch, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}');
    let cleaned: String = c.chars().filter(|ch| !ignorable(*ch)).collect();
    let cleaned = cleaned.trim_end_matches(['.', ' ']);
    cleaned.eq_ignore_ascii_case(".git") || cleaned.eq_ignore_ascii_case("git~1")
}

/// Normalise a repo-relative path a hypothesis names (`.` dropped, `..` resolved lexically) and
/// refuse one that leaves the work tree, enters a `.git` directory (at any depth: submodules and
/// nested repos have theirs), or enters ratchet's own directories (case folded, as a folding
/// filesystem would see them).
pub fn normalise_rel(p: &str) -> std::result::Result<String, String> {
    if p.is_empty() {
        return Err("an empty path".into());
    }
    if p.starts_with('/') || p.contains('\0') {
        return Err(format!("{p:?} must be a relative path inside the repo (no leading /)"));
    }
    let mut parts: Vec<&str> = vec![];
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!("{p:?} leads outside the repo (..)"));
                }
            }
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return Err(format!("{p:?} names the repository itself, not a file"));
    }
    if parts.iter().any(|c| is_git_component(c)) {
        return Err(format!("{p:?} is inside a .git directory, which belongs to git"));
    }
    if [STATE_DIR, RESULTS_DIR].iter().any(|d| parts[0].eq_ignore_ascii_case(d)) {
        return Err(format!("{p:?} is in {}/, which belongs to ratchet", parts[0]));
    }
    Ok(parts.join("/"))
}

/// The refusal of `paths` git holds whose names are not UTF-8 (git's paths are bytes, ratchet's
/// are text): said before anything is committed, so no such file is ever dropped from a
/// hypothesis, a clean-tree check or a checkout without a word.
pub fn not_utf8(paths: &[Vec<u8>]) -> Error {
    let shown: Vec<String> = paths.iter().map(|p| crate::printable::bytes(p)).collect();
    Error::repo(format!(
        "{} changed, and {} not UTF-8: ratchet handles paths as UTF-8 text, so it could neither commit nor check out {}",
        some_of(&shown, 5),
        if shown.len() == 1 { "its name is" } else { "their names are" },
        if shown.len() == 1 { "it" } else { "them" }
    ))
    .hint("rename it to a UTF-8 name (git mv OLD NEW for a tracked file), or move it out of the repository, then run ratchet again")
}

/// Paths that differ between two trees (both sides of renames), sorted. Subtrees with the same
/// id are skipped without being read: a one-file change between two commits of a 10,000-file
/// tree reads only the trees along that path. (libgit2's tree-to-tree diff walks every entry of
/// both trees, ~8 ms there, and keep and revert need two or three such diffs.)
pub fn changed_paths(repo: &Repository, old: &Tree, new: &Tree) -> Result<Vec<String>> {
    let mut out = vec![];
    diff_trees(repo, Some(old), Some(new), "", &mut out)?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// One side of a tree comparison: an entry's id, mode and whether it is a subtree.
type Side = (Oid, i32, bool);

fn diff_trees(repo: &Repository, old: Option<&Tree>, new: Option<&Tree>, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    let side = |t: Option<&Tree>| -> std::collections::BTreeMap<Vec<u8>, Side> {
        t.map(|t| t.iter().map(|e| (e.name_bytes().to_vec(), (e.id(), e.filemode(), e.kind() == Some(git2::ObjectType::Tree)))).collect())
            .unwrap_or_default()
    };
    let (a, b) = (side(old), side(new));
    let mut names: Vec<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (x, y) = (a.get(name), b.get(name));
        if x == y {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else { return Err(not_utf8(&[[prefix.as_bytes(), name].concat()])) };
        let path = format!("{prefix}{name}");
        let subtree = |s: Option<&Side>| -> Result<Option<Tree<'_>>> {
            Ok(match s {
                Some(&(id, _, true)) => Some(repo.find_tree(id)?),
                _ => None,
            })
        };
        let (tx, ty) = (subtree(x)?, subtree(y)?);
        // A blob (or gitlink) on either side is a path of its own; subtrees are compared below.
        if x.is_some_and(|s| !s.2) || y.is_some_and(|s| !s.2) {
            out.push(path.clone());
        }
        if tx.is_some() || ty.is_some() {
            diff_trees(repo, tx.as_ref(), ty.as_ref(), &format!("{path}/"), out)?;
        }
    }
    Ok(())
}

/// The blob `tree` holds at `path`; `None` when it holds none there (absent, or a subtree).
fn blob_at(tree: &Tree, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().filter(|e| e.kind() == Some(git2::ObjectType::Blob)).map(|e| e.id())
}

/// Prefix of the scratch directory, under the state directory, that [`checkout_paths`] checks
/// files out into before renaming them into place (`checkout.tmp.<pid>`).
pub const CHECKOUT_SCRATCH: &str = "checkout.tmp.";

/// Check out `paths` of `tree` into `repo`'s work tree and index, overwriting local changes to
/// them; nothing else is looked at (no whole-tree walk). Untracked files stay.
///
/// A kill at any moment leaves each file either as it was or as `tree` holds it, never torn:
/// libgit2 (which writes in place) checks the files out, filters, modes and links as a checkout
/// gives them, into a scratch directory under `.ratchet/`, each is synced and renamed over its
/// path, and the index entries are written last. So recovery, which tells ratchet's own content
/// from a user's edit by blob id, can never take a half-written file for an edit.
fn checkout_paths(repo: &Repository, tree: &Tree, paths: &[String]) -> Result<()> {
    write_paths(repo, tree, paths, true)
}

/// [`checkout_paths`], the index written too only with `update_index`.
fn write_paths(repo: &Repository, tree: &Tree, paths: &[String], update_index: bool) -> Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else { return Ok(()) };
    let mut index = repo.index()?;
    // A path outside the sparse-checkout cone stays absent: only its index entry moves.
    let skipped = |p: &str| index.get_path(Path::new(p), 0).is_some_and(|e| e.flags_extended & SKIP_WORKTREE != 0);
    let (mut writes, mut removals) = (vec![], vec![]);
    for p in paths {
        match tree.get_path(Path::new(p)) {
            Ok(e) if e.kind() == Some(git2::ObjectType::Blob) => writes.push((p.as_str(), e.id(), e.filemode() as u32, skipped(p))),
            // A submodule's commit is moved by `git submodule update`, never by a checkout of files.
            Ok(e) if e.kind() == Some(git2::ObjectType::Commit) => {}
            _ => removals.push((p.as_str(), skipped(p))),
        }
    }
    let scratch = workdir.join(STATE_DIR).join(format!("{CHECKOUT_SCRATCH}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let result = (|| -> Result<()> {
        let to_write: Vec<&str> = writes.iter().filter(|w| !w.3).map(|w| w.0).collect();
        if !to_write.is_empty() {
            let mut co = CheckoutBuilder::new();
            co.force().remove_untracked(false).disable_pathspec_match(true).update_index(false).refresh(false);
            co.target_dir(&scratch);
            for p in &to_write {
                co.path(*p);
            }
            repo.checkout_tree(tree.as_object(), Some(&mut co))?;
        }
        // Removals first: a file the old tree held may stand where the new one has a directory.
        for (p, skip) in &removals {
            if !*skip {
                remove_tracked(&workdir, p)?;
            }
        }
        for p in &to_write {
            place(&workdir, &scratch, p)?;
        }
        if !update_index {
            return Ok(());
        }
        for (p, id, mode, skip) in &writes {
            let md = if *skip { None } else { Some(std::fs::symlink_metadata(workdir.join(p))?) };
            index.add(&index_entry(p, *id, *mode, md.as_ref()))?;
        }
        for (p, _) in &removals {
            let _ = index.remove_path(Path::new(p));
        }
        index.write()?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Whether a directory between `workdir` and `full` is a symbolic link (a write there would land
/// outside the path git names).
fn via_link(workdir: &Path, full: &Path) -> bool {
    full.ancestors().skip(1).take_while(|a| *a != workdir).any(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
}

/// Remove the tracked file or link at `rel` and the directories it leaves empty, as a checkout does.
fn remove_tracked(workdir: &Path, rel: &str) -> Result<()> {
    let full = workdir.join(rel);
    if via_link(workdir, &full) || !std::fs::symlink_metadata(&full).is_ok_and(|m| !m.is_dir()) {
        return Ok(());
    }
    std::fs::remove_file(&full)?;
    let mut dir = full.parent();
    while let Some(d) = dir.filter(|d| *d != workdir) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// Move the checked-out `rel` from `scratch` over its path in `workdir`: synced first, then one
/// rename, so the path holds the old bytes or the new ones. Where the work tree path is on
/// another filesystem (a mount inside the repo), the file is copied to a temporary name beside
/// it and renamed from there.
fn place(workdir: &Path, scratch: &Path, rel: &str) -> Result<()> {
    let (src, dst) = (scratch.join(rel), workdir.join(rel));
    if via_link(workdir, &dst) {
        return Err(Error::repo(format!(
            "{rel}: a directory on its path is a symbolic link, so checking it out would write outside the path git names"
        ))
        .hint("replace the link with a directory (or remove it), then run `ratchet recover`"));
    }
    let parent = dst.parent().unwrap_or(workdir);
    std::fs::create_dir_all(parent)?;
    let md = std::fs::symlink_metadata(&src)?;
    if md.is_file() {
        crate::fsutil::sync_all(&std::fs::File::open(&src)?)?;
    }
    if let Ok(old) = std::fs::symlink_metadata(&dst) {
        if old.is_dir() {
            // A directory the new tree replaces by a file: its tracked files went with the
            // removals; anything left is the user's, so it stays and the checkout stops here.
            std::fs::remove_dir(&dst).map_err(|e| {
                Error::repo(format!("{rel} is a directory holding untracked files, where the tree has a file ({e})"))
                    .hint("move those files away, then run `ratchet recover`")
            })?;
        }
    }
    match std::fs::rename(&src, &dst) {
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let tmp = parent.join(format!(".{}.tmp.{}", dst.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
            if md.file_type().is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src)?, &tmp)?;
            } else {
                std::fs::copy(&src, &tmp)?;
                crate::fsutil::sync_all(&std::fs::File::open(&tmp)?)?;
            }
            std::fs::rename(&tmp, &dst)?;
        }
        r => r?,
    }
    Ok(())
}

/// The index entry a checkout writes for `rel`: the tree's blob id and mode, the file's stat;
/// without one, the path is outside the sparse-checkout cone and keeps its skip-worktree flag.
fn index_entry(rel: &str, id: Oid, mode: u32, md: Option<&std::fs::Metadata>) -> git2::IndexEntry {
    use std::os::unix::fs::MetadataExt;
    let t = |s: i64, ns: i64| git2::IndexTime::new(s as i32, ns as u32);
    let (ctime, mtime) = md.map(|m| (t(m.ctime(), m.ctime_nsec()), t(m.mtime(), m.mtime_nsec()))).unwrap_or((t(0, 0), t(0, 0)));
    let stat = |f: fn(&std::fs::Metadata) -> u64| md.map(f).unwrap_or(0) as u32;
    let skip = md.is_none();
    git2::IndexEntry {
        ctime,
        mtime,
        dev: stat(|m| m.dev()),
        ino: stat(|m| m.ino()),
        mode,
        uid: stat(|m| m.uid() as u64),
        gid: stat(|m| m.gid() as u64),
        file_size: stat(|m| m.size()),
        id,
        flags: 0,
        flags_extended: if skip { SKIP_WORKTREE } else { 0 },
        path: rel.as_bytes().to_vec(),
    }
}

/// The entry a full status walk reports for the untracked file `path`: the file itself, or its
/// topmost ancestor directory that holds no tracked file (`dir/`), as git lists untracked
/// directories.
fn untracked_entry(index: &git2::Index, path: &str) -> String {
    let tracked_dir = |d: &str| {
        let prefix = format!("{d}/");
        index.find_prefix(prefix.as_str()).is_ok_and(|i| index.get(i).is_some_and(|e| e.path.starts_with(prefix.as_bytes())))
    };
    let mut end = 0;
    while let Some(i) = path[end..].find('/') {
        let dir = &path[..end + i];
        if !tracked_dir(dir) {
            return format!("{dir}/");
        }
        end += i + 1;
    }
    path.to_string()
}

/// Check out `paths` of `tree` into the incumbent checkout `repo` (the paths that differ from the
/// tree it holds), without reading or writing its index: reading and rewriting 10,000 entries
/// cost more than the move itself, and nothing in ratchet reads that index (a full checkout,
/// after a killed move, rewrites it). With an empty in-memory index standing in, libgit2 sees
/// the old files as untracked and never deletes them, so what the new tree no longer holds at a
/// path (a deleted file, a file that became a directory) is removed here first.
fn move_paths(repo: &Repository, tree: &Tree, paths: &[String]) -> Result<()> {
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else { return Ok(()) };
    let mut blobs = vec![];
    for p in paths {
        if tree.get_path(Path::new(p)).is_ok_and(|e| e.kind() != Some(git2::ObjectType::Tree)) {
            blobs.push(p);
        }
        // The old file goes first, whatever replaces it: libgit2 would write a new file through
        // an old symbolic link. Never through a symbolic link among its parents.
        remove_tracked(&workdir, p)?;
    }
    if blobs.is_empty() {
        return Ok(());
    }
    repo.set_index(&mut git2::Index::new()?)?;
    let mut co = CheckoutBuilder::new();
    co.force().remove_untracked(false).disable_pathspec_match(true).update_index(false).refresh(false);
    for p in blobs {
        co.path(p.as_str());
    }
    repo.checkout_tree(tree.as_object(), Some(&mut co))?;
    Ok(())
}

/// What a status walk after the benchmark's runs finds.
#[derive(Debug, Clone, Default)]
pub struct AfterRun {
    /// Untracked, not ignored entries: written by the benchmark.
    pub untracked: Vec<String>,
    /// Tracked paths that differ from HEAD: edits made while the experiment ran.
    pub edited: Vec<String>,
    /// Untracked or edited paths whose names are not UTF-8, which ratchet leaves as they are.
    pub unnamed: Vec<Vec<u8>>,
}

/// Whether `path` holds ratchet's incumbent checkout of another repository, brought along when
/// the whole repository was copied (`cp -r`) or moved: its `.git` file names a ratchet worktree
/// other than `ours`, registered at another directory or no longer at all. Nobody's work (ratchet
/// checks it out by force), so it is replaced; the original's checkout and registration are
/// never touched.
fn copied_incumbent_checkout(path: &Path, ours: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path.join(".git")) else { return false };
    let Some(named) = text.trim().strip_prefix("gitdir:") else { return false };
    let gitdir = path.join(named.trim());
    let ratchets = gitdir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(WORKTREE_NAME))
        && gitdir.parent().and_then(Path::file_name).is_some_and(|d| d == "worktrees");
    if !ratchets || same_dir(&gitdir, ours) {
        return false;
    }
    let registered = std::fs::read_to_string(gitdir.join("gitdir")).ok().map(|t| PathBuf::from(t.trim()));
    !registered.is_some_and(|r| same_dir(&r, &path.join(".git")))
}

/// Whether two paths name the same directory (both canonicalised when they exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    let c = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    c(a) == c(b)
}

pub struct Repo {
    pub repo: Repository,
    root: PathBuf,
    /// Armed by [`Repo::changes`], read by [`Repo::after_run_scan`].
    watch: std::cell::RefCell<Option<watch::Watch>>,
    /// Every status walk reads the whole tree through libgit2 (no stat pass, no watcher).
    full_scan: std::cell::Cell<bool>,
    /// Tracked files the watcher cannot vouch for (hard-linked, mapped), armed with it.
    blind: std::cell::RefCell<Option<blind::Blind>>,
    /// Untracked paths the last [`Repo::changes`] left out as benchmark output (`.ratchet/outputs`).
    left_out: std::cell::RefCell<Vec<String>>,
}

/// Above this many paths to settle, libgit2 walks the whole tree instead (e.g. after every file
/// was touched, when it must re-hash them anyway).
const MAX_SUSPECTS: usize = 2000;

/// The first 8 hex digits of a commit id, as messages show it.
/// The reflog message that marks a scratch branch as ratchet's: a branch of the same name that
/// a user made (or moved) never carries it alone, so ratchet deletes only its own.
const SCRATCH_MARK: &str = "ratchet: scratch branch for a throw-away checkout";

/// Whether the local branch `short` is a scratch branch ratchet made and nobody moved since.
fn is_own_scratch(repo: &Repository, short: &str) -> bool {
    let Ok(log) = repo.reflog(&format!("refs/heads/{short}")) else { return false };
    log.len() == 1 && log.get(0).and_then(|e| e.message().map(|m| m == SCRATCH_MARK)).unwrap_or(false)
}

/// The scratch branch names a worktree `name` may use, in order: `<name>-tmp`, then numbered
/// ones for when a user's branch holds a name.
fn scratch_names(name: &str) -> impl Iterator<Item = String> + '_ {
    (0..32).map(move |i| if i == 0 { format!("{name}-tmp") } else { format!("{name}-tmp{i}") })
}

/// Add the git worktree `name` at `path` with its HEAD detached at `commit`. libgit2 adds
/// worktrees on a branch only, so a scratch branch carries the creation and is deleted at once;
/// a user's branch that happens to have the scratch name is never moved or deleted.
pub fn add_detached_worktree(repo: &Repository, name: &str, path: &Path, commit: Oid) -> Result<Repository> {
    drop_scratch_branches(repo, name);
    let scratch = scratch_names(name).find(|s| repo.find_branch(s, BranchType::Local).is_err()).ok_or_else(|| {
        Error::repo(format!("every scratch branch name ratchet uses for the worktree {name} ({name}-tmp...) is taken by a branch of yours"))
            .hint(format!("rename or delete the branches named {name}-tmp*"))
    })?;
    let reference = repo.reference(&format!("refs/heads/{scratch}"), commit, false, SCRATCH_MARK)?;
    crate::fault::point("mid-worktree");
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    let added = repo.worktree(name, path, Some(&opts));
    let detached = added.and_then(|wt| {
        let wt_repo = Repository::open_from_worktree(&wt)?;
        wt_repo.set_head_detached(commit)?;
        Ok(wt_repo)
    });
    drop_scratch_branches(repo, name);
    Ok(detached?)
}

/// Remove the registration of worktree `name` (with `working_tree`, its directory too). One
/// copied from another repository (`cp -r` of the whole repository) names that repository's git
/// directory as its commondir, through which libgit2's prune would delete the original's
/// registration: it is removed here directly, and its work tree (the original's) is left alone.
pub fn prune_worktree(repo: &Repository, name: &str, working_tree: bool) -> Result<()> {
    let admin = repo.commondir().join("worktrees").join(name);
    let common = std::fs::read_to_string(admin.join("commondir")).ok().map(|t| admin.join(t.trim()));
    if common.is_some_and(|c| !same_dir(&c, repo.commondir())) {
        std::fs::remove_dir_all(&admin)?;
        return Ok(());
    }
    if let Ok(wt) = repo.find_worktree(name) {
        let mut prune = git2::WorktreePruneOptions::new();
        prune.valid(true).working_tree(working_tree).locked(true);
        wt.prune(Some(&mut prune))?;
    }
    Ok(())
}

/// Delete the scratch branches of worktree `name` that ratchet made (left behind when a creation
/// was killed); a branch of the same name that is not ratchet's stays.
pub fn drop_scratch_branches(repo: &Repository, name: &str) {
    for s in scratch_names(name) {
        if is_own_scratch(repo, &s) {
            if let Ok(mut b) = repo.find_branch(&s, BranchType::Local) {
                let _ = b.delete();
            }
        }
    }
}

pub fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}

/// The first `n` of `paths`, comma-separated, with how many more there are.
pub fn some_of(paths: &[String], n: usize) -> String {
    let shown = paths.iter().take(n).map(String::as_str).collect::<Vec<_>>().join(", ");
    match paths.len().saturating_sub(n) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// Whether `path` (relative to the repo root) belongs to ratchet rather than to the hypothesis.
pub fn is_ratchet_path(path: &str) -> bool {
    let p = path.trim_start_matches("./");
    [STATE_DIR, RESULTS_DIR].iter().any(|d| p == *d || p.starts_with(&format!("{d}/")))
}

impl Repo {
    /// The repository containing `dir`.
    pub fn discover(dir: &Path) -> Result<Repo> {
        let repo = discover::open(dir).map_err(|e| discover::refusal(dir, &e))?;
        let root = repo.workdir().ok_or_else(|| Error::repo("the repository is bare; ratchet needs a working tree"))?.to_path_buf();
        let root = root.canonicalize().unwrap_or(root);
        Ok(Repo {
            repo,
            root,
            watch: Default::default(),
            full_scan: std::cell::Cell::new(!watch::enabled()),
            blind: Default::default(),
            left_out: Default::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Make every status walk read the whole tree through libgit2, as `RATCHET_FULL_SCAN=1`
    /// does (the reference the stat pass and the watcher are tested and timed against).
    #[doc(hidden)]
    pub fn set_full_scan(&self, on: bool) {
        self.full_scan.set(on);
    }

    pub fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// ratchet's files shared by every worktree of this repository: the lock and the id counter.
    pub fn common_state_dir(&self) -> PathBuf {
        self.repo.commondir().join("ratchet")
    }

    /// Whether the filesystem under the work tree folds case (`.GIT` opens `.git`).
    pub fn folds_case(&self) -> bool {
        self.root.join(".git").exists() && self.root.join(".GiT").exists()
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
        let lock = self.repo.path().join("index.lock");
        if lock.exists() {
            return Err(Error::repo(format!(
                "{} exists: another git command is running in this repository, or one was killed and left it",
                lock.display()
            ))
            .hint(format!("if no git command is running here, remove it: rm {}", lock.display())));
        }
        self.check_filters()?;
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

    /// Keep ratchet's directories out of git without touching the user's ignore files: each
    /// holds a `.gitignore` of `*` (as pytest's cache does), so `git status` never lists them.
    /// The lines older versions added to `.git/info/exclude` are taken out again, the benchmark
    /// outputs they named moving to ratchet's own list (`.ratchet/outputs`).
    pub fn ensure_excludes(&self) -> Result<()> {
        for dir in [STATE_DIR, RESULTS_DIR] {
            let ignore = self.root.join(dir).join(".gitignore");
            if std::fs::symlink_metadata(&ignore).is_err() {
                std::fs::create_dir_all(self.root.join(dir))?;
                std::fs::write(&ignore, "# ratchet's own files: never part of the repository's history\n*\n")?;
            }
        }
        let exclude = self.repo.commondir().join("info").join("exclude");
        if let Some(old) = outputs::strip_old_excludes(&exclude)? {
            Outputs::record(&self.state_dir(), &self.root, &old, self.tracked_test())?;
        }
        Ok(())
    }

    /// The untracked paths the last [`Repo::changes`] left out because a benchmark wrote them.
    pub fn left_out(&self) -> Vec<String> {
        self.left_out.borrow().clone()
    }

    /// Refuse a repository whose attributes name a filter driver (git-lfs, git-crypt and the
    /// like): libgit2 runs no external filters, so ratchet would commit what the clean filter
    /// should have transformed and measure checkouts the smudge filter never saw.
    pub fn check_filters(&self) -> Result<()> {
        let mut sources: Vec<(String, String)> = vec![];
        if let Ok(index) = self.repo.index() {
            for e in index.iter() {
                let path = String::from_utf8_lossy(&e.path).into_owned();
                if path == ".gitattributes" || path.ends_with("/.gitattributes") {
                    let text = crate::safe_read::read_text_capped(&self.root.join(&path), ATTRIBUTES_CAP)
                        .ok()
                        .or_else(|| self.repo.find_blob(e.id).ok().map(|b| String::from_utf8_lossy(b.content()).into_owned()));
                    sources.extend(text.map(|t| (path, t)));
                }
            }
        }
        let info = self.repo.commondir().join("info").join("attributes");
        if let Ok(t) = crate::safe_read::read_text_capped(&info, ATTRIBUTES_CAP) {
            sources.push((info.display().to_string(), t));
        }
        if let Ok(p) = self.git_config().and_then(|c| Ok(c.get_path("core.attributesFile")?)) {
            if let Ok(t) = crate::safe_read::read_text_capped(&p, ATTRIBUTES_CAP) {
                sources.push((p.display().to_string(), t));
            }
        }
        for (file, text) in &sources {
            for (n, line) in text.lines().enumerate() {
                let mut words = line.split_whitespace();
                let Some(pattern) = words.next().filter(|w| !w.starts_with('#')) else { continue };
                if let Some(filter) = words.find_map(|w| w.strip_prefix("filter=")) {
                    return Err(Error::repo(format!(
                        "{file} line {}: `{pattern}` uses the git filter `{filter}` (filter={filter}); ratchet commits and checks out \
                         through libgit2, which runs no filter drivers, so it would commit what `{filter}` should transform and \
                         benchmark files it never smudged",
                        n + 1
                    ))
                    .hint(format!(
                        "run ratchet in a repository (or clone) without filter attributes, e.g. drop the `filter={filter}` line for \
                         the kernel's files, or convert them first (git lfs migrate export --include=\"{pattern}\")"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Refuse to commit where git would run hooks or sign the commit, unless the user said, by a
    /// git config switch, that hypothesis commits may go without: libgit2 does neither, and
    /// ratchet never skips them silently. Returns the notes to tell the user (what is skipped).
    pub fn check_commit_policy(&self) -> Result<Vec<String>> {
        let mut notes = vec![];
        let cfg = self.git_config()?;
        let on = |k: &str| cfg.get_bool(k).unwrap_or(false);
        let hooks = match cfg.get_path("core.hooksPath") {
            Ok(p) if p.is_relative() => self.root.join(p),
            Ok(p) => p,
            Err(_) => self.repo.commondir().join("hooks"),
        };
        for name in ["pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"] {
            let h = hooks.join(name);
            let executable = std::fs::metadata(&h).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            if !executable {
                continue;
            }
            if on(SKIP_HOOKS_KEY) {
                notes.push(format!("hypothesis commits do not run the {name} hook ({}), as {SKIP_HOOKS_KEY} says", h.display()));
                continue;
            }
            return Err(Error::repo(format!(
                "the repository has a {name} hook ({}); ratchet commits through libgit2, which runs no hooks, and will not skip it silently",
                h.display()
            ))
            .hint(format!("disable the hook, or let hypothesis commits go without hooks: git config {SKIP_HOOKS_KEY} true")));
        }
        if on("commit.gpgsign") {
            if !on(UNSIGNED_KEY) {
                return Err(Error::repo(
                    "commit.gpgsign is set, but ratchet's hypothesis commits are made by libgit2 and cannot be signed",
                )
                .hint(format!(
                    "let hypothesis commits be unsigned: git config {UNSIGNED_KEY} true (or git config commit.gpgsign false here)"
                )));
            }
            notes.push(format!("hypothesis commits are not signed, although commit.gpgsign is set ({UNSIGNED_KEY})"));
        }
        Ok(notes)
    }

    /// The message of a hypothesis commit must be storable as git writes it.
    pub fn check_message(message: &str) -> Result<()> {
        if message.contains('\0') {
            return Err(Error::usage("the experiment's message contains a NUL byte, which a git commit message cannot hold")
                .hint("remove the \\0 from the message (or the hypothesis file's `message`)"));
        }
        Ok(())
    }

    /// A status walk that also refreshes the index's stat data of files whose stat changed but
    /// whose content did not (a `touch`, a checkout, a build tool), as `git status` does: without
    /// it every later walk re-reads and re-hashes those files (on a 100 MB repository whose
    /// files were all touched: ~0.3 s per walk instead of the ~0.1 s of the lstat pass). Only
    /// stat data changes, never an entry's content, and the index is written only when some
    /// entry was refreshed; when it cannot be (another git holds `index.lock`), the walk is
    /// done without.
    fn statuses(&self, opts: &mut StatusOptions) -> Result<git2::Statuses<'_>> {
        opts.update_index(true);
        match self.repo.statuses(Some(opts)) {
            Ok(s) => Ok(s),
            Err(_) => {
                opts.update_index(false);
                Ok(self.repo.statuses(Some(opts))?)
            }
        }
    }

    /// The paths of a status walk. Those whose names are not UTF-8 come back apart (second), for
    /// the caller to refuse or leave alone: none is dropped silently.
    fn status_paths(&self, opts: &mut StatusOptions, keep: impl Fn(git2::Status) -> bool) -> Result<(Vec<String>, Vec<Vec<u8>>)> {
        let statuses = self.statuses(opts)?;
        let mut index: Option<git2::Index> = None;
        let outputs = Outputs::load(&self.state_dir());
        let mut left_out = vec![];
        let mut out = vec![];
        let mut unnamed = vec![];
        for s in statuses.iter() {
            let st = s.status();
            let bytes = s.path_bytes();
            if st.is_ignored() || !keep(st) || is_ratchet_path(&String::from_utf8_lossy(bytes)) {
                continue;
            }
            let Some(p) = s.path() else {
                unnamed.push(bytes.to_vec());
                continue;
            };
            if st.is_wt_new() && outputs.covers(p) {
                left_out.push(p.to_string());
                continue;
            }
            if st == git2::Status::WT_DELETED {
                // A file outside the sparse-checkout cone is absent on purpose, not deleted.
                if index.is_none() {
                    index = Some(self.repo.index()?);
                }
                let sparse =
                    index.as_ref().and_then(|i| i.get_path(Path::new(p), 0)).is_some_and(|e| e.flags_extended & SKIP_WORKTREE != 0);
                if sparse {
                    continue;
                }
            }
            out.push(p.to_string());
        }
        self.left_out.borrow_mut().extend(left_out);
        Ok((out, unnamed))
    }

    /// Paths with changes that would go into a hypothesis commit (tracked changes and untracked,
    /// not ignored files), ratchet's own directories and the sparse-checkout's absent files left
    /// out. One pass over the work tree (by stat data, libgit2 on the paths in doubt); it arms
    /// the watcher that [`Repo::after_run_scan`] reads.
    pub fn changes(&self) -> Result<Vec<String>> {
        self.left_out.borrow_mut().clear();
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true).include_ignored(false).exclude_submodules(true);
        if let Some(paths) = self.survey()? {
            if paths.is_empty() {
                return Ok(vec![]);
            }
            opts.disable_pathspec_match(true);
            for p in &paths {
                opts.pathspec(p);
            }
        }
        let (paths, unnamed) = self.status_paths(&mut opts, |_| true)?;
        if !unnamed.is_empty() {
            return Err(not_utf8(&unnamed));
        }
        Ok(paths)
    }

    /// Submodules whose work tree differs from the commit the superproject records (a new HEAD
    /// in it, or edits inside it), each with what differs. ratchet never commits into or moves
    /// a submodule, so these are never part of a hypothesis.
    pub fn changed_submodules(&self) -> Vec<(String, &'static str)> {
        use git2::SubmoduleStatus as S;
        let Ok(subs) = self.repo.submodules() else { return vec![] };
        let mut out = vec![];
        for sm in subs {
            let Some(name) = sm.name().map(str::to_string) else { continue };
            let Ok(st) = self.repo.submodule_status(&name, git2::SubmoduleIgnore::Untracked) else { continue };
            let what = if st.intersects(S::WD_MODIFIED | S::INDEX_MODIFIED) {
                "its checked-out commit is not the one the superproject records"
            } else if st.intersects(S::WD_INDEX_MODIFIED | S::WD_WD_MODIFIED) {
                "files inside it are edited"
            } else {
                continue;
            };
            out.push((sm.path().to_string_lossy().into_owned(), what));
        }
        out
    }

    /// The paths a status walk has to look at: from one parallel stat pass over the work tree
    /// (`walk::survey`), plus the paths staged in the index. Arms the watcher on every directory
    /// that can hold a hypothesis's file (watched before it is read). `None`: let libgit2 walk
    /// the whole tree (the pass could not vouch for its answer, or too much changed).
    fn survey(&self) -> Result<Option<Vec<String>>> {
        *self.watch.borrow_mut() = None;
        *self.blind.borrow_mut() = None;
        if self.full_scan.get() {
            return Ok(None);
        }
        let Ok(head) = self.repo.head().and_then(|h| h.peel_to_tree()) else { return Ok(None) };
        let mut index = self.repo.index()?;
        index.read(false)?;
        let Some(found) = walk::survey(&self.repo, &index, &self.root, &[STATE_DIR, RESULTS_DIR], watch::Watch::new()) else {
            return Ok(None);
        };
        let outputs = Outputs::load(&self.state_dir());
        let mut watch = found.watch;
        if let Some(w) = watch.as_mut() {
            // Untracked directories that are not ignored (empty, or holding ignored files only):
            // a file the benchmark writes there must be seen too. A listed output directory is
            // left out whole, whatever appears in it.
            for d in found.untracked_dirs.iter().filter(|d| !outputs.covers(d)) {
                self.watch_untracked(w, d.trim_end_matches('/'));
            }
        }
        // Armed before any status looks: it stands even when libgit2 walks the whole tree below.
        if watch.is_some() {
            *self.blind.borrow_mut() = Some(blind::Blind::new(found.linked));
        }
        *self.watch.borrow_mut() = watch;
        // Listed outputs are settled here: thousands of them must not send libgit2 walking.
        let untracked = |p: &str| p.ends_with('/') || index.get_path(Path::new(p), 0).is_none();
        let (left_out, mut paths): (Vec<String>, Vec<String>) = found.suspects.into_iter().partition(|p| outputs.covers(p) && untracked(p));
        self.left_out.borrow_mut().extend(left_out);
        if paths.len() > MAX_SUSPECTS {
            return Ok(None);
        }
        // Staged changes: the work tree matches the index there, so only HEAD's tree tells.
        let staged = self.repo.diff_tree_to_index(Some(&head), Some(&index), None)?;
        paths.extend(
            staged.deltas().flat_map(|d| [d.old_file().path(), d.new_file().path()]).flatten().map(|p| p.to_string_lossy().into_owned()),
        );
        paths.sort();
        paths.dedup();
        Ok(Some(paths))
    }

    /// Watch the untracked directory `rel` and the directories below it, unless ignored (git
    /// lists nothing under an ignored directory) or a nested repository of its own.
    fn watch_untracked(&self, w: &mut watch::Watch, rel: &str) {
        if self.repo.is_path_ignored(format!("{rel}/")).unwrap_or(false) || self.root.join(rel).join(".git").exists() {
            return;
        }
        w.add(&self.root, rel);
        let Ok(entries) = std::fs::read_dir(self.root.join(rel)) else { return };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                self.watch_untracked(w, &format!("{rel}/{}", e.file_name().to_string_lossy()));
            }
        }
    }

    /// After the benchmark ran: the untracked entries it wrote (a new directory is one entry,
    /// `dir/`) and the tracked files edited meanwhile. When the watcher armed by
    /// [`Repo::changes`] saw everything, git is asked about the paths that changed only;
    /// otherwise one status walk of the whole tree.
    pub fn after_run_scan(&self) -> Result<AfterRun> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(false).include_ignored(false).exclude_submodules(true);
        let mut watched = self.watch.borrow_mut().take().and_then(|w| w.changed());
        let blind = self.blind.borrow_mut().take();
        if let Some(changed) = watched.as_mut() {
            // A write no event reports (through a memory mapping made and gone during the runs)
            // still moves the file's mtime: one stat pass finds it, or the whole walk below runs.
            let mut index = self.repo.index()?;
            index.read(false)?;
            match walk::survey(&self.repo, &index, &self.root, &[STATE_DIR, RESULTS_DIR], None) {
                Some(found) if found.suspects.len() <= MAX_SUSPECTS => {
                    changed.extend(found.suspects.into_iter().filter(|p| !p.ends_with('/') && index.get_path(Path::new(p), 0).is_some()));
                }
                _ => watched = None,
            }
        }
        let mut out = AfterRun::default();
        if let Some(changed) = watched {
            let changed: Vec<&String> = changed.iter().filter(|p| !is_ratchet_path(p) && !p.split('/').any(|c| c == ".git")).collect();
            if changed.is_empty() {
                out.edited = self.blind_edits(blind, &out.edited);
                return Ok(out);
            }
            // Files, listed one by one below; `untracked_entry` gives them the entries a whole
            // walk would report.
            opts.recurse_untracked_dirs(true).disable_pathspec_match(true);
            for p in changed {
                opts.pathspec(p);
                // A directory now, or gone (maybe a directory whose tracked files went with it):
                // what is below it too.
                if std::fs::symlink_metadata(self.root.join(p)).map_or(true, |m| m.is_dir()) {
                    opts.pathspec(format!("{p}/"));
                }
            }
        }
        let statuses = self.statuses(&mut opts)?;
        let index = self.repo.index()?;
        for s in statuses.iter() {
            let Some(p) = s.path() else {
                // Not UTF-8: neither listed as an output nor set aside, so said to the user.
                if !s.status().is_ignored() && !is_ratchet_path(&String::from_utf8_lossy(s.path_bytes())) {
                    out.unnamed.push(s.path_bytes().to_vec());
                }
                continue;
            };
            if is_ratchet_path(p) {
                continue;
            }
            if s.status().is_wt_new() {
                out.untracked.push(untracked_entry(&index, p));
            } else if !s.status().is_ignored() {
                // A sparse checkout's absent files are not edits (see `status_paths`).
                let e = index.get_path(Path::new(p), 0);
                if !(e.is_some_and(|e| e.flags_extended & SKIP_WORKTREE != 0) && std::fs::symlink_metadata(self.root.join(p)).is_err()) {
                    out.edited.push(p.to_string());
                }
            }
        }
        out.edited.extend(self.blind_edits(blind, &out.edited));
        // What is listed already was said before, and stays left out.
        let outputs = Outputs::load(&self.state_dir());
        out.untracked.retain(|p| !outputs.covers(p));
        out.untracked.sort();
        out.untracked.dedup();
        Ok(out)
    }

    /// Before the runs: look for tracked files a process has mapped shared and writable (on a
    /// thread of its own), to compare them by content after the runs, as the watcher cannot.
    pub fn watch_blind_spots(&self) {
        if let Some(b) = self.blind.borrow_mut().as_mut() {
            b.look_for_mappings(&self.root);
        }
    }

    /// The tracked files the watcher could not vouch for (see [`blind`]) whose content now
    /// differs from HEAD's, other than those in `known`.
    fn blind_edits(&self, blind: Option<blind::Blind>, known: &[String]) -> Vec<String> {
        let Some(blind) = blind else { return vec![] };
        let Ok(head) = self.repo.head().and_then(|h| h.peel_to_tree()) else { return vec![] };
        blind
            .paths(&self.root)
            .into_iter()
            .filter(|p| !is_ratchet_path(p) && !known.contains(p))
            .filter(|p| blob_at(&head, p).is_some() && self.workdir_blob(p) != blob_at(&head, p))
            .collect()
    }

    /// Paths `commit` changed against `base` whose work-tree content is no longer `commit`'s:
    /// edits no check after the runs saw (a write no event reported). Hashes the changed files
    /// only, so it is cheap for a hypothesis of a few files.
    pub fn unseen_edits(&self, base: Oid, commit: Oid) -> Result<Vec<String>> {
        let (old, new) = (self.repo.find_commit(base)?.tree()?, self.repo.find_commit(commit)?.tree()?);
        Ok(changed_paths(&self.repo, &old, &new)?.into_iter().filter(|p| self.workdir_blob(p) != blob_at(&new, p)).collect())
    }

    /// Untracked, not ignored entries (a new directory is one entry, `dir/`), ratchet's own left out.
    pub fn untracked_entries(&self) -> Result<Vec<String>> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(false).include_ignored(false).exclude_submodules(true);
        // One whose name is not UTF-8 cannot be listed in .ratchet/outputs: `changes` refuses it.
        Ok(self.status_paths(&mut opts, |s| s.is_wt_new())?.0)
    }

    /// List `paths` (written into the repo by the benchmark) in ratchet's own `.ratchet/outputs`,
    /// so that they never leak into a hypothesis commit; they are left on disk, and the user's
    /// git still sees them.
    /// Called after every experiment (also with none): entries whose file is gone are dropped.
    pub fn exclude_benchmark_outputs(&self, paths: &[String]) -> Result<()> {
        Outputs::record(&self.state_dir(), &self.root, paths, self.tracked_test())
    }

    /// Whether the index (read once) holds the file `path`.
    fn tracked_test(&self) -> impl Fn(&str) -> bool {
        let index = self.repo.index().ok();
        move |p: &str| !p.ends_with('/') && index.as_ref().is_some_and(|i| i.get_path(Path::new(p), 0).is_some())
    }

    /// Tracked files whose content differs from HEAD (what a revert would overwrite).
    pub fn tracked_changes(&self) -> Result<Vec<String>> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(false).exclude_submodules(true);
        // One whose name is not UTF-8 stays in the work tree as it is: a revert touches only
        // the paths the hypothesis changed, and `changes` refuses it before the next commit.
        Ok(self.status_paths(&mut opts, |_| true)?.0)
    }

    fn signature(&self) -> Result<Signature<'static>> {
        let cfg = self.git_config()?;
        Ok(match (cfg.get_string("user.name"), cfg.get_string("user.email")) {
            (Ok(name), Ok(email)) => Signature::now(&name, &email)?,
            _ => Signature::now("ratchet", "ratchet@localhost")?,
        })
    }

    /// The repository's git configuration as git itself reads it: libgit2 finds the global and
    /// system files at their usual places only, while git takes `GIT_CONFIG_GLOBAL` and
    /// `GIT_CONFIG_SYSTEM` in their place (a hooks path or signing set there must be seen).
    pub fn git_config(&self) -> Result<git2::Config> {
        let mut cfg = self.repo.config()?;
        for (var, level) in [("GIT_CONFIG_GLOBAL", git2::ConfigLevel::Global), ("GIT_CONFIG_SYSTEM", git2::ConfigLevel::System)] {
            if let Some(file) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                // Put in place of the level's usual file; `/dev/null` (no file) leaves it empty.
                let file = PathBuf::from(file);
                let file = if std::fs::metadata(&file).is_ok_and(|m| m.is_file()) { file } else { PathBuf::from("/nonexistent/ratchet") };
                cfg.add_file(&file, level, true)?;
            }
        }
        Ok(cfg.snapshot()?)
    }

    /// `base` with `paths` as they are in the working tree (a missing file is a deletion): the
    /// commit of a hypothesis is the incumbent's tree plus exactly the changed paths, never a
    /// snapshot of a partial (sparse) work tree. Only blobs are written; the index is untouched.
    fn tree_with_workdir_paths(&self, base: &Tree, paths: &[String]) -> Result<Oid> {
        let workdir = self.repo.workdir().unwrap_or(&self.root).to_path_buf();
        let filemode = self.git_config().ok().and_then(|c| c.get_bool("core.filemode").ok()).unwrap_or(true);
        let mut b = TreeUpdateBuilder::new();
        for p in paths {
            let full = workdir.join(p);
            match std::fs::symlink_metadata(&full) {
                Ok(md) if md.file_type().is_symlink() => {
                    let target = std::fs::read_link(&full)?;
                    b.upsert(p.as_str(), self.repo.blob(target.as_os_str().as_bytes())?, FileMode::Link);
                }
                Ok(md) if md.is_file() => {
                    let exec = if filemode {
                        md.permissions().mode() & 0o111 != 0
                    } else {
                        base.get_path(Path::new(p)).is_ok_and(|e| e.filemode() == i32::from(FileMode::BlobExecutable))
                    };
                    // blob_path runs git's built-in filters (eol) for paths inside the work tree.
                    let id = self.repo.blob_path(&full)?;
                    b.upsert(p.as_str(), id, if exec { FileMode::BlobExecutable } else { FileMode::Blob });
                }
                // A directory here is an untracked nested repository: never part of a hypothesis.
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    b.remove(p.as_str());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(b.create_updated(&self.repo, base)?)
    }

    /// Commit `paths` (from [`Repo::changes`]) as they are in the working tree on top of HEAD,
    /// with `message`. The commit is made first and the index brought in line after, so no kill
    /// can leave a staged hypothesis without its commit. With `allow_empty`, no change gives an
    /// empty commit (to re-measure).
    pub fn commit_hypothesis(&self, message: &str, paths: &[String], allow_empty: bool) -> Result<Oid> {
        Self::check_message(message)?;
        let parent = self.repo.head()?.peel_to_commit()?;
        let tree_id = self.tree_with_workdir_paths(&parent.tree()?, paths)?;
        if tree_id == parent.tree_id() && !allow_empty {
            return Err(Error::repo("nothing to test: the working tree has no change against HEAD")
                .hint("edit the kernel first, or pass --allow-empty to re-measure HEAD as it is"));
        }
        let tree = self.repo.find_tree(tree_id)?;
        let sig = self.signature()?;
        let oid = self.repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])?;
        crate::fault::point("mid-commit");
        self.sync_index(&tree, paths)?;
        Ok(oid)
    }

    /// Make the index entries of `paths` match `tree` (the commit just made from the working tree).
    fn sync_index(&self, tree: &Tree, paths: &[String]) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let mut index = self.repo.index()?;
        for p in paths {
            let path = Path::new(p);
            match tree.get_path(path) {
                Ok(e) if e.kind() == Some(git2::ObjectType::Blob) => index.add_path(path)?,
                _ => {
                    let _ = index.remove_path(path);
                }
            }
        }
        index.write()?;
        Ok(())
    }

    /// Snapshot uncommitted tracked edits (made while the experiment ran) as a commit on top of
    /// HEAD, so a revert cannot lose them. `None` when there are none. The index is untouched.
    pub fn snapshot_edits(&self, message: &str) -> Result<Option<Oid>> {
        let paths = self.tracked_changes()?;
        self.snapshot_paths(message, &paths)
    }

    /// [`Repo::snapshot_edits`] of `paths` (edited files already known from a status walk).
    pub fn snapshot_paths(&self, message: &str, paths: &[String]) -> Result<Option<Oid>> {
        if paths.is_empty() {
            return Ok(None);
        }
        let parent = self.repo.head()?.peel_to_commit()?;
        let tree_id = self.tree_with_workdir_paths(&parent.tree()?, paths)?;
        if tree_id == parent.tree_id() {
            return Ok(None);
        }
        let tree = self.repo.find_tree(tree_id)?;
        let sig = self.signature()?;
        Ok(Some(self.repo.commit(None, &sig, &sig, message, &tree, &[&parent])?))
    }

    /// After a keep, take the tracked files changed while experiment `id` ran (`paths`, by the
    /// benchmark or anyone else) out of the work tree, so they never enter a later commit: they
    /// are saved first as a commit on top of HEAD at `refs/ratchet/meanwhile/<id>`, then checked
    /// out from HEAD. Returns the ref, or `None` when nothing differed from HEAD.
    pub fn set_aside_edits(&self, id: &str, paths: &[String]) -> Result<Option<String>> {
        let Some(snap) = self.snapshot_paths(&format!("ratchet: edits made during experiment {id}"), paths)? else { return Ok(None) };
        let name = format!("{MEANWHILE_PREFIX}{id}");
        // Never overwritten: ids are never reused.
        self.repo.reference(&name, snap, false, &format!("ratchet: edits made during experiment {id}"))?;
        let head = self.repo.head()?.peel_to_tree()?;
        checkout_paths(&self.repo, &head, paths)?;
        Ok(Some(name))
    }

    /// Point `refs/ratchet/discarded/<id>` at `commit`. A parked hypothesis is never overwritten:
    /// an existing ref at another commit is an error (ids are never reused, so it means something
    /// outside ratchet wrote it).
    pub fn mark_discarded(&self, id: &str, commit: Oid) -> Result<String> {
        let name = discarded_ref(id);
        if let Ok(r) = self.repo.find_reference(&name) {
            if r.target() == Some(commit) {
                return Ok(name);
            }
            return Err(Error::repo(format!(
                "{name} already holds {}, and ratchet never overwrites a parked hypothesis",
                short(&r.target().map(|o| o.to_string()).unwrap_or_default())
            ))
            .hint(format!("the hypothesis is commit {}; look at both with git show", short(&commit.to_string()))));
        }
        self.repo.reference(&name, commit, false, &format!("ratchet: discard experiment {id}"))?;
        Ok(name)
    }

    /// Move the branch, index and working tree back to `incumbent`, touching only the paths that
    /// differ between it and `tip` (the parked hypothesis, edits made meanwhile on top) or HEAD.
    /// The work tree goes first and the branch last, so a kill in between leaves HEAD on the
    /// hypothesis, which recovery sees and finishes from the parked ref. Untracked and ignored
    /// files (ratchet's directories among them) are left alone.
    pub fn revert_to(&self, incumbent: Oid, tip: Oid) -> Result<()> {
        let inc_tree = self.repo.find_commit(incumbent)?.tree()?;
        let mut paths = changed_paths(&self.repo, &inc_tree, &self.repo.find_commit(tip)?.tree()?)?;
        let head = self.repo.head()?;
        if let Ok(head_tree) = head.peel_to_tree() {
            paths.extend(changed_paths(&self.repo, &inc_tree, &head_tree)?);
            paths.sort();
            paths.dedup();
        }
        checkout_paths(&self.repo, &inc_tree, &paths)?;
        crate::fault::point("mid-revert-checkout");
        let name = head.name().ok_or_else(|| Error::repo("HEAD's branch name is not UTF-8"))?.to_string();
        self.repo.reference(&name, incumbent, true, "ratchet: revert to the incumbent")?;
        Ok(())
    }

    /// Roll the branch back to `incumbent` after a crash, starting or finishing the revert of
    /// `tip` (the parked hypothesis), without taking out an edit made since: a path goes back to
    /// the incumbent only where the work tree still holds what ratchet put there (the content of
    /// the incumbent, of HEAD or of `tip`). Any other content came later, from the user (or a
    /// benchmark that outlived ratchet): it stays in the work tree, its index entry back on the
    /// incumbent's so `git diff` shows it as an uncommitted change. Returns those paths.
    pub fn revert_keeping_edits(&self, incumbent: Oid, tip: Oid) -> Result<Vec<String>> {
        let inc_commit = self.repo.find_commit(incumbent)?;
        let inc_tree = inc_commit.tree()?;
        let tip_tree = self.repo.find_commit(tip)?.tree()?;
        let head = self.repo.head()?;
        let head_tree = head.peel_to_tree().ok();
        let mut paths = changed_paths(&self.repo, &inc_tree, &tip_tree)?;
        if let Some(t) = &head_tree {
            paths.extend(changed_paths(&self.repo, &inc_tree, t)?);
            paths.sort();
            paths.dedup();
        }
        let (mut ours, mut later) = (vec![], vec![]);
        for p in paths {
            let known = [Some(&inc_tree), Some(&tip_tree), head_tree.as_ref()]
                .into_iter()
                .flatten()
                .any(|t| self.workdir_holds(&p, blob_at(t, &p)));
            if known {
                ours.push(p);
            } else {
                later.push(p);
            }
        }
        checkout_paths(&self.repo, &inc_tree, &ours)?;
        crate::fault::point("mid-revert-checkout");
        let name = head.name().ok_or_else(|| Error::repo("HEAD's branch name is not UTF-8"))?.to_string();
        self.repo.reference(&name, incumbent, true, "ratchet: revert to the incumbent")?;
        if !later.is_empty() {
            // `git reset -- PATHS`: the index entries only; the files are left as they are.
            self.repo.reset_default(Some(inc_commit.as_object()), later.iter().map(String::as_str))?;
        }
        Ok(later)
    }

    /// The blob id of what the work tree holds at `path` (a file's bytes or a symbolic link's
    /// target, hashed as git stores them without filters); `None` when there is nothing there
    /// or a directory, or something that is not a regular file (a FIFO is never opened).
    pub fn workdir_blob(&self, path: &str) -> Option<Oid> {
        let full = self.root.join(path);
        let md = std::fs::symlink_metadata(&full).ok()?;
        if md.file_type().is_symlink() {
            let target = std::fs::read_link(&full).ok()?;
            Oid::hash_object(git2::ObjectType::Blob, target.as_os_str().as_bytes()).ok()
        } else if md.is_file() {
            crate::safe_read::hash_blob(&full).ok()
        } else {
            None
        }
    }

    /// Whether the work tree holds `blob` at `path`: the bytes as they are, or as git's
    /// built-in filters (eol, `core.autocrlf`) clean them, so a CRLF checkout of an LF blob is
    /// the blob. `None` for `blob` asks whether the path is absent.
    pub fn workdir_holds(&self, path: &str, blob: Option<Oid>) -> bool {
        let now = self.workdir_blob(path);
        if now == blob {
            return true;
        }
        let full = self.root.join(path);
        // blob_path applies the clean filters; it stores the cleaned blob, which is harmless.
        blob.is_some()
            && now.is_some()
            && std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_file())
            && self.repo.blob_path(&full).ok() == blob
    }

    /// Make each `(path, blob, mode)` of `files` hold that blob (with git's smudge filters, as a
    /// checkout writes it), or be absent (`None`), through the rollback's atomic writer
    /// ([`checkout_paths`]): the index is not touched.
    pub fn write_blobs(&self, files: &[(String, Option<Oid>, u32)]) -> Result<()> {
        let base = self.repo.head()?.peel_to_tree()?;
        let mut b = TreeUpdateBuilder::new();
        for (p, blob, mode) in files {
            match blob {
                Some(id) => {
                    let mode = match *mode {
                        m if m == i32::from(FileMode::BlobExecutable) as u32 => FileMode::BlobExecutable,
                        m if m == i32::from(FileMode::Link) as u32 => FileMode::Link,
                        _ => FileMode::Blob,
                    };
                    b.upsert(p.as_str(), *id, mode);
                }
                None => {
                    b.remove(p.as_str());
                }
            }
        }
        let tree = self.repo.find_tree(b.create_updated(&self.repo, &base)?)?;
        let paths: Vec<String> = files.iter().map(|f| f.0.clone()).collect();
        write_paths(&self.repo, &tree, &paths, false)
    }

    /// [`Repo::revert_to`] from HEAD.
    pub fn reset_to(&self, incumbent: Oid) -> Result<()> {
        let head = self.head_oid()?;
        self.revert_to(incumbent, head)
    }

    pub fn head_oid(&self) -> Result<Oid> {
        Ok(self.repo.head()?.peel_to_commit()?.id())
    }

    pub fn is_ancestor(&self, ancestor: Oid, of: Oid) -> bool {
        ancestor == of || self.repo.graph_descendant_of(of, ancestor).unwrap_or(false)
    }

    /// The incumbent checkout's registered worktree name: one per work tree of the repository,
    /// so linked worktrees never share (or prune) each other's.
    fn worktree_name(&self) -> String {
        if !self.repo.is_worktree() {
            return WORKTREE_NAME.to_string();
        }
        // FNV-1a of the work tree's path: stable, short, and distinct per linked worktree.
        let h = self.root.as_os_str().as_bytes().iter().fold(0xcbf29ce484222325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100000001b3));
        format!("{WORKTREE_NAME}-{:08x}", h as u32)
    }

    pub fn incumbent_path(&self) -> PathBuf {
        self.state_dir().join("worktrees").join("incumbent")
    }

    /// A detached git worktree at `commit` under `.ratchet/worktrees/incumbent`, created once and
    /// moved to each new incumbent along the paths that changed (no whole-tree checkout).
    pub fn incumbent_worktree(&self, commit: Oid) -> Result<PathBuf> {
        let path = self.incumbent_path();
        let name = self.worktree_name();
        let wt_repo = match self.open_own_worktree(&path, &name)? {
            Some(r) => r,
            None => self.create_worktree(&path, &name, commit)?,
        };
        let marker = self.state_dir().join("worktrees").join("incumbent.moving");
        let current = wt_repo.head().ok().and_then(|h| h.target());
        if current != Some(commit) || !wt_repo.head_detached()? || marker.exists() {
            let target = wt_repo.find_commit(commit)?.tree()?;
            let old = current.and_then(|c| wt_repo.find_commit(c).ok()).and_then(|c| c.tree().ok());
            // Paths that cannot be named (not UTF-8) among the changes: a whole checkout instead.
            match old.filter(|_| !marker.exists()).and_then(|old| changed_paths(&wt_repo, &old, &target).ok()) {
                Some(paths) => {
                    // Recorded first: a kill mid-move makes the next call check out everything.
                    std::fs::write(&marker, commit.to_string())?;
                    move_paths(&wt_repo, &target, &paths)?;
                }
                None => {
                    let mut co = CheckoutBuilder::new();
                    co.force().remove_untracked(false);
                    wt_repo.checkout_tree(target.as_object(), Some(&mut co))?;
                }
            }
            wt_repo.set_head_detached(commit)?;
            let _ = std::fs::remove_file(&marker);
        }
        self.drop_scratch_branch(&name);
        self.init_submodules(&wt_repo, &path)?;
        Ok(path)
    }

    /// The worktree at `path` when it is ratchet's own; `None` when there is none (or only what a
    /// killed creation left); an error when something else is there, which ratchet never clobbers.
    fn open_own_worktree(&self, path: &Path, name: &str) -> Result<Option<Repository>> {
        if std::fs::symlink_metadata(path).is_err() {
            return Ok(None);
        }
        let ours = self.repo.commondir().join("worktrees").join(name);
        if copied_incumbent_checkout(path, &ours) {
            return Ok(None);
        }
        let foreign = |what: String| {
            Error::repo(format!("{} holds {what}, not ratchet's incumbent checkout; ratchet will not overwrite it", path.display()))
                .hint(format!("move it elsewhere (git worktree move {} <new path>, or mv), then run ratchet again", path.display()))
        };
        match Repository::open(path) {
            Ok(r) if r.is_worktree() && same_dir(r.path(), &ours) => Ok(Some(r)),
            Ok(r) => Err(foreign(format!("a git checkout of its own ({})", r.path().display()))),
            Err(_) => {
                let empty = std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none());
                let gitdir = std::fs::read_to_string(path.join(".git")).ok();
                let leftover =
                    gitdir.as_deref().and_then(|t| t.trim().strip_prefix("gitdir:")).is_some_and(|g| same_dir(Path::new(g.trim()), &ours));
                if empty || leftover {
                    Ok(None)
                } else {
                    Err(foreign("files".to_string()))
                }
            }
        }
    }

    fn create_worktree(&self, path: &Path, name: &str, commit: Oid) -> Result<Repository> {
        // A stale registration of ours (its directory deleted, or left by a killed creation).
        // Its work tree is our own path, removed below: never prune another's directory.
        prune_worktree(&self.repo, name, false)?;
        if std::fs::symlink_metadata(path).is_ok() {
            std::fs::remove_dir_all(path)?;
        }
        std::fs::create_dir_all(path.parent().unwrap())?;
        add_detached_worktree(&self.repo, name, path, commit)
    }

    /// Remove what a killed ratchet may leave in git outside the journal's care: the scratch
    /// branch of an incumbent checkout's creation.
    pub fn clean_leftovers(&self) {
        self.drop_scratch_branch(&self.worktree_name());
    }

    /// Delete the scratch branches a worktree creation uses (left behind when one was killed).
    fn drop_scratch_branch(&self, name: &str) {
        drop_scratch_branches(&self.repo, name);
    }

    /// Check out the submodules of the incumbent checkout at the commits its tree records, cloned
    /// from the main work tree's own checkouts of them (no network). A submodule that is not
    /// checked out there is a clear error: the benchmark would fail on either side without it.
    fn init_submodules(&self, wt_repo: &Repository, wt_path: &Path) -> Result<()> {
        // Listing submodules scans the whole index and HEAD tree for gitlinks (~10 ms on 10,000
        // files, at every experiment): skip it when the tree has no .gitmodules, without which
        // git has no submodule to check out either.
        let has_gitmodules = wt_repo.head().and_then(|h| h.peel_to_tree()).is_ok_and(|t| t.get_name(".gitmodules").is_some());
        if !has_gitmodules {
            return Ok(());
        }
        let Ok(subs) = wt_repo.submodules() else { return Ok(()) };
        for sm in subs {
            let Some(want) = sm.head_id() else { continue };
            let rel = sm.path().to_path_buf();
            let dest = wt_path.join(&rel);
            if let Ok(r) = Repository::open(&dest) {
                if r.head().ok().and_then(|h| h.target()) == Some(want) {
                    continue;
                }
                if r.find_commit(want).is_ok() {
                    r.set_head_detached(want)?;
                    let mut co = CheckoutBuilder::new();
                    co.force();
                    r.checkout_head(Some(&mut co))?;
                    continue;
                }
            }
            let src = self.root.join(&rel);
            let missing = || {
                Error::repo(format!(
                    "submodule {} (commit {}) is not checked out in {}, so the incumbent checkout cannot have it",
                    rel.display(),
                    short(&want.to_string()),
                    self.root.display()
                ))
                .hint("check it out first: git submodule update --init --recursive")
            };
            let src_repo = Repository::open(&src).map_err(|_| missing())?;
            if src_repo.find_commit(want).is_err() {
                return Err(missing());
            }
            if std::fs::symlink_metadata(&dest).is_ok() {
                std::fs::remove_dir_all(&dest)?;
            }
            let url = src.to_str().ok_or_else(missing)?;
            let cloned = git2::build::RepoBuilder::new().clone(url, &dest)?;
            cloned.set_head_detached(want)?;
            let mut co = CheckoutBuilder::new();
            co.force();
            cloned.checkout_head(Some(&mut co))?;
        }
        Ok(())
    }

    /// `commit`'s patch against its first parent, as `git show` prints it (binary files named,
    /// not shown); invalid UTF-8 replaced.
    pub fn patch(&self, commit: Oid) -> Result<String> {
        let c = self.repo.find_commit(commit)?;
        let parent = c.parent(0).ok().map(|p| p.tree()).transpose()?;
        let diff = self.repo.diff_tree_to_tree(parent.as_ref(), Some(&c.tree()?), None)?;
        let mut out = Vec::new();
        diff.print(git2::DiffFormat::Patch, |_, _, l| {
            if matches!(l.origin(), '+' | '-' | ' ') {
                out.push(l.origin() as u8);
            }
            out.extend_from_slice(l.content());
            true
        })?;
        Ok(String::from_utf8_lossy(&out).into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_commit() -> (tempfile::TempDir, Repository, Oid) {
        let d = tempfile::tempdir().unwrap();
        let repo = Repository::init(d.path()).unwrap();
        let sig = Signature::now("t", "t@example.com").unwrap();
        let tree = repo.find_tree(repo.index().unwrap().write_tree().unwrap()).unwrap();
        let c = repo.commit(Some("HEAD"), &sig, &sig, "root", &tree, &[]).unwrap();
        drop(tree);
        (d, repo, c)
    }

    #[test]
    fn a_killed_creations_scratch_branch_is_dropped_and_a_users_of_that_name_kept() {
        let (_d, repo, c) = repo_with_commit();
        // What a creation killed between its branch and its worktree leaves.
        repo.reference("refs/heads/wt-tmp", c, false, SCRATCH_MARK).unwrap();
        repo.branch("wt-tmp1", &repo.find_commit(c).unwrap(), false).unwrap();
        drop_scratch_branches(&repo, "wt");
        assert!(repo.find_branch("wt-tmp", BranchType::Local).is_err(), "ratchet's leftover stayed");
        assert!(repo.find_branch("wt-tmp1", BranchType::Local).is_ok(), "the user's branch was deleted");
    }

    #[test]
    fn a_worktree_is_added_detached_beside_a_users_branch_of_the_scratch_name() {
        let (d, repo, c) = repo_with_commit();
        repo.branch("wt-tmp", &repo.find_commit(c).unwrap(), false).unwrap();
        let wt = add_detached_worktree(&repo, "wt", &d.path().join("checkout"), c).unwrap();
        assert!(wt.head_detached().unwrap());
        assert_eq!(wt.head().unwrap().target(), Some(c));
        let names: Vec<String> =
            repo.branches(Some(BranchType::Local)).unwrap().map(|b| b.unwrap().0.name().unwrap().unwrap().to_string()).collect();
        assert!(names.contains(&"wt-tmp".to_string()) && !names.iter().any(|n| n.starts_with("wt-tmp") && n != "wt-tmp"), "{names:?}");
    }
}
