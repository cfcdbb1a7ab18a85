//! Hypothesis files (`experiments/*.toml`): one queued change per file, as a patch or as literal
//! find/replace edits, with its commit message, tags and per-experiment overrides. Parsing
//! validates everything up front so a typo fails the sweep at its start, not at 3 a.m.; applying
//! is all-or-nothing: the whole result is computed in memory against HEAD's tree, every target is
//! checked (inside the work tree, outside `.git`, through no symlink, never an untracked or ignored
//! file), and only then is anything written, so a hypothesis that no longer fits the incumbent
//! leaves the tree untouched. The format is documented in experiments/README.md.

use crate::error::{Error, Result};
use crate::vcs::{self, Repo};
use git2::{FileMode, Oid};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file as written (serde's view; `deny_unknown_fields` makes a typo an error).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHypothesis {
    message: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default)]
    edit: Vec<Edit>,
    #[serde(default)]
    deep: Option<bool>,
    #[serde(default)]
    pairs: Option<u32>,
}

/// One literal edit: `find` must occur exactly once in `file`, and becomes `replace`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub file: String,
    pub find: String,
    pub replace: String,
}

/// How the hypothesis changes the tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A unified diff (as `git diff` writes it), read from the file named by `patch`.
    Patch { path: PathBuf, text: Vec<u8> },
    /// Literal edits, applied in order.
    Edits(Vec<Edit>),
    /// The file could not be parsed (why, with its fix): the sweep records a `refused` row for
    /// it and goes on with the others.
    Malformed(String),
}

/// A parsed, validated hypothesis file.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    /// Where it was read from.
    pub path: PathBuf,
    /// The file name (`01-bigger-q-blocks.toml`).
    pub name: String,
    /// Hash of the file and of its patch: a changed hypothesis is a new one.
    pub hash: String,
    pub message: String,
    pub tags: Vec<String>,
    pub change: Change,
    /// `deep = true`: this experiment takes continuous-profiling snapshots.
    pub deep: Option<bool>,
    /// `pairs = N`: overrides `[decision] pairs` for this experiment.
    pub pairs: Option<u32>,
}

/// Why a valid hypothesis cannot be applied to the current tree (it is then skipped).
#[derive(Debug, Clone, PartialEq)]
pub struct NotApplicable(pub String);

/// One path a hypothesis changes: its blob in HEAD and after the change (`None`: absent), so a
/// recovery can tell the hypothesis's edit from the user's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
    /// git's file modes (0o100644, 0o100755, 0o120000) after and before the change.
    pub mode: u32,
    pub mode_before: u32,
}

/// What applying a hypothesis to HEAD gives, computed (and checked) before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Repo-relative paths the change touches (for the sweep's crash recovery).
    pub files: Vec<String>,
    pub changes: Vec<FileChange>,
}

fn malformed(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::config(format!("hypothesis file {} is malformed: {why}", path.display())).hint(
        "fix or move the file; the format is in experiments/README.md (message, tags, patch or [[edit]] file/find/replace, deep, pairs)",
    )
}

/// Largest hypothesis file read (a message and a few edits); it and its patch go through the
/// bounded reader every file taken from a repo goes through, so a FIFO or device is an error.
const MAX_HYPOTHESIS_BYTES: u64 = 1 << 20;
/// Largest patch a hypothesis names.
const MAX_PATCH_BYTES: u64 = 64 << 20;

/// A repo-relative path that stays inside the repo, out of `.git` and out of ratchet's own
/// directories, after normalisation (`./.git/config` and `a/../.git/config` are `.git/config`).
fn check_rel_path(p: &str) -> std::result::Result<(), String> {
    if p.split('/').any(|c| c == "..") {
        return Err(format!("{p:?} must be a relative path inside the repo (no leading /, no ..)"));
    }
    vcs::normalise_rel(p).map(|_| ())
}

