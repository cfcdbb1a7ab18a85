//! Hypothesis files (`experiments/*.toml`): one queued change per file, as a patch or as literal
//! find/replace edits, with its commit message, tags and per-experiment overrides. Parsing
//! validates everything up front so a typo fails the sweep at its start, not at 3 a.m.; applying
//! is all-or-nothing, so a hypothesis that no longer fits the incumbent leaves the tree untouched.
//! The format is documented in experiments/README.md.

use crate::error::{Error, Result};
use crate::vcs;
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};

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

/// The content of the files a hypothesis writes, computed before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Repo-relative paths the change touches (for the sweep's crash recovery).
    pub files: Vec<String>,
    writes: Vec<(PathBuf, String)>,
}

fn malformed(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::config(format!("hypothesis file {} is malformed: {why}", path.display())).hint(
        "fix or move the file; the format is in experiments/README.md (message, tags, patch or [[edit]] file/find/replace, deep, pairs)",
    )
}

/// A repo-relative path that stays inside the repo and out of ratchet's own directories.
fn check_rel_path(p: &str) -> std::result::Result<(), String> {
    let path = Path::new(p);
    if p.is_empty() {
        return Err("an empty path".into());
    }
    if path.is_absolute() || path.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(format!("{p:?} must be a relative path inside the repo (no leading /, no ..)"));
    }
    if vcs::is_ratchet_path(p) || p.starts_with(".git/") || p == ".git" {
        return Err(format!("{p:?} is in a directory that belongs to ratchet or git"));
    }
    Ok(())
}

impl Hypothesis {
    /// Read and validate a hypothesis file (and its patch, when it names one).
    pub fn load(path: &Path) -> Result<Hypothesis> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::usage(format!("cannot read hypothesis file {}: {e}", path.display()))
                .hint("pass existing .toml files, or none for experiments/*.toml")
        })?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| malformed(path, "it is not UTF-8 text"))?;
        let raw: RawHypothesis = toml::from_str(&text).map_err(|e| malformed(path, e.to_string().trim_end()))?;
        let message = raw.message.trim().to_string();
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
                let text = std::fs::read(&patch_path)
                    .map_err(|e| malformed(path, format!("cannot read its patch {}: {e}", patch_path.display())))?;
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

    /// `<file name>@<hash>`: how results rows and the sweep name this hypothesis.
    pub fn key(&self) -> String {
        format!("{}@{}", self.name, self.hash)
    }

    /// Work out what applying the hypothesis to the tree at `root` writes, without writing.
    pub fn plan(&self, root: &Path) -> std::result::Result<Plan, NotApplicable> {
        let edits = match &self.change {
            Change::Edits(e) => e,
            Change::Patch { text, .. } => {
                let diff = git2::Diff::from_buffer(text).map_err(|e| NotApplicable(e.message().to_string()))?;
                let files = diff
                    .deltas()
                    .flat_map(|d| [d.old_file().path().map(Path::to_path_buf), d.new_file().path().map(Path::to_path_buf)])
                    .flatten()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                return Ok(Plan { files, writes: vec![] });
            }
        };
        let mut contents: Vec<(String, String)> = vec![];
        let canon_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        for (i, e) in edits.iter().enumerate() {
            let at = match contents.iter().position(|(f, _)| *f == e.file) {
                Some(at) => at,
                None => {
                    let p = root.join(&e.file);
                    // A symlink must not lead the edit out of the repo.
                    if let Ok(c) = p.canonicalize() {
                        if !c.starts_with(&canon_root) {
                            return Err(NotApplicable(format!("[[edit]] #{}: {} leads outside the repo", i + 1, e.file)));
                        }
                    }
                    let text = std::fs::read_to_string(&p)
                        .map_err(|err| NotApplicable(format!("[[edit]] #{}: cannot read {}: {err}", i + 1, e.file)))?;
                    contents.push((e.file.clone(), text));
                    contents.len() - 1
                }
            };
            let text = &mut contents[at].1;
            match text.matches(e.find.as_str()).count() {
                1 => *text = text.replacen(e.find.as_str(), &e.replace, 1),
                n => {
                    let where_ = if n == 0 { "not found".to_string() } else { format!("found {n} times") };
                    let shown: String = e.find.chars().take(60).collect();
                    return Err(NotApplicable(format!("[[edit]] #{}: `find` {where_} in {}: {shown:?}", i + 1, e.file)));
                }
            }
        }
        Ok(Plan {
            files: contents.iter().map(|(f, _)| f.clone()).collect(),
            writes: contents.into_iter().map(|(f, t)| (root.join(f), t)).collect(),
        })
    }

    /// Write a plan made by [`Hypothesis::plan`] (a patch is checked, then applied, by git).
    pub fn apply(&self, repo: &git2::Repository, plan: &Plan) -> std::result::Result<(), NotApplicable> {
        match &self.change {
            Change::Patch { text, .. } => {
                let diff = git2::Diff::from_buffer(text).map_err(|e| NotApplicable(e.message().to_string()))?;
                let mut check = git2::ApplyOptions::new();
                check.check(true);
                repo.apply(&diff, git2::ApplyLocation::WorkDir, Some(&mut check))
                    .map_err(|e| NotApplicable(format!("the patch does not apply: {}", e.message())))?;
                repo.apply(&diff, git2::ApplyLocation::WorkDir, None)
                    .map_err(|e| NotApplicable(format!("the patch does not apply: {}", e.message())))
            }
            Change::Edits(_) => {
                for (p, text) in &plan.writes {
                    std::fs::write(p, text).map_err(|e| NotApplicable(format!("cannot write {}: {e}", p.display())))?;
                }
                Ok(())
            }
        }
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
    let hyps = files.iter().map(|f| Hypothesis::load(f)).collect::<Result<Vec<_>>>()?;
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

    #[test]
    fn edits_parse_plan_and_refuse_cleanly() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kernel.py"), "BQ = 32\nBKV = 32\n").unwrap();
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
        let plan = h.plan(d.path()).unwrap();
        assert_eq!(plan.files, ["kernel.py"]);
        let bad = write(d.path(), "02.toml", "message = \"x\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"BKV\"\nreplace = \"Y\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"nope\"\nreplace = \"z\"\n");
        let e = Hypothesis::load(&bad).unwrap().plan(d.path()).unwrap_err();
        assert!(e.0.contains("#2") && e.0.contains("not found"), "{e:?}");
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