impl Hypothesis {
    /// Read and validate a hypothesis file (and its patch, when it names one).
    pub fn load(path: &Path) -> Result<Hypothesis> {
        let bytes = crate::safe_read::read_capped(path, MAX_HYPOTHESIS_BYTES).map_err(|e| {
            Error::usage(format!("cannot read hypothesis file: {e}")).hint("pass existing .toml files, or none for experiments/*.toml")
        })?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| malformed(path, "it is not UTF-8 text"))?;
        let raw: RawHypothesis = toml::from_str(&text).map_err(|e| malformed(path, e.to_string().trim_end()))?;
        let message = raw.message.trim().to_string();
        if message.contains('\0') {
            return Err(malformed(path, "`message` contains a NUL byte, which a git commit message cannot hold"));
        }
        if message.is_empty() {
            return Err(malformed(path, "`message` is empty; it is the experiment's commit message"));
        }
        if let Some(t) = raw.tags.iter().find(|t| t.trim().is_empty() || t.contains(';') || t.contains(',')) {
            return Err(malformed(path, format!("tag {t:?}: tags are non-empty and hold no ';' or ','")));
        }
        if raw.pairs.is_some_and(|p| p < 2) {
            return Err(malformed(path, "`pairs` must be at least 2 (a paired test needs two pairs)"));
        }
        let mut hashed = bytes;
        let change = match (raw.patch, raw.edit.is_empty()) {
            (Some(_), false) => return Err(malformed(path, "give either `patch` or [[edit]] tables, not both")),
            (None, true) => return Err(malformed(path, "no change: add `patch = \"file.patch\"` or at least one [[edit]] table")),
            (Some(p), true) => {
                let patch_path = path.parent().unwrap_or(Path::new(".")).join(&p);
                let text = crate::safe_read::read_capped(&patch_path, MAX_PATCH_BYTES)
                    .map_err(|e| malformed(path, format!("cannot read its patch: {e}")))?;
                let diff = git2::Diff::from_buffer(&text).map_err(|e| malformed(path, format!("patch {p}: {}", e.message())))?;
                if diff.deltas().len() == 0 {
                    return Err(malformed(path, format!("patch {p} changes no file")));
                }
                for d in diff.deltas() {
                    for f in [d.old_file().path(), d.new_file().path()].into_iter().flatten() {
                        check_rel_path(&f.to_string_lossy()).map_err(|e| malformed(path, format!("patch {p}: {e}")))?;
                    }
                }
                hashed.extend_from_slice(&text);
                Change::Patch { path: patch_path, text }
            }
            (None, false) => {
                for (i, e) in raw.edit.iter().enumerate() {
                    check_rel_path(&e.file).map_err(|why| malformed(path, format!("[[edit]] #{}: file {why}", i + 1)))?;
                    if e.find.is_empty() {
                        return Err(malformed(path, format!("[[edit]] #{}: `find` is empty", i + 1)));
                    }
                }
                Change::Edits(raw.edit)
            }
        };
        let hash = git2::Oid::hash_object(git2::ObjectType::Blob, &hashed).map_err(Error::from)?.to_string();
        Ok(Hypothesis {
            path: path.to_path_buf(),
            name: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            hash: hash[..12].to_string(),
            message,
            tags: raw.tags,
            change,
            deep: raw.deep,
            pairs: raw.pairs,
        })
    }

    /// [`Hypothesis::load`], except that a file that is malformed (not one that cannot be read)
    /// becomes a hypothesis of [`Change::Malformed`]: named by its file and the hash of its bytes
    /// (a fixed file is a new hypothesis), with the parse error as its reason.
    pub fn load_or_malformed(path: &Path) -> Result<Hypothesis> {
        match Self::load(path) {
            Err(e) if e.kind == crate::error::Kind::Config => {
                let bytes = crate::safe_read::read_capped(path, MAX_HYPOTHESIS_BYTES).unwrap_or_default();
                let hash = git2::Oid::hash_object(git2::ObjectType::Blob, &bytes).map_err(Error::from)?.to_string();
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let why = match &e.hint {
                    Some(h) => format!("{}; {h}", e.message),
                    None => e.message.clone(),
                };
                Ok(Hypothesis {
                    path: path.to_path_buf(),
                    message: format!("malformed hypothesis file {name}"),
                    name,
                    hash: hash[..12].to_string(),
                    tags: vec![],
                    change: Change::Malformed(why),
                    deep: None,
                    pairs: None,
                })
            }
            other => other,
        }
    }

    /// `<file name>@<hash>`: how results rows and the sweep name this hypothesis.
    pub fn key(&self) -> String {
        format!("{}@{}", self.name, self.hash)
    }

    /// Work out what applying the hypothesis to HEAD gives, in memory (a patch is applied to
    /// HEAD's tree, edits to HEAD's blobs), and check every path it would write. Nothing on disk
    /// is touched.
    pub fn plan(&self, repo: &Repo) -> std::result::Result<Plan, NotApplicable> {
        let base = repo.repo.head().and_then(|h| h.peel_to_tree()).map_err(|e| NotApplicable(e.message().to_string()))?;
        self.plan_on(repo, &base)
    }

    /// [`Hypothesis::plan`] on `base`'s tree instead of HEAD's (a parallel sweep starts trials on
    /// the head a pending recheck would make).
    pub fn plan_on(&self, repo: &Repo, base: &git2::Tree<'_>) -> std::result::Result<Plan, NotApplicable> {
        let git = |e: git2::Error| NotApplicable(e.message().to_string());
        let r = &repo.repo;
        let base = base.clone();
        let new_tree = match &self.change {
            Change::Malformed(why) => return Err(NotApplicable(why.clone())),
            Change::Patch { text, .. } => {
                let diff = git2::Diff::from_buffer(text).map_err(git)?;
                for d in diff.deltas() {
                    for f in [d.old_file().path(), d.new_file().path()].into_iter().flatten() {
                        let raw = f.to_string_lossy();
                        let n = vcs::normalise_rel(&raw).map_err(NotApplicable)?;
                        if n != raw {
                            return Err(NotApplicable(format!("the patch names {raw:?}, which is {n:?}: write it as that")));
                        }
                    }
                }
                let mut index =
                    r.apply_to_tree(&base, &diff, None).map_err(|e| NotApplicable(format!("the patch does not apply: {}", e.message())))?;
                index.write_tree_to(r).map_err(git)?
            }
            Change::Edits(edits) => {
                let mut contents: Vec<(String, FileMode, String)> = vec![];
                for (i, e) in edits.iter().enumerate() {
                    let na = |m: String| NotApplicable(format!("[[edit]] #{}: {m}", i + 1));
                    let file = resolve_edit_target(repo, &base, &e.file).map_err(na)?;
                    let at = match contents.iter().position(|(f, _, _)| *f == file) {
                        Some(at) => at,
                        None => {
                            let entry = base.get_path(Path::new(&file)).map_err(|_| {
                                na(format!("{file} is not tracked by git: a hypothesis edits only tracked files, never an untracked or ignored one"))
                            })?;
                            let mode = match entry.filemode() {
                                m if m == i32::from(FileMode::Blob) => FileMode::Blob,
                                m if m == i32::from(FileMode::BlobExecutable) => FileMode::BlobExecutable,
                                _ => return Err(na(format!("{file} is not a regular file in git"))),
                            };
                            let blob = r.find_blob(entry.id()).map_err(git)?;
                            let text = String::from_utf8(blob.content().to_vec()).map_err(|_| na(format!("{file} is not UTF-8 text")))?;
                            contents.push((file.clone(), mode, text));
                            contents.len() - 1
                        }
                    };
                    let text = &mut contents[at].2;
                    match text.matches(e.find.as_str()).count() {
                        1 => *text = text.replacen(e.find.as_str(), &e.replace, 1),
                        n => {
                            let where_ = if n == 0 { "not found".to_string() } else { format!("found {n} times") };
                            let shown: String = e.find.chars().take(60).collect();
                            return Err(na(format!("`find` {where_} in {file}: {shown:?}")));
                        }
                    }
                }
                let mut b = git2::build::TreeUpdateBuilder::new();
                for (f, mode, text) in &contents {
                    b.upsert(f.as_str(), r.blob(text.as_bytes()).map_err(git)?, *mode);
                }
                b.create_updated(r, &base).map_err(git)?
            }
        };
        let new = r.find_tree(new_tree).map_err(git)?;
        let diff = r.diff_tree_to_tree(Some(&base), Some(&new), None).map_err(git)?;
        let id = |f: git2::DiffFile| (!f.id().is_zero()).then(|| f.id().to_string());
        let mut changes = vec![];
        for d in diff.deltas() {
            let Some(path) = d.new_file().path().or(d.old_file().path()) else { continue };
            changes.push(FileChange {
                path: path.to_string_lossy().into_owned(),
                before: id(d.old_file()),
                after: id(d.new_file()),
                mode: i32::from(d.new_file().mode()) as u32,
                mode_before: i32::from(d.old_file().mode()) as u32,
            });
        }
        if repo.folds_case() {
            let mut seen = std::collections::HashSet::new();
            if let Some(c) = changes.iter().find(|c| !seen.insert(c.path.to_lowercase())) {
                return Err(NotApplicable(format!("{} and another path it writes are one file on this case-folding filesystem", c.path)));
            }
        }
        for c in &changes {
            check_target(repo, c).map_err(NotApplicable)?;
        }
        Ok(Plan { files: changes.iter().map(|c| c.path.clone()).collect(), changes })
    }

    /// Write a plan made by [`Hypothesis::plan`]: all of it, or (a write failing) none of it.
    pub fn apply(&self, repo: &Repo, plan: &Plan) -> std::result::Result<(), NotApplicable> {
        for (i, c) in plan.changes.iter().enumerate() {
            if let Err(e) = put_file(repo, &c.path, c.after.as_deref(), c.mode) {
                for d in plan.changes[..=i].iter().rev() {
                    let _ = put_file(repo, &d.path, d.before.as_deref(), d.mode_before);
                }
                return Err(NotApplicable(format!("cannot write {}: {e}", c.path)));
            }
        }
        Ok(())
    }
}

/// The tracked path an `[[edit]]` of `file` changes: normalised, symlinks followed, and still
/// inside the work tree and outside `.git` and ratchet's directories once resolved.
fn resolve_edit_target(repo: &Repo, base: &git2::Tree, file: &str) -> std::result::Result<String, String> {
    let n = vcs::normalise_rel(file)?;
    let root = repo.root();
    let real = root.join(&n).canonicalize().map_err(|e| format!("cannot read {file}: {e}"))?;
    let rel = real
        .strip_prefix(root)
        .map_err(|_| format!("{file} leads outside the repo (through a symbolic link, to {})", real.display()))?
        .to_str()
        .ok_or_else(|| format!("{file} resolves to a path that is not UTF-8"))?
        .to_string();
    let rel = vcs::normalise_rel(&rel).map_err(|e| format!("{file} resolves to {e}"))?;
    if base.get_path(Path::new(&rel)).is_err() && repo.folds_case() {
        // On a case-folding filesystem the name given may differ in case from the tracked one.
        if let Some(tracked) = tracked_case_insensitive(&repo.repo, base, &rel) {
            return Ok(tracked);
        }
    }
    Ok(rel)
}

/// The tracked path equal to `rel` but for case, if there is one.
fn tracked_case_insensitive(repo: &git2::Repository, base: &git2::Tree, rel: &str) -> Option<String> {
    let mut tree = base.clone();
    let mut out: Vec<String> = vec![];
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, id) =
            tree.iter().find(|e| e.name().is_some_and(|n| n.eq_ignore_ascii_case(part))).map(|e| (e.name().map(str::to_string), e.id()))?;
        out.push(name?);
        if i + 1 < parts.len() {
            tree = repo.find_tree(id).ok()?;
        }
    }
    Some(out.join("/"))
}

/// Refuse a target the hypothesis must not write: one reached through a symbolic link, an
/// existing untracked or ignored file, or a tracked file with uncommitted changes.
fn check_target(repo: &Repo, c: &FileChange) -> std::result::Result<(), String> {
    vcs::normalise_rel(&c.path)?;
    let root = repo.root();
    let parts: Vec<&str> = c.path.split('/').collect();
    for i in 1..parts.len() {
        let prefix = parts[..i].join("/");
        match std::fs::symlink_metadata(root.join(&prefix)) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("{} goes through the symbolic link {prefix}, which could lead anywhere", c.path))
            }
            Ok(m) if !m.is_dir() => return Err(format!("{} needs {prefix} to be a directory, but it is a file", c.path)),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let on_disk = std::fs::symlink_metadata(root.join(&c.path));
    match (&c.before, on_disk) {
        (None, Ok(_)) => {
            let what = if repo.repo.status_should_ignore(Path::new(&c.path)).unwrap_or(false) { "ignored" } else { "untracked" };
            Err(format!(
                "it adds {}, which would overwrite the {what} file there (a hypothesis never touches files git does not track)",
                c.path
            ))
        }
        (None, Err(_)) => Ok(()),
        (Some(_), Err(_)) => Err(format!("{} is tracked but not in the work tree (deleted, or outside the sparse-checkout cone)", c.path)),
        (Some(_), Ok(_)) => {
            let st = repo.repo.status_file(Path::new(&c.path)).map_err(|e| e.message().to_string())?;
            if st.is_empty() {
                Ok(())
            } else {
                Err(format!("{} has uncommitted changes", c.path))
            }
        }
    }
}

/// Make `path` hold `blob` (git `mode`), or remove it (`None`), through the rollback's atomic
/// writer: smudged as a checkout writes it, renamed over the path (a link there is replaced,
/// never followed), so a kill leaves the old content or the new, never a torn file.
pub fn put_file(repo: &Repo, path: &str, blob: Option<&str>, mode: u32) -> std::result::Result<(), String> {
    let oid = blob.map(Oid::from_str).transpose().map_err(|e| e.message().to_string())?;
    repo.write_blobs(&[(path.to_string(), oid, mode)]).map_err(|e| e.to_string())
}

/// Whether `path` holds `blob` now (`None`: nothing there), as git's filters see it.
pub fn holds(repo: &Repo, path: &str, blob: Option<&str>) -> bool {
    match blob.map(Oid::from_str) {
        Some(Ok(id)) => repo.workdir_holds(path, Some(id)),
        Some(Err(_)) => false,
        None => std::fs::symlink_metadata(repo.root().join(path)).is_err(),
    }
}

/// The hypothesis files of a sweep: the given paths (a directory means its `*.toml`), or every
/// `*.toml` in `<root>/experiments`, in name order. All are parsed before anything runs.
pub fn collect(root: &Path, paths: &[PathBuf]) -> Result<Vec<Hypothesis>> {
    let dir_tomls = |d: &Path| -> Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| Error::usage(format!("cannot list {}: {e}", d.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
            .collect();
        v.sort();
        Ok(v)
    };
    let files = if paths.is_empty() {
        let d = root.join("experiments");
        if !d.is_dir() {
            return Err(Error::usage(format!("no hypotheses: {} does not exist", d.display()))
                .hint("write hypothesis files there (see experiments/README.md), or pass their paths"));
        }
        dir_tomls(&d)?
    } else {
        let mut v = vec![];
        for p in paths {
            if p.is_dir() {
                v.extend(dir_tomls(p)?);
            } else {
                v.push(p.clone());
            }
        }
        v
    };
    if files.is_empty() {
        return Err(Error::usage("no hypothesis files (*.toml) to run").hint("see experiments/README.md for the format"));
    }
    // A malformed file is named at the start and recorded as refused; the others still run.
    let hyps = files.iter().map(|f| Hypothesis::load_or_malformed(f)).collect::<Result<Vec<_>>>()?;
    for (i, h) in hyps.iter().enumerate() {
        if let Some(j) = hyps[..i].iter().position(|o| o.name == h.name) {
            return Err(Error::usage(format!(
                "two hypothesis files are named {} ({} and {})",
                h.name,
                hyps[j].path.display(),
                h.path.display()
            ))
            .hint("file names identify hypotheses in the results: rename one"));
        }
    }
    Ok(hyps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A git repo holding `files`, committed.
    fn repo_with(dir: &Path, files: &[(&str, &str)]) -> Repo {
        let r = git2::Repository::init(dir).unwrap();
        let mut index = r.index().unwrap();
        for (f, text) in files {
            let p = dir.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            index.add_path(Path::new(f)).unwrap();
        }
        index.write().unwrap();
        let tree = r.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        r.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[]).unwrap();
        Repo::discover(dir).unwrap()
    }

    #[test]
    fn edits_parse_plan_and_refuse_cleanly() {
        let d = tempfile::tempdir().unwrap();
        let repo = repo_with(d.path(), &[("kernel.py", "BQ = 32\nBKV = 32\n")]);
        let p = write(
            d.path(),
            "01-a.toml",
            "message = \" exp: bq \"\ntags = [\"bq\"]\ndeep = true\npairs = 3\n[[edit]]\nfile = \"kernel.py\"\nfind = \"BQ = 32\\n\"\nreplace = \"BQ = 128\\n\"\n",
        );
        let h = Hypothesis::load(&p).unwrap();
        assert_eq!(h.message, "exp: bq");
        assert_eq!(h.tags, ["bq"]);
        assert_eq!((h.deep, h.pairs), (Some(true), Some(3)));
        assert!(h.key().starts_with("01-a.toml@") && h.key().len() == "01-a.toml@".len() + 12);
        let plan = h.plan(&repo).unwrap();
        assert_eq!(plan.files, ["kernel.py"]);
        assert_eq!(std::fs::read_to_string(d.path().join("kernel.py")).unwrap(), "BQ = 32\nBKV = 32\n", "planning writes nothing");
        h.apply(&repo, &plan).unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join("kernel.py")).unwrap(), "BQ = 128\nBKV = 32\n");
        assert!(holds(&repo, "kernel.py", plan.changes[0].after.as_deref()));
        let bad = write(d.path(), "02.toml", "message = \"x\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"BKV\"\nreplace = \"Y\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"nope\"\nreplace = \"z\"\n");
        let e = Hypothesis::load(&bad).unwrap().plan(&repo).unwrap_err();
        assert!(e.0.contains("#2") && e.0.contains("not found"), "{e:?}");
    }

    #[test]
    fn paths_are_normalised_before_the_git_and_ratchet_rules() {
        for bad in [
            "./.git/config",
            "a/../.git/config",
            ".GIT/config",
            "sub/.git/hooks/pre-commit",
            ".git./config",
            "./.ratchet/x",
            "RESULTS/results.csv",
        ] {
            assert!(vcs::normalise_rel(bad).is_err(), "{bad}");
        }
        assert_eq!(vcs::normalise_rel("./a/./b/../c.py").unwrap(), "a/c.py");
        assert!(vcs::normalise_rel("a/../../etc/passwd").is_err());
        assert!(check_rel_path("./.git/config").is_err());
    }

    #[test]
    fn malformed_files_name_file_and_reason() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            ("message = \"x\"\nmesage = 1\n[[edit]]\nfile=\"a\"\nfind=\"b\"\nreplace=\"c\"\n", "mesage"),
            ("message = \"\"\n[[edit]]\nfile=\"a\"\nfind=\"b\"\nreplace=\"c\"\n", "message"),
            ("message = \"x\"\n", "no change"),
            ("message = \"x\"\n[[edit]]\nfile=\"../etc/passwd\"\nfind=\"b\"\nreplace=\"c\"\n", "inside the repo"),
            ("message = \"x\"\n[[edit]]\nfile=\"/etc/passwd\"\nfind=\"b\"\nreplace=\"c\"\n", "inside the repo"),
            ("message = \"x\"\n[[edit]]\nfile=\"a\"\nfind=\"\"\nreplace=\"c\"\n", "empty"),
            ("message = \"x\"\npatch = \"missing.patch\"\n", "missing.patch"),
            ("message = \"x\"\npairs = 1\n[[edit]]\nfile=\"a\"\nfind=\"b\"\nreplace=\"c\"\n", "pairs"),
            ("message = \"x\"\n[[edit]]\nfile=\"a\"\nfind=\"b\"\n", "replace"),
            ("message = [\n", "TOML"),
        ];
        for (i, (text, needle)) in cases.iter().enumerate() {
            let p = write(d.path(), &format!("bad{i}.toml"), text);
            let e = Hypothesis::load(&p).unwrap_err().to_string();
            assert!(e.contains(&format!("bad{i}.toml")) && e.to_lowercase().contains(&needle.to_lowercase()), "{i}: {e}");
        }
    }

    #[test]
    fn duplicate_names_and_empty_dirs_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(collect(d.path(), &[]).unwrap_err().to_string().contains("experiments"));
        std::fs::create_dir(d.path().join("experiments")).unwrap();
        assert!(collect(d.path(), &[]).unwrap_err().to_string().contains("no hypothesis files"));
    }
}
